package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestSigV4TabIsNoKey: a signature whose scheme is followed by a tab, not
// a space, is still no key (signature looks for either, as withScheme
// does): each request's new signature counted as a key was a fresh client,
// never limited.
func TestSigV4TabIsNoKey(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	for i := range 4 {
		h := http.Header{"Authorization": {"AWS4-HMAC-SHA256\tCredential=ASIAEXAMPLE/20261122/eu-west-1/lambda/aws4_request, Signature=" + strconv.Itoa(1e9+i)}}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", h))
		want := http.StatusOK // free allows 3 a minute, to the client IP
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if w.Code != want {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, want)
		}
	}
}

// TestCheckKeyOfWhiteSpaceSaysSo: a check key of only white space is
// refused as such, not as a key that is missing: the caller sent one.
func TestCheckKeyOfWhiteSpaceSaysSo(t *testing.T) {
	for _, tc := range []struct{ key, reason string }{
		{"", "required"},
		{" \t", "white space"},
	} {
		t.Run(strconv.Quote(tc.key), func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			body, err := json.Marshal(map[string]any{"key": tc.key})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			var p problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if w.Code != http.StatusBadRequest || len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != "key" || !strings.Contains(p.InvalidParams[0].Reason, tc.reason) {
				t.Errorf("status %d, invalid-params %+v; want 400 naming key, %q", w.Code, p.InvalidParams, tc.reason)
			}
		})
	}
}
