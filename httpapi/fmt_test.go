package httpapi

import "fmt"

func fmtSscan(s string, n *int64) (int, error) { return fmt.Sscan(s, n) }
