package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/parity"
)

// workerdHeader is a header value as the Worker's Go code gets it from
// workerd (seen under wrangler dev: TestWorkerdKeySpace): its bytes
// read as UTF-8, a byte that begins no character as U+FFFD, and a leading
// U+FEFF dropped. (A cut multi-byte character is one U+FFFD to workerd and
// one per byte here; the generated values hold lone bytes only.)
func workerdHeader(v string) string {
	if utf8.ValidString(v) {
		return strings.TrimPrefix(v, "\ufeff")
	}
	var b strings.Builder
	for _, r := range v { // a byte that begins no character is utf8.RuneError
		b.WriteRune(r)
	}
	return strings.TrimPrefix(b.String(), "\ufeff")
}

// keyLinesJS is httpapi's keyLine as the Worker's Wasm build has it
// (keylines_js.go): it does nothing, so the origin gets a key header as
// the Worker's code got it. On the host, where these tests run the
// Worker's handler, keylines.go trims it: keyLinesJS puts back, on the way
// to fetch, the value of each key header the handler sends on.
type keyLinesJS struct {
	fetch   http.RoundTripper
	headers []string // canonical names of the configured key headers
	in      func() http.Header
}

func (k keyLinesJS) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	for _, name := range k.headers {
		if _, ok := out.Header[name]; !ok {
			continue
		}
		if vs, ok := k.in()[name]; ok {
			out.Header[name] = slices.Clone(vs)
		}
	}
	return k.fetch.RoundTrip(out)
}

// wasmWorkerSide is workerSide with what the Wasm build does otherwise
// than the host's: header values read as workerd reads them
// (workerdHeader) and keyLinesJS.
func wasmWorkerSide(t *testing.T, c parity.Config, clock *parity.Clock) parity.Side {
	t.Helper()
	cfg, err := config.Parse([]byte(c.Text))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range cfg.Identity.Headers {
		names = append(names, http.CanonicalHeaderKey(h))
	}
	side := workerSide(t, c, clock, func(fetch http.RoundTripper, in func() http.Header) http.RoundTripper {
		return keyLinesJS{fetch: fetch, headers: names, in: in}
	})
	do := side.Do
	side.Name, side.Do = "worker (Wasm)", func(r *parity.Request) (parity.Outcome, error) {
		w := *r
		w.Header = make([]parity.Field, len(r.Header))
		for i, f := range r.Header {
			w.Header[i] = parity.Field{Name: f.Name, Value: workerdHeader(f.Value)}
		}
		return do(&w)
	}
	return side
}

// wasmNormaliser is workerNormaliser, and the README's one difference of
// key headers at the origin ("the local server and the Lambda send the
// origin the value without it, the Worker as it came"), asserted: where
// the client sent a key header on one line with white space around the
// key that is not HTTP's, the local server's origin got it trimmed
// (httpapi.TrimKey) and the Worker's as workerd read it (a lone byte
// 0xA0 as U+FFFD); anything else is left for Diff to report.
func wasmNormaliser(r *parity.Request, ref, got *parity.Outcome) {
	workerNormaliser(r, ref, got)
	if ref.Seen == nil || got.Seen == nil {
		return
	}
	for _, name := range []string{"X-Api-Key", "Authorization"} {
		vs := r.Values(name)
		if len(vs) != 1 {
			continue
		}
		trimmed, asCame := httpapi.TrimKey(vs[0]), workerdHeader(vs[0])
		if trimmed != asCame && slices.Equal(ref.Seen.Header[name], []string{trimmed}) &&
			slices.Equal(got.Seen.Header[name], []string{asCame}) {
			got.Seen.Header[name] = ref.Seen.Header[name]
		}
	}
}

// TestLoneByteIsAnotherClient: what TestParityWithLocal's generator
// keeps out of its sequences (parity.Options.UnicodeSpace), asserted: a
// listed key followed (or preceded) by a lone byte 0xA0 or 0x85 is that
// key on the local server and, read as U+FFFD, an unlisted key of the
// default plan on the Worker (README, identity), whose origin gets it with
// the U+FFFD; with U+00A0, it is the key on both.
func TestLoneByteIsAnotherClient(t *testing.T) {
	c := parity.Configs()[0] // limits: pro's minute is 12, free's 6
	const pro, free = `"minute";q=12;w=60`, `"minute";q=6;w=60`
	for _, tc := range []struct {
		key, local, worker, workerOrigin string
	}{
		{parity.ProKey + "\xa0", pro, free, parity.ProKey + "\ufffd"},
		{"\x85" + parity.ProKey, pro, free, "\ufffd" + parity.ProKey},
		{parity.ProKey + "\u00a0", pro, pro, parity.ProKey + "\u00a0"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			clock := parity.NewClock(parity.T0)
			r := &parity.Request{Method: "GET", Target: "/v1/items", Client: parity.Clients[0],
				Header: []parity.Field{{Name: "X-API-Key", Value: tc.key}}}
			for _, side := range []struct {
				s              parity.Side
				policy, origin string
			}{
				{parity.LocalOf(t, c, clock), tc.local, parity.ProKey},
				{wasmWorkerSide(t, c, clock), tc.worker, tc.workerOrigin},
			} {
				o, err := side.s.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				if got := o.Header.Get("RateLimit-Policy"); !strings.Contains(got, side.policy) {
					t.Errorf("%s: RateLimit-Policy %q, want %s in it", side.s.Name, got, side.policy)
				}
				if o.Seen == nil || !slices.Equal(o.Seen.Header["X-Api-Key"], []string{side.origin}) {
					t.Errorf("%s: the origin got %+v, want X-Api-Key %q", side.s.Name, o.Seen, side.origin)
				}
			}
		})
	}
}
