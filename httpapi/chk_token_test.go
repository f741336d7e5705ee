package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCheckTokenWhiteSpaceAround: the check token's Authorization value as
// a platform adapter adds it (the Lambda adds the event's header values as
// they are; the local server and the Worker trim them first) is the one
// the local server reads: white space around it is not the value's
// (73ac3ab, for key headers). " Bearer <token>" was refused on the Lambda
// (401: the scheme read as "") and taken by the local server.
func TestCheckTokenWhiteSpaceAround(t *testing.T) {
	f := newFixture(t, testConfig(t, func(m map[string]any) { m["check_token"] = "s3cret-token-0123" }), nil)
	for _, tt := range []struct {
		name, value string
		status      int
	}{
		{"as it is", "Bearer s3cret-token-0123", http.StatusOK},
		{"space before", " Bearer s3cret-token-0123", http.StatusOK},
		{"tab before", "\tBearer s3cret-token-0123", http.StatusOK},
		{"spaces around", "  Bearer s3cret-token-0123 \t", http.StatusOK},
		{"space before a wrong token", " Bearer nope", http.StatusUnauthorized},
		{"a no-break space after the token", "Bearer s3cret-token-0123\u00a0", http.StatusUnauthorized},
		{"a no-break space before the token", "Bearer \u00a0s3cret-token-0123", http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, CheckPath, strings.NewReader(`{"key":"a"}`))
			r.Header.Add("Authorization", tt.value) // Add keeps the value as it is
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Errorf("Authorization %q: status %d, want %d", tt.value, w.Code, tt.status)
			}
		})
	}
}
