package window_test

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/window"
)

// The boundary burst: 100 requests at 11:59:59 and 100 at 12:00:01 against
// 100 per minute. A fixed window would admit all 200; the sliding estimate
// still counts floor(100 × 59/60) = 98 of the previous minute at 12:00:01.
func ExampleRule_Decide() {
	r := window.Rule{Name: "minute", Limit: 100, Period: time.Minute}
	counts := map[int64]int64{} // bucket index → admitted cost, as a store keeps them

	burst := func(now time.Time, n int) (admitted int, last window.Decision) {
		for range n {
			i := window.Index(now, r.Period)
			last = r.Decide(now, counts[i-1], counts[i], 1)
			if last.Allowed {
				counts[i]++
				admitted++
			}
		}
		return admitted, last
	}

	n, _ := burst(time.Date(2026, 11, 22, 11, 59, 59, 0, time.UTC), 100)
	fmt.Println("11:59:59 admitted:", n)
	n, d := burst(time.Date(2026, 11, 22, 12, 0, 1, 0, time.UTC), 100)
	fmt.Println("12:00:01 admitted:", n)
	fmt.Println("last:", d.Allowed, "used", d.Used, "remaining", d.Remaining, "retry after", d.RetryAfter)
	// Output:
	// 11:59:59 admitted: 100
	// 12:00:01 admitted: 2
	// last: false used 100 remaining 0 retry after 200.000001ms
}
