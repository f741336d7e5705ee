package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCheckKeyIsThePreFiltersIdentity: a key given to the check API is the
// identity the pre-filter counts for the key header with that value (the
// README: "hashed like a header key: the same identity, the same
// counters"). The pre-filter drops white space around a key (73ac3ab), so
// " <pro key>" from a service that passes on a Lambda event's header value,
// or "<pro key>\n" read from a file, was a fresh identity of the default
// plan here while the pre-filter counted the pro key, used up.
func TestCheckKeyIsThePreFiltersIdentity(t *testing.T) {
	const bearer = "Bearer unlisted-abc" // an unlisted key: free, 3 a minute
	for _, tt := range []struct {
		name          string
		header, value string // what the pre-filter counted up to the limit
		limit         int
		checkKey      string // what the check API is then asked
	}{
		{"the same key", "X-API-Key", proKey, 10, proKey},
		{"space before", "X-API-Key", proKey, 10, " " + proKey},
		{"space after", "X-API-Key", proKey, 10, proKey + " "},
		{"tabs around", "X-API-Key", proKey, 10, "\t" + proKey + "\t"},
		{"a line read from a file", "X-API-Key", proKey, 10, proKey + "\r\n"},
		{"scheme in another case", "Authorization", bearer, 3, "BEARER  unlisted-abc"},
		{"space before a scheme", "Authorization", bearer, 3, " " + bearer},
		// A bearer token of the size identity providers issue (a
		// Keycloak or Entra ID access token is 1.5 to 2.5 KB): the
		// check API refused any key over 1 KiB, so a service passing on
		// its clients' Authorization got a 400 for the clients with the
		// larger tokens (more roles, more groups) alone.
		{"a JWT of 2 KiB", "Authorization", "Bearer " + jwtSized(2048), 3, "Bearer " + jwtSized(2048)},
		{"a JWT of 10 KB (Entra ID, 200 groups)", "Authorization", "Bearer " + jwtSized(10000), 3, "Bearer " + jwtSized(10000)},
		{"the longest key the body holds, a space after", "X-API-Key", strings.Repeat("k", longestCheckKey), 3, strings.Repeat("k", longestCheckKey) + " "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			for i := range tt.limit {
				w := f.do(req{header: map[string]string{tt.header: tt.value}})
				if w.Code != http.StatusOK {
					t.Fatalf("request %d: status %d", i, w.Code)
				}
			}
			body, err := json.Marshal(map[string]any{"key": tt.checkKey})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			var resp checkResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != http.StatusOK {
				t.Fatalf("status %d %s: %v", w.Code, w.Body, err)
			}
			if resp.Allowed || resp.Remaining != 0 {
				t.Errorf("check of %q after the pre-filter used %q up: %s; want denied, the same identity", tt.checkKey, tt.value, w.Body)
			}
		})
	}
}

// TestCheckKeyThatIsNoKey: what the pre-filter takes for no key (a value of
// only white space, an AWS signature: c8d369a; Digest and OAuth 1.0
// credentials, and S3's SigV2, Google Cloud Storage's and Azure's
// signatures, Hawk's and the Cavage drafts' Signature, new with each
// request too) is a 400 naming key, not an
// identity of its own. Counted, "   " was a fresh client per count of
// spaces, and a service behind CloudFront's origin access control that
// passed on Authorization checked each request as a fresh client, never
// limited (CloudFront signs each request anew).
func TestCheckKeyThatIsNoKey(t *testing.T) {
	for _, key := range []string{
		" ",
		"\t \r\n",
		"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
		"aws4-ecdsa-p256-sha256 Credential=AKIDEXAMPLE/20261122/lambda/aws4_request, Signature=3045",
		" AWS4-HMAC-SHA256 Credential=x, Signature=y",
		`Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", nonce="7ypf", nc=00000001, cnonce="f2/w", qop=auth, response="753927fa"`,
		`OAuth oauth_consumer_key="0685bd9184jfhq22", oauth_token="ad180jjd733klru7", oauth_signature_method="HMAC-SHA1", oauth_signature="wOJIO9A2W5mFwDgiDvZbTSMK%2FPY%3D", oauth_timestamp="137131200", oauth_nonce="4572616e48616d6d", oauth_version="1.0"`,
		"AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=",
		"GOOG4-HMAC-SHA256 Credential=GOOG1EXAMPLE/20261123/auto/storage/goog4_request, SignedHeaders=host;x-goog-date, Signature=5a2c",
		"SharedKey myaccount:ctzMq410TV3wS7upTBcunJTDLEJwMAZuFPfr0mrrA08=",
		"sharedkeylite myaccount:ctzMq410TV3wS7upTBcunJTDLEJwMAZuFPfr0mrrA08=",
		`Hawk id="dh37fgj492je", ts="1353832234", nonce="j4h3g2", mac="6R4rV5iE+NPoym+WwjeHzjAGXUtLNIxmo1vpMofpLAE="`,
		`Signature keyId="rsa-key-1",algorithm="hs2019",headers="(request-target) (created) host",signature="Base64(RSA-SHA512(signing string))"`,
	} {
		t.Run(strings.TrimSpace(key), func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			body, err := json.Marshal(map[string]any{"key": key})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			if w.Code != http.StatusBadRequest {
				t.Fatalf("key %q: status %d %s, want 400", key, w.Code, w.Body)
			}
			var p problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != "key" {
				t.Errorf("invalid-params %+v, want key", p.InvalidParams)
			}
			if strings.Contains(w.Body.String(), "Credential") {
				t.Errorf("the answer shows the signature: %s", w.Body)
			}
		})
	}
}

// longestCheckKey is the longest key a check body of MaxCheckBody bytes
// holds with a space after it: {"key":"<key> "}.
const longestCheckKey = MaxCheckBody - len(`{"key":" "}`)

// jwtSized returns a token of n bytes shaped as a JWT: three base64url
// parts joined by dots.
func jwtSized(n int) string {
	b := []byte(strings.Repeat("eyJhbGciOiJSUzI1NiJ9", n/20+1)[:n])
	b[n/3], b[2*n/3] = '.', '.'
	return string(b)
}
