package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// TestBindingNotANamespaceSaysSo: the 500 of a Worker whose
// SLIDEGATE_KV is absent or bound to something that is not a KV namespace
// (workerskv.NewBinding's refusal, 2d21cda) says which, in the words
// docs/edge.md gives the operator.
func TestBindingNotANamespaceSaysSo(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: %q", workerskv.ErrBinding, kvBinding),
		fmt.Errorf("%w: %q is not a KV namespace (it has no getWithMetadata)", workerskv.ErrBinding, kvBinding),
	} {
		t.Run(err.Error(), func(t *testing.T) {
			w := httptest.NewRecorder()
			failed(err, slog.New(slog.NewJSONHandler(io.Discard, nil))).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if want := "the KV binding SLIDEGATE_KV is missing or not a KV namespace"; w.Code != 500 || !strings.Contains(w.Body.String(), want) {
				t.Errorf("%d %s, want a 500 saying %q", w.Code, w.Body.String(), want)
			}
		})
	}
}
