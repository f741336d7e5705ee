package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCheckWithoutBody: a check request whose Body is nil (built with
// http.NewRequest and no body, and handed to the Handler in process, as a
// Go program embedding the pre-filter may) panicked in
// http.MaxBytesReader. It is a 400 naming the body, as an empty one is.
func TestCheckWithoutBody(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	r, err := http.NewRequest(http.MethodPost, "http://slidegate.test"+CheckPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Body != nil {
		t.Fatal("setup: the request has a Body")
	}
	r.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	empty := httptest.NewRequest(http.MethodPost, CheckPath, strings.NewReader(""))
	want := httptest.NewRecorder()
	f.h.ServeHTTP(want, empty)
	if w.Code != http.StatusBadRequest || w.Body.String() != want.Body.String() {
		t.Errorf("a check without a Body: %d %s, want the empty body's %d %s", w.Code, w.Body, want.Code, want.Body)
	}
}
