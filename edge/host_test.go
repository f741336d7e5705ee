package main

import (
	"net/http/httptest"
	"testing"
)

// TestProxyHostHeader: the Worker's request carries its Host among its
// headers (workerd's Headers hold it). Forwarded to ORIGIN_URL, it is
// dropped, so that fetch names the origin's host, not the Worker's (an
// origin serving several hosts would answer for the wrong one); forwarded
// to itself ("self"), it is kept.
func TestProxyHostHeader(t *testing.T) {
	for spec, want := range map[string]string{"https://origin.example.com": "", "self": "api.example.com"} {
		t.Run(spec, func(t *testing.T) {
			o := &fakeOrigin{}
			h, err := originHandler(spec, o)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "https://api.example.com/v1/items", nil)
			r.Header.Set("Host", "api.example.com")
			h.ServeHTTP(httptest.NewRecorder(), r)
			if o.got == nil {
				t.Fatal("nothing forwarded")
			}
			if got := o.got.Header.Get("Host"); got != want {
				t.Errorf("forwarded Host header %q, want %q", got, want)
			}
		})
	}
}
