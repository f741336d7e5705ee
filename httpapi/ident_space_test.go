package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestKeyWhiteSpaceAsOriginGetsIt: a key header whose value reaches the
// handler with white space around it (the Lambda adds the event's header
// values as they are; the local server and the Worker trim them first) is
// the key the origin gets: Go's transport trims a value as it writes it,
// and so does every HTTP parser. Counted with its spaces, " <pro key>" was
// a fresh identity of the default plan while the origin served the pro
// key, used up; "   " was a fresh key per count of spaces, which the origin
// took for no key.
func TestKeyWhiteSpaceAsOriginGetsIt(t *testing.T) {
	var got []string // the key header, per request the origin served
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Api-Key"))
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	// header is a request's X-API-Key as a platform adapter adds it:
	// Header.Add keeps the value as it is.
	header := func(v string) http.Header {
		h := http.Header{}
		h.Add("X-API-Key", v)
		return h
	}
	for _, tt := range []struct {
		name, value, used, origin string
	}{
		{"space after the key", proKey + " ", proKey, proKey},
		{"space before the key", " " + proKey, proKey, proKey},
		{"tabs around the key", "\t" + proKey + " \t", proKey, proKey},
		{"spaces only: no key", "   ", "", ""},
		{"a tab only: no key", "\t", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = NewProxy(u, nil, nil) })
			limit := 3 // free, on the client IP
			if tt.used != "" {
				limit = 10 // pro
			}
			useUp(t, f, header(tt.used), limit)
			got = nil
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", header(tt.value)))
			if w.Code != http.StatusTooManyRequests {
				t.Errorf("%q after %q used up: status %d, want 429; the origin got the key %q", tt.value, tt.used, w.Code, got)
			}
			if w.Code == http.StatusOK && (len(got) != 1 || got[0] != tt.origin) {
				t.Errorf("the origin got %q, want %q", got, tt.origin)
			}
		})
	}
}

// useUp sends n requests from 192.0.2.1 with header h, each of which must
// be admitted: a client's quota spent before the request a test is about.
func useUp(t *testing.T, f *fixture, h http.Header, n int) {
	t.Helper()
	for i := range n {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", h))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d with %v: status %d", i, h, w.Code)
		}
	}
}
