package httpapi

import (
	"testing"
	"time"
)

func TestPeriod(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Second: "1s", 90 * time.Second: "1m30s", time.Minute: "1m", 24 * time.Hour: "24h", 90 * time.Minute: "1h30m"} {
		if got := period(d); got != want {
			t.Errorf("period(%v) = %q, want %q", d, got, want)
		}
	}
}
