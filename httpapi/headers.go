package httpapi

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"time"
	"unsafe"

	"github.com/dunglas/httpsfv"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/window"
)

// Header names, per draft-ietf-httpapi-ratelimit-headers-10 and the
// de-facto X-RateLimit-* trio (as GitHub sends them), in the canonical form
// net/http puts on the wire, so they can be set without canonicalizing on
// every response.
var (
	hPolicy    = textproto.CanonicalMIMEHeaderKey("RateLimit-Policy")
	hRateLimit = textproto.CanonicalMIMEHeaderKey("RateLimit")
	hLimit     = textproto.CanonicalMIMEHeaderKey("X-RateLimit-Limit")
	hRemaining = textproto.CanonicalMIMEHeaderKey("X-RateLimit-Remaining")
	hReset     = textproto.CanonicalMIMEHeaderKey("X-RateLimit-Reset")
	hRetry     = textproto.CanonicalMIMEHeaderKey("Retry-After")
)

// maxSFInt is the largest integer a structured field can carry (RFC 9651).
const maxSFInt = 999_999_999_999_999

// policyHeader serializes RateLimit-Policy: one item per limit, the name as
// an sf-string with q (quota) and w (window, seconds). items[i] is ls[i]'s
// name as nameItems serialized it; like appendRateLimit, the result is byte
// for byte httpsfv.Marshal's for the same list (a test checks), built
// without the list: the Worker builds its handler on every request.
//
//	"minute";q=60;w=60, "day";q=10000;w=86400
func policyHeader(items []string, ls []config.Limit) string {
	var buf [256]byte
	b := buf[:0]
	for i, l := range ls {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, items[i]...)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, min(l.Limit, maxSFInt), 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, min(int64(l.Period()/time.Second), maxSFInt), 10)
	}
	return string(b)
}

// nameItems serializes each limit's name as an sf-string item, once, at
// New; rateLimitHeader appends the two integer parameters per response.
func nameItems(ls []config.Limit) ([]string, error) {
	out := make([]string, len(ls))
	for i, l := range ls {
		s, err := httpsfv.Marshal(httpsfv.NewItem(l.Name))
		if err != nil {
			return nil, fmt.Errorf("RateLimit: %q: %w", l.Name, err)
		}
		out[i] = s
	}
	return out, nil
}

// appendRateLimit appends the RateLimit value: one item per decided rule
// with r (remaining quota) and t (seconds until more quota is back,
// rounded up: NextAfter). Draft-10 defines t so (§4.1.2), and wants a
// Retry-After no earlier than it (§6); the time until the whole quota is
// back, which a sliding window's client would wait for in vain, is
// X-RateLimit-Reset's. items[i] is ds[i]'s name as nameItems serialized it. The
// result is byte for byte what httpsfv.Marshal produces for the same list
// (a test checks); appending it here costs no allocation instead of dozens.
// A rule that was not decided (a zero decision: its store failed, see
// limiter.ErrSharedUnread) has no item.
//
//	"minute";r=12;t=30, "day";r=9987;t=86400
func appendRateLimit(b []byte, items []string, ds []window.Decision) []byte {
	start := len(b)
	for i, d := range ds {
		if undecided(d) {
			continue
		}
		if len(b) > start {
			b = append(b, ", "...)
		}
		b = append(b, items[i]...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, min(max(d.Remaining, 0), maxSFInt), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, min(ceilDiv(d.NextAfter, time.Second), maxSFInt), 10)
	}
	return b
}

// undecided reports whether d is the zero decision of a rule that was not
// decided: its store failed (limiter.ErrSharedUnread). Every rule has a
// positive limit, so its Limit tells it. It has no RateLimit item, no rule
// in the check API's answer and no place in violated-policies.
func undecided(d window.Decision) bool { return d.Limit == 0 }

// rateLimitHeader returns the RateLimit value (see appendRateLimit).
func rateLimitHeader(items []string, ds []window.Decision) string {
	var buf [512]byte
	return string(appendRateLimit(buf[:0], items, ds))
}

// setHeaders writes the rate-limit headers of a decided request: both
// standard fields for every rule decided, X-RateLimit-* for the rule
// shown picks, and Retry-After when it is denied. The values are built in
// one buffer, and the header slices share one array, both in one
// allocation (ownValues) when the values fit its buffer; longer ones
// (more rules, longer names) take as many more as append makes. It
// returns the array: RateLimit-Policy, RateLimit, X-RateLimit-Limit,
// -Remaining, -Reset and Retry-After ("" when not set).
func setHeaders(hd http.Header, policy string, items []string, ds []window.Decision, deciding window.Decision, now time.Time) *[6]string {
	ov := new(ownValues)
	var end [5]int
	// Past the array, append moves the values to a buffer of their own.
	b := appendRateLimit(ov.buf[:0], items, ds)
	end[0] = len(b)
	trio := shown(ds, deciding)
	b = strconv.AppendInt(b, trio.Limit, 10)
	end[1] = len(b)
	b = strconv.AppendInt(b, trio.Remaining, 10)
	end[2] = len(b)
	b = strconv.AppendInt(b, resetEpoch(now, trio.ResetAfter), 10)
	end[3] = len(b)
	retry := !deciding.Allowed && deciding.RetryAfter != window.Never
	if retry {
		b = strconv.AppendInt(b, retrySeconds(deciding.RetryAfter), 10)
	}
	end[4] = len(b)
	// b is not written again: the strings may share its bytes.
	s := unsafe.String(unsafe.SliceData(b), len(b))
	vals := &ov.vals
	vals[0], vals[1], vals[2], vals[3], vals[4], vals[5] = policy, s[:end[0]], s[end[0]:end[1]], s[end[1]:end[2]], s[end[2]:end[3]], s[end[3]:end[4]]
	hd[hPolicy] = vals[0:1:1]
	hd[hRateLimit] = vals[1:2:2]
	hd[hLimit] = vals[2:3:3]
	hd[hRemaining] = vals[3:4:4]
	hd[hReset] = vals[4:5:5]
	if retry {
		hd[hRetry] = vals[5:6:6]
	}
	return vals
}

// ownValues holds the values setHeaders sets and the bytes of all but
// RateLimit-Policy: 256 bytes, a size class of its own, holding the
// values of three rules of long names and large limits. (The two
// allocations it replaces took 192 bytes for the values of three rules
// of 7-digit limits.)
type ownValues struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	vals [6]string
	buf  [160]byte
}

// shown returns the decision that X-RateLimit-* (and the check API's
// top-level numbers) show: deciding, except that on an admitted request,
// of the rules left with as little as deciding, the one whose whole quota
// is back last. window.Combine breaks a tie in remaining by rule order,
// and a client that waits for X-RateLimit-Reset when X-RateLimit-Remaining
// is 0 (GitHub's convention) was sent back while the other rule of the tie
// still refused it. ds are the decisions deciding was combined from.
func shown(ds []window.Decision, deciding window.Decision) window.Decision {
	if !deciding.Allowed {
		return deciding // the longest wait: every rule admits by its Reset
	}
	for _, d := range ds {
		if d.Remaining == deciding.Remaining && d.ResetAfter > deciding.ResetAfter {
			deciding = d
		}
	}
	return deciding
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
// overflowing. Not inlined, for the Worker's bundle (Logged).
//
//go:noinline
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/unit) + 1
}
