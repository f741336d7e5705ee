package httpapi

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/window"
)

// TestRateLimitHeaderMatchesHTTPSFV: the hand-appended RateLimit value is
// exactly what httpsfv serializes for the same list, which leaves out the
// rules not decided.
func TestRateLimitHeaderMatchesHTTPSFV(t *testing.T) {
	ls := []config.Limit{{Name: "ip-second"}, {Name: "minute"}, {Name: "day"}, {Name: "a.b_c-D9"}}
	items, err := nameItems(ls)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.IntN(len(ls))
		ds := make([]window.Decision, n)
		list := httpsfv.List{}
		for i := range ds {
			if rng.IntN(5) == 0 {
				continue // not decided (limiter.ErrSharedUnread): no item
			}
			ds[i] = window.Decision{
				Rule:       ls[i].Name,
				Limit:      1 + rng.Int64N(config.MaxLimit),
				Remaining:  rng.Int64N(config.MaxLimit + 1),
				ResetAfter: time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))),
			}
			ds[i].NextAfter = time.Duration(rng.Int64N(int64(ds[i].ResetAfter) + 1))
			it := httpsfv.NewItem(ls[i].Name)
			it.Params.Add("r", ds[i].Remaining)
			it.Params.Add("t", ceilDiv(ds[i].NextAfter, time.Second))
			list = append(list, it)
		}
		want, err := httpsfv.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		if got := rateLimitHeader(items, ds); got != want {
			t.Fatalf("rateLimitHeader = %q, httpsfv = %q", got, want)
		}
		// And it parses back as a structured list.
		if _, err := httpsfv.UnmarshalList([]string{want}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPolicyHeader: the hand-appended RateLimit-Policy value is exactly
// what httpsfv serializes for the same list.
func TestPolicyHeader(t *testing.T) {
	free := config.Default().Plans["free"].Limits
	items, err := nameItems(free)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := policyHeader(items, free), `"minute";q=60;w=60, "day";q=10000;w=86400`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	names := []string{"ip-second", "minute", "day", "a.b_c-D9", "X"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		ls := make([]config.Limit, 1+rng.IntN(len(names)))
		list := httpsfv.List{}
		for i := range ls {
			ls[i] = config.Limit{
				Name:   names[i],
				Limit:  1 + rng.Int64N(config.MaxLimit),
				Window: (time.Duration(1+rng.Int64N(int64(config.MaxWindow/time.Second))) * time.Second).String(),
			}
			it := httpsfv.NewItem(ls[i].Name)
			it.Params.Add("q", ls[i].Limit)
			it.Params.Add("w", int64(ls[i].Period()/time.Second))
			list = append(list, it)
		}
		want, err := httpsfv.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		items, err := nameItems(ls)
		if err != nil {
			t.Fatal(err)
		}
		if got := policyHeader(items, ls); got != want {
			t.Fatalf("policyHeader = %q, httpsfv = %q", got, want)
		}
	}
}

// TestSetHeadersAllocatesOnce: the values of a decided request's
// rate-limit fields and the header slices that hold them take one
// allocation (ownValues), for three rules of long names and 7-digit limits,
// and are the values the fields show.
func TestSetHeadersAllocatesOnce(t *testing.T) {
	ls := []config.Limit{
		{Name: "per-second-burst", Limit: 1_000_000, Window: "1s"},
		{Name: "per-minute-quota", Limit: 6_000_000, Window: "1m"},
		{Name: "per-day-quota", Limit: 9_000_000, Window: "24h"},
	}
	items, err := nameItems(ls)
	if err != nil {
		t.Fatal(err)
	}
	ds := []window.Decision{
		{Allowed: true, Rule: ls[0].Name, Limit: 1_000_000, Remaining: 999_990, ResetAfter: 2 * time.Second, NextAfter: time.Second},
		{Allowed: true, Rule: ls[1].Name, Limit: 6_000_000, Remaining: 5_999_990, ResetAfter: 81 * time.Second, NextAfter: 51 * time.Second},
		{Allowed: true, Rule: ls[2].Name, Limit: 9_000_000, Remaining: 8_999_990, ResetAfter: 100_791 * time.Second, NextAfter: 57_591 * time.Second},
	}
	policy := policyHeader(items, ls)
	now := time.Unix(1_800_000_000, 0)
	hd := http.Header{}
	if n := testing.AllocsPerRun(20, func() {
		clear(hd)
		setHeaders(hd, policy, items, ds, window.Combine(ds), now)
	}); n != 1 {
		t.Errorf("setHeaders: %v allocations, want 1", n)
	}
	want := map[string]string{
		"Ratelimit-Policy":      policy,
		"Ratelimit":             `"per-second-burst";r=999990;t=1, "per-minute-quota";r=5999990;t=51, "per-day-quota";r=8999990;t=57591`,
		"X-Ratelimit-Limit":     "1000000",
		"X-Ratelimit-Remaining": "999990",
		"X-Ratelimit-Reset":     "1800000002", // the whole quota back: ResetAfter
	}
	for k, v := range want {
		if got := hd[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if len(hd) != len(want) {
		t.Errorf("fields %v, want those of %v", hd, want)
	}
}

// TestRateLimitValuesOutliveLaterRequests: the values setHeaders sets are
// made over its buffer's bytes (ownValues), so no later request may write
// them again: a header map net/http, the Lambda's adapter or an origin
// still holds shows what its own request was told. Each response's
// fields are compared, after all the requests, with a copy taken when it
// was answered; allowed and denied (Retry-After), plan rules of short
// names (values inside the buffer) and of long ones (RateLimit alone
// longer than the buffer: moved out of it).
func TestRateLimitValuesOutliveLaterRequests(t *testing.T) {
	long := strings.Repeat("a-rule-of-a-rather-long-name-", 2)
	for _, names := range [][3]string{{"minute", "hour", "day"}, {long + "minute", long + "hour", long + "day"}} {
		f := newFixture(t, testConfig(t, func(m map[string]any) {
			m["plans"].(map[string]any)["free"].(map[string]any)["limits"] = []any{
				map[string]any{"name": names[0], "limit": 3, "window": "1m"},
				map[string]any{"name": names[1], "limit": 50, "window": "1h"},
				map[string]any{"name": names[2], "limit": 100, "window": "24h"},
			}
		}), nil)
		type answer struct {
			hd   http.Header
			want map[string]string
		}
		var answers []answer
		for i := range 24 { // five IPs in turn: the 4th and 5th of each denied
			w := f.do(req{remote: "192.0.2." + strconv.Itoa(1+i%5) + ":1"})
			want := map[string]string{}
			for k, vs := range w.Header() {
				want[k] = strings.Clone(strings.Join(vs, "\n"))
			}
			if _, ok := want["Retry-After"]; ok != (i >= 15) {
				t.Fatalf("request %d: %d, Retry-After %t", i, w.Code, ok)
			}
			answers = append(answers, answer{w.Header(), want})
		}
		if n := len(answers[0].want["Ratelimit"]); names[0] != "minute" && n <= len(ownValues{}.buf) {
			t.Fatalf("RateLimit of %d bytes, want more than the buffer's %d", n, len(ownValues{}.buf))
		}
		for i, a := range answers {
			for k, v := range a.want {
				if got := strings.Join(a.hd[k], "\n"); got != v {
					t.Errorf("%s: request %d's %s is %q after the later requests, was %q", names[0], i, k, got, v)
				}
			}
		}
	}
}
