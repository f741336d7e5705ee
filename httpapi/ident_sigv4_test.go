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
		// A tab after the scheme, not a space (signature takes either, as
		// withScheme does).
		{"SigV4, tab", func(i int) http.Header {
			return http.Header{"Authorization": {"AWS4-HMAC-SHA256\tCredential=ASIAEXAMPLE/20261122/eu-west-1/lambda/aws4_request, Signature=" + strconv.Itoa(1e9+i)}}
		}, true},
		{"SigV4 after X-API-Key: the key", func(i int) http.Header {
			return http.Header{"X-Api-Key": {"k" + strconv.Itoa(i)}, "Authorization": {sig("AWS4-HMAC-SHA256", 0)}}
		}, false},
		{"Bearer: a key each", func(i int) http.Header { return http.Header{"Authorization": {"Bearer k" + strconv.Itoa(i)}} }, false},
		{"a scheme that only begins so", func(i int) http.Header { return http.Header{"Authorization": {"AWS4x k" + strconv.Itoa(i)}} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) { fourthLimited(t, tt.header, tt.limited) })
	}
}

// TestOneRequestCredentialsAreNoKey: Digest (RFC 7616) and OAuth 1.0
// (RFC 5849) credentials in Authorization are, like an AWS signature,
// new with each request (a response over the method, URI, nonce count and
// client nonce; a nonce, timestamp and signature), so a client of an
// origin that authenticates so was a fresh identity on every request:
// never limited, and an entry of the store each (a DynamoDB item, a KV
// list and write on the Worker, and in a full memory store an eviction of
// a client that had used its quota). They are no key: the next key header
// decides, else the client IP. An OAuth value without a nonce (an OAuth 2
// token sent under the scheme "OAuth", as Yandex's APIs take it, or OAuth
// 1.0's PLAINTEXT, the same on each request) stays a key.
func TestOneRequestCredentialsAreNoKey(t *testing.T) {
	digest := func(scheme string, i int) string {
		return scheme + ` username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", nc=0000000` + strconv.Itoa(i+1) + `, cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", qop=auth, response="` + strconv.Itoa(1e9+i) + `", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"`
	}
	oauth1 := func(scheme string, i int) string {
		return scheme + ` realm="Example", oauth_consumer_key="0685bd9184jfhq22", oauth_token="ad180jjd733klru7", oauth_signature_method="HMAC-SHA1", oauth_signature="` + strconv.Itoa(1e9+i) + `", oauth_timestamp="` + strconv.Itoa(137131200+i) + `", oauth_nonce="4572616e48616d6d` + strconv.Itoa(i) + `", oauth_version="1.0"`
	}
	for _, tt := range []struct {
		name    string
		header  func(i int) http.Header
		limited bool // the 4th request is refused: free allows 3 a minute
	}{
		{"Digest", func(i int) http.Header { return http.Header{"Authorization": {digest("Digest", i)}} }, true},
		{"Digest, scheme in another case, tab", func(i int) http.Header { return http.Header{"Authorization": {digest("DIGEST\t", i)}} }, true},
		{"OAuth 1.0", func(i int) http.Header { return http.Header{"Authorization": {oauth1("OAuth", i)}} }, true},
		{"OAuth 1.0, scheme in lower case", func(i int) http.Header { return http.Header{"Authorization": {oauth1("oauth", i)}} }, true},
		{"Digest after X-API-Key: the key", func(i int) http.Header {
			return http.Header{"X-Api-Key": {"k" + strconv.Itoa(i)}, "Authorization": {digest("Digest", 0)}}
		}, false},
		{"OAuth 2 token under the scheme OAuth: a key each", func(i int) http.Header {
			return http.Header{"Authorization": {"OAuth y0_AgAAAAAA" + strconv.Itoa(i)}}
		}, false},
		{"OAuth 1.0 PLAINTEXT without a nonce: a key each", func(i int) http.Header {
			return http.Header{"Authorization": {`OAuth oauth_consumer_key="c` + strconv.Itoa(i) + `", oauth_signature_method="PLAINTEXT", oauth_signature="s%26"`}}
		}, false},
		{"a scheme that only begins so", func(i int) http.Header { return http.Header{"Authorization": {"Digests k" + strconv.Itoa(i)}} }, false},
		// Two lines are one value, joined as the Worker and API Gateway
		// join them: the local server counted it as a key (found by
		// review).
		{"Digest on two lines", func(i int) http.Header {
			return http.Header{"Authorization": {digest("Digest", i), digest("Digest", i+100)}}
		}, true},
		{"a key on two lines: a key each", func(i int) http.Header {
			return http.Header{"Authorization": {"k" + strconv.Itoa(i), "x"}}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) { fourthLimited(t, tt.header, tt.limited) })
	}
}

// TestSignedRequestsAreNoKey: the other widely used schemes whose value a
// client makes anew for each request (a signature over the time and the
// request, or a nonce), in Authorization, are no key either: S3's SigV2
// ("AWS <id>:<signature>", over Date, which S3-compatible stores take),
// Google Cloud Storage's V4 signatures (over x-goog-date), Azure Storage's
// SharedKey and SharedKeyLite (over x-ms-date), Hawk (a MAC over a
// timestamp and a nonce) and the Cavage drafts' scheme "Signature" (over
// (created) or Date). Counted as keys, every request of a client of an
// origin that authenticates so was a fresh identity of the default plan,
// never limited, and an entry of the store each. The scheme is matched in
// any case, followed by a space or a tab; a scheme that only begins as one
// of them, and a key that begins with the same letter, stay keys.
func TestSignedRequestsAreNoKey(t *testing.T) {
	auth := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	sig := func(i int) string { return strconv.Itoa(1e9 + i) }
	for _, tt := range []struct {
		name    string
		header  func(i int) http.Header
		limited bool // the 4th request is refused: free allows 3 a minute
	}{
		{"S3 SigV2", func(i int) http.Header { return auth("AWS AKIAIOSFODNN7EXAMPLE:" + sig(i)) }, true},
		{"S3 SigV2, scheme in lower case", func(i int) http.Header { return auth("aws AKIAIOSFODNN7EXAMPLE:" + sig(i)) }, true},
		{"GOOG4-HMAC-SHA256", func(i int) http.Header {
			return auth("GOOG4-HMAC-SHA256 Credential=GOOG1EXAMPLE/20261123/auto/storage/goog4_request, SignedHeaders=host;x-goog-date, Signature=" + sig(i))
		}, true},
		{"GOOG4-RSA-SHA256, scheme in lower case", func(i int) http.Header {
			return auth("goog4-rsa-sha256 Credential=sa@example.iam.gserviceaccount.com/20261123/auto/storage/goog4_request, SignedHeaders=host;x-goog-date, Signature=" + sig(i))
		}, true},
		{"SharedKey", func(i int) http.Header { return auth("SharedKey myaccount:" + sig(i)) }, true},
		{"SharedKeyLite, tab", func(i int) http.Header { return auth("SharedKeyLite\tmyaccount:" + sig(i)) }, true},
		{"Hawk", func(i int) http.Header {
			return auth(`Hawk id="dh37fgj492je", ts="` + strconv.Itoa(1353832234+i) + `", nonce="j4h3g` + strconv.Itoa(i) + `", mac="` + sig(i) + `"`)
		}, true},
		{"Hawk, scheme in upper case", func(i int) http.Header {
			return auth(`HAWK id="dh37fgj492je", ts="1353832234", nonce="j4h3g2", mac="` + sig(i) + `"`)
		}, true},
		{"Signature (Cavage)", func(i int) http.Header {
			return auth(`Signature keyId="rsa-key-1",algorithm="hs2019",created=` + strconv.Itoa(1402170695+i) + `,headers="(request-target) (created) host",signature="` + sig(i) + `"`)
		}, true},
		{"signature (Cavage), scheme in lower case", func(i int) http.Header { return auth(`signature keyId="k",signature="` + sig(i) + `"`) }, true},
		{"Hawk after X-API-Key: the key", func(i int) http.Header {
			return http.Header{"X-Api-Key": {"k" + strconv.Itoa(i)}, "Authorization": {`Hawk id="x", ts="1", nonce="n", mac="m"`}}
		}, false},
		{"a key that begins with a scheme's letter: a key each", func(i int) http.Header { return auth("sk_live_" + sig(i)) }, false},
		{"a scheme that only begins as AWS", func(i int) http.Header { return auth("AWSX k" + strconv.Itoa(i)) }, false},
		{"a scheme that only begins as SharedKey", func(i int) http.Header { return auth("SharedKeys k" + strconv.Itoa(i)) }, false},
		{"a scheme that only begins as Signature", func(i int) http.Header { return auth("Signatures k" + strconv.Itoa(i)) }, false},
		{"a scheme that only begins as Hawk", func(i int) http.Header { return auth("Hawkeye k" + strconv.Itoa(i)) }, false},
		{"a scheme that only begins as GOOG4", func(i int) http.Header { return auth("GOOG4-HMAC-SHA k" + strconv.Itoa(i)) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) { fourthLimited(t, tt.header, tt.limited) })
	}
}

// fourthLimited sends four requests from one address, the i-th with the
// header header(i), to the free plan of testConfig (3 a minute), and fails
// unless the fourth is refused exactly when limited: when the values were
// no key, and the client IP was counted.
func fourthLimited(t *testing.T, header func(i int) http.Header, limited bool) {
	t.Helper()
	f := newFixture(t, testConfig(t, nil), nil)
	for i := range 3 {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", header(i)))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, w.Code)
		}
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", header(3)))
	if got := w.Code == http.StatusTooManyRequests; got != limited {
		t.Errorf("4th request, with its own value: status %d, want limited %t", w.Code, limited)
	}
}
