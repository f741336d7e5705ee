package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// TestKeyWhiteSpaceOverHTTP2: the origin gets a key header as the
// pre-filter counted it, without the white space around it, over HTTP/2
// too. Go's HTTP/1.1 transport trims a value as it writes it, but its
// HTTP/2 transport (the proxy's for an https origin that offers h2: a
// CloudFront distribution, an ALB) sends it as it is: on the Lambda, which
// adds the event's values as they are, X-API-Key " <pro key>" was counted
// as the pro key and reached the origin as " <pro key>", a key no origin
// that compares it knows (or, by RFC 9113 8.2.1, a malformed request).
func TestKeyWhiteSpaceOverHTTP2(t *testing.T) {
	var got []string // the key header's lines, per request the origin served
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("the origin got HTTP/%d.%d, want HTTP/2", r.ProtoMajor, r.ProtoMinor)
		}
		got = r.Header["X-Api-Key"]
	}))
	proxy := h2Proxy(t, origin, nil)
	for _, tt := range []struct {
		name, value string
		origin      []string
	}{
		{"space before the key", " " + proKey, []string{proKey}},
		{"tabs around the key", "\t" + proKey + " \t", []string{proKey}},
		{"the key as it is", proKey, []string{proKey}},
		{"spaces only: no key", "   ", []string{""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = proxy })
			h := http.Header{}
			h.Add("X-API-Key", tt.value) // as a platform adapter adds it
			got = nil
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", h))
			if w.Code != http.StatusOK || len(got) != len(tt.origin) || len(got) > 0 && got[0] != tt.origin[0] {
				t.Errorf("status %d, the origin got X-API-Key %q; want 200 and %q", w.Code, got, tt.origin)
			}
		})
	}
}

// h2Proxy starts origin, unstarted, over TLS with HTTP/2 (closed at the
// test's end), and returns NewProxy's proxy to it, logging to log.
func h2Proxy(t *testing.T, origin *httptest.Server, log Logger) *httputil.ReverseProxy {
	t.Helper()
	origin.EnableHTTP2 = true
	origin.StartTLS()
	t.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(u, log, nil)
	p.Transport.(*http.Transport).TLSClientConfig = origin.Client().Transport.(*http.Transport).TLSClientConfig
	return p
}
