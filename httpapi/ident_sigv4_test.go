package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestSigV4IsNoKey: a Lambda Function URL with AuthType AWS_IAM behind
// CloudFront's origin access control (docs/lambda.md's way to keep others'
// distributions out) gets every request with CloudFront's SigV4 signature
// in Authorization, a new one for each second, path and body. Counted as
// a key, every anonymous request was a fresh identity of the default plan,
// never limited (and a DynamoDB item each). A signature is no key: the
// request is counted on the next key header, else the client IP.
func TestSigV4IsNoKey(t *testing.T) {
	sig := func(scheme string, i int) string {
		return scheme + " Credential=ASIAEXAMPLE/20261122/eu-west-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strconv.Itoa(1e9+i)
	}
	for _, tt := range []struct {
		name    string
		header  func(i int) http.Header
		limited bool // the 4th request is refused: free allows 3 a minute
	}{
		{"SigV4", func(i int) http.Header { return http.Header{"Authorization": {sig("AWS4-HMAC-SHA256", i)}} }, true},
		{"SigV4, scheme in lower case", func(i int) http.Header { return http.Header{"Authorization": {sig("aws4-hmac-sha256", i)}} }, true},
		{"SigV4a", func(i int) http.Header { return http.Header{"Authorization": {sig("AWS4-ECDSA-P256-SHA256", i)}} }, true},
		{"SigV4 after X-API-Key: the key", func(i int) http.Header {
			return http.Header{"X-Api-Key": {"k" + strconv.Itoa(i)}, "Authorization": {sig("AWS4-HMAC-SHA256", 0)}}
		}, false},
		{"Bearer: a key each", func(i int) http.Header { return http.Header{"Authorization": {"Bearer k" + strconv.Itoa(i)}} }, false},
		{"a scheme that only begins so", func(i int) http.Header { return http.Header{"Authorization": {"AWS4x k" + strconv.Itoa(i)}} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			for i := range 3 {
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", tt.header(i)))
				if w.Code != http.StatusOK {
					t.Fatalf("request %d: status %d", i, w.Code)
				}
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", tt.header(3)))
			if got := w.Code == http.StatusTooManyRequests; got != tt.limited {
				t.Errorf("4th request, with its own value: status %d, want limited %t", w.Code, tt.limited)
			}
		})
	}
}

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
