package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/window"
)

// Header names, per draft-ietf-httpapi-ratelimit-headers-10 and the
// de-facto X-RateLimit-* trio (as GitHub sends them).
const (
	hPolicy    = "RateLimit-Policy"
	hRateLimit = "RateLimit"
	hLimit     = "X-RateLimit-Limit"
	hRemaining = "X-RateLimit-Remaining"
	hReset     = "X-RateLimit-Reset"
	hRetry     = "Retry-After"
)

// policyHeader serializes RateLimit-Policy: one item per limit, the name as
// an sf-string with q (quota) and w (window, seconds).
//
//	"minute";q=60;w=60, "day";q=10000;w=86400
func policyHeader(ls []config.Limit) (string, error) {
	list := make(httpsfv.List, 0, len(ls))
	for _, l := range ls {
		it := httpsfv.NewItem(l.Name)
		it.Params.Add("q", l.Limit)
		it.Params.Add("w", int64(l.Period()/time.Second))
		list = append(list, it)
	}
	s, err := httpsfv.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("RateLimit-Policy: %w", err)
	}
	return s, nil
}

// rateLimitHeader serializes RateLimit: one item per decided rule with r
// (remaining quota) and t (seconds until the whole quota is back, rounded
// up).
//
//	"minute";r=12;t=30, "day";r=9987;t=86400
func rateLimitHeader(ds []window.Decision) string {
	list := make(httpsfv.List, 0, len(ds))
	for _, d := range ds {
		it := httpsfv.NewItem(d.Rule)
		it.Params.Add("r", d.Remaining)
		it.Params.Add("t", ceilDiv(d.ResetAfter, time.Second))
		list = append(list, it)
	}
	s, err := httpsfv.Marshal(list)
	if err != nil {
		// Names are validated by config and numbers are in range: this
		// cannot happen, and a missing header is better than a wrong one.
		return ""
	}
	return s
}

// setHeaders writes the rate-limit headers of a decided request: both
// standard fields for every rule decided, X-RateLimit-* for the deciding
// rule, and Retry-After when it is denied.
func setHeaders(hd http.Header, policy string, ds []window.Decision, deciding window.Decision, now time.Time) {
	hd.Set(hPolicy, policy)
	if v := rateLimitHeader(ds); v != "" {
		hd.Set(hRateLimit, v)
	}
	hd.Set(hLimit, strconv.FormatInt(deciding.Limit, 10))
	hd.Set(hRemaining, strconv.FormatInt(deciding.Remaining, 10))
	hd.Set(hReset, strconv.FormatInt(resetEpoch(now, deciding.ResetAfter), 10))
	if !deciding.Allowed && deciding.RetryAfter != window.Never {
		hd.Set(hRetry, strconv.FormatInt(retrySeconds(deciding.RetryAfter), 10))
	}
}

// retrySeconds is Retry-After in delta seconds: rounded up, so a client
// that waits exactly that long is never early, and at least 1.
func retrySeconds(d time.Duration) int64 {
	return max(ceilDiv(d, time.Second), 1)
}

// resetEpoch is the Unix second, rounded up, at which now+d has passed.
func resetEpoch(now time.Time, d time.Duration) int64 {
	n := now.Add(d).UnixNano()
	s := n / int64(time.Second)
	if n%int64(time.Second) > 0 {
		s++
	}
	return s
}

// ceilDiv returns d/unit rounded up, for d >= 0; Never stays huge without
// overflowing.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/unit) + 1
}
