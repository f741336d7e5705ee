package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// Decide answers with the deciding rule's decision: all a caller needs to
// admit or refuse a request and to say when to come back. The fourth
// request, at 12:00:45, is admitted one nanosecond after 12:01:00, when the
// three requests fall into the previous bucket and their weight drops
// below 3.
func ExampleLimiter_Decide() {
	l := limiter.New(limiter.Options{}) // memory stores, deny cache on
	rules := []limiter.Rule{{Rule: window.Rule{Name: "minute", Limit: 3, Period: time.Minute}}}
	now := time.Date(2026, 11, 22, 12, 0, 45, 0, time.UTC)
	for range 4 {
		d, err := l.Decide(context.Background(), now, "k:client", rules, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%t remaining=%d retry_after=%s\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true remaining=2 retry_after=0s
	// allowed=true remaining=1 retry_after=0s
	// allowed=true remaining=0 retry_after=0s
	// allowed=false remaining=0 retry_after=15.000000001s
}
