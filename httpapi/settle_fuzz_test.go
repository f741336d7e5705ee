package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dunglas/httpsfv"
)

// FuzzOriginFields: whatever rate-limit fields an origin behind the proxy
// adds to its answer (X-RateLimit-Limit, -Remaining, -Reset, RateLimit,
// RateLimit-Policy: none, one or two lines of any value each, on a 103
// before it too), the answer the client gets carries the pre-filter's
// values first and remains readable, as settle promises: RateLimit and
// RateLimit-Policy are structured-field lists led by the pre-filter's
// items, the origin's lines kept only when both still parse; the X-RateLimit
// trio is the pre-filter's whole, or the origin's whole (as the origin
// sent it) when its Remaining is one integer below the pre-filter's. An origin
// that sends none of them leaves the pre-filter's as they were.
func FuzzOriginFields(f *testing.F) {
	f.Add(uint16(0), "")
	f.Add(uint16(0b01_01_01_01_01), "100\n5\n1800000100\n\"o\";q=10;w=60\n\"o\";r=5;t=30")
	f.Add(uint16(0b10_00_10_00_00), "limit=100, remaining=25, reset=5\n\"o\";r=1;t=1\n7")
	f.Add(uint16(0b11_00_01_00_00|1<<10), "0\n1\n2")
	f.Add(uint16(0b00_00_00_10_00|1<<11), "9999\n-1\n")
	f.Add(uint16(0b00_00_00_01_00), " 1 ")
	f.Add(uint16(0b00_00_01_01_01), "60\n2\n1800000060") // a tie: the pre-filter's
	f.Add(uint16(0b00_00_00_00_01|1<<10), "(")
	cfg := testConfig(f, nil)
	var mu sync.Mutex
	var send func(http.ResponseWriter) // the origin's fields, under mu
	proxy := proxyTo(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := send
		mu.Unlock()
		s(w)
		w.WriteHeader(http.StatusOK)
	}))
	fields := []string{hLimit, hRemaining, hReset, hPolicy, hRateLimit}
	f.Fuzz(func(t *testing.T, how uint16, values string) {
		vs := strings.Split(values, "\n")
		next := 0
		sent := map[string][]string{} // the origin's lines of each field
		var lines [5][]string
		for i := range fields {
			for range how >> (2 * i) & 3 {
				v := textproto.TrimString(vs[next%len(vs)])
				next++
				if strings.ContainsFunc(v, func(r rune) bool { return r != '\t' && (r < ' ' || r > '~') }) {
					return // no value an origin sends
				}
				lines[i] = append(lines[i], v)
			}
		}
		early := how&(1<<10) != 0 // the fields on a 103 first, too
		mu.Lock()
		send = func(w http.ResponseWriter) {
			hd := w.Header()
			if early {
				for i, k := range fields {
					hd[k] = slices.Clone(lines[i])
				}
				hd["Link"] = []string{"</a.css>; rel=preload"}
				w.WriteHeader(http.StatusEarlyHints)
				clear(hd)
			}
			for i, k := range fields {
				hd[k] = slices.Clone(lines[i])
				if len(lines[i]) > 0 {
					sent[k] = lines[i]
				}
			}
		}
		mu.Unlock()
		plain := newFixture(t, cfg, nil)
		want := plain.do(req{}).Result().Header
		fx := newFixture(t, cfg, func(o *Options) { o.Next = proxy })
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.RemoteAddr = "192.0.2.1:51000"
		fx.h.ServeHTTP(finalOnly{w}, r)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		got := w.Result().Header
		if len(sent) == 0 {
			for _, k := range fields {
				if !slices.Equal(got[k], want[k]) {
					t.Fatalf("%s = %q, want the pre-filter's %q: the origin sent none", k, got[k], want[k])
				}
			}
			return
		}
		for _, k := range []string{hPolicy, hRateLimit} {
			if len(got[k]) == 0 || got[k][0] != want[k][0] {
				t.Fatalf("%s = %q, want it led by the pre-filter's %q", k, got[k], want[k])
			}
			if _, err := httpsfv.UnmarshalList(got[k]); err != nil {
				t.Fatalf("%s = %q (the origin sent %q): no list: %v", k, got[k], sent[k], err)
			}
		}
		ours := true
		for _, k := range fields[:3] {
			ours = ours && slices.Equal(got[k], want[k])
		}
		if ours {
			return
		}
		theirs, err := strconv.ParseInt(strings.TrimSpace(strings.Join(got[hRemaining], ",")), 10, 64)
		mine, _ := strconv.ParseInt(want[hRemaining][0], 10, 64)
		if err != nil || theirs >= mine || !slices.Equal(got[hRemaining], sent[hRemaining]) {
			t.Fatalf("X-RateLimit trio %q %q %q, the pre-filter's %q %q %q, the origin's %q %q %q",
				got[hLimit], got[hRemaining], got[hReset], want[hLimit], want[hRemaining], want[hReset], sent[hLimit], sent[hRemaining], sent[hReset])
		}
		for _, k := range []string{hLimit, hReset} {
			if len(got[k]) > 0 && !slices.Equal(got[k], sent[k]) {
				t.Fatalf("%s = %q with the origin's X-RateLimit-Remaining %q: not the origin's %q", k, got[k], got[hRemaining], sent[k])
			}
		}
	})
}

// finalOnly passes on the final answer alone, as a client reads it (the
// recorder takes a 103 for the answer).
type finalOnly struct{ *httptest.ResponseRecorder }

func (w finalOnly) WriteHeader(code int) {
	if code >= 200 {
		w.ResponseRecorder.WriteHeader(code)
	}
}
