//go:build !js

package httpapi

import (
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestForOriginHeaderSets: forOrigin settles the key headers during its
// walk of the header map (keyLine), deleting and replacing entries as it
// goes; on random header sets of key headers, their other spellings,
// names with underscores and Connection lines naming them, each entry
// must end as it would alone: a key header dropped when Connection names
// it, else on one trimmed line; another spelling of a key header or a
// name with an underscore dropped; the rest as sent.
func TestForOriginHeaderSets(t *testing.T) {
	names := []string{"X-Api-Key", "x-api-key", "X_API_KEY", "Authorization", "AUTHORIZATION", "Api-Key", "Api_key",
		"Connection", "X_Real_IP", "Accept", "X-Custom"}
	values := []string{"k", " k\u00a0", "", "a,b", "X-Api-Key", "close, x-api-key", "authorization", "Bearer  t"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, keyHeaders := range [][]string{{"X-Api-Key"}, {"X-Api-Key", "Authorization"}, {"Authorization", "Api_key"}} {
		h := &Handler{keyHeaders: keyHeaders}
		for range 3000 {
			sent := http.Header{}
			for range rng.IntN(7) {
				k := names[rng.IntN(len(names))]
				sent[k] = []string{}
				for range rng.IntN(3) {
					sent[k] = append(sent[k], values[rng.IntN(len(values))])
				}
			}
			want := http.Header{}
			for k, vs := range sent {
				switch {
				case slices.Contains(keyHeaders, k):
					switch {
					case listed(sent["Connection"], k):
					case len(vs) > 0:
						want[k] = []string{trimKey(strings.Join(vs, ","))}
					default:
						want[k] = vs
					}
				case strings.Contains(k, "_") || slices.ContainsFunc(keyHeaders, func(kh string) bool { return cgiEqual(k, kh) }):
				default:
					want[k] = vs
				}
			}
			got := sent.Clone()
			h.forOrigin(got)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("key headers %q, sent %q: the origin gets %q, want %q", keyHeaders, sent, got, want)
			}
		}
	}
}
