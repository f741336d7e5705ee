//go:build js

package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// TestNoStoreInJS: a js build has no memory store; a store left nil fails
// every check with ErrNoStore instead of counting nowhere.
func TestNoStoreInJS(t *testing.T) {
	rules := map[string][]Rule{
		"shared": {{Rule: window.Rule{Name: "minute", Limit: 10, Period: time.Minute}}},
		"local":  {{Rule: window.Rule{Name: "second", Limit: 10, Period: time.Second}, Local: true}},
		"both": {{Rule: window.Rule{Name: "second", Limit: 10, Period: time.Second}, Local: true},
			{Rule: window.Rule{Name: "minute", Limit: 10, Period: time.Minute}}},
	}
	for name, rs := range rules {
		t.Run(name, func(t *testing.T) {
			l := New(Options{})
			var res Result
			err := l.CheckInto(context.Background(), time.Unix(1_800_000_000, 0), "ip:192.0.2.1", rs, 1, &res)
			if !errors.Is(err, ErrNoStore) {
				t.Errorf("CheckInto = %v, want ErrNoStore", err)
			}
		})
	}
}
