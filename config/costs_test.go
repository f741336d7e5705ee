package config

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCostShadowed: a costs entry that an earlier one matches first for
// every request it matches (a prefix of its prefix, for every method, its
// own, or GET for its HEAD) can never apply: the first match wins, so
// POST /v1/search under [{"/v1/", 2}, {POST "/v1/search", 5}] cost 2, not
// the 5 the operator wrote. It is refused, naming both; an order in which
// each entry can still be first is taken.
func TestCostShadowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		costs string
		field string // "" means valid
	}{
		{"shorter prefix for every method first", `[{"path_prefix": "/v1/", "cost": 2}, {"method": "POST", "path_prefix": "/v1/search", "cost": 5}]`, "costs[1].path_prefix"},
		{"same prefix twice", `[{"path_prefix": "/v1/search", "cost": 2}, {"path_prefix": "/v1/search", "cost": 5}]`, "costs[1].path_prefix"},
		{"root first", `[{"path_prefix": "/", "cost": 2}, {"path_prefix": "/v1", "cost": 5}]`, "costs[1].path_prefix"},
		{"same method, shorter prefix first", `[{"method": "POST", "path_prefix": "/v1", "cost": 2}, {"method": "POST", "path_prefix": "/v1/search", "cost": 5}]`, "costs[1].path_prefix"},
		{"GET first takes HEAD", `[{"method": "GET", "path_prefix": "/v1", "cost": 2}, {"method": "HEAD", "path_prefix": "/v1/x", "cost": 5}]`, "costs[1].path_prefix"},
		{"shadowed after a valid one", `[{"method": "POST", "path_prefix": "/v2", "cost": 2}, {"path_prefix": "/v1", "cost": 2}, {"method": "GET", "path_prefix": "/v1/a", "cost": 5}]`, "costs[2].path_prefix"},
		{"longer prefix first", `[{"method": "POST", "path_prefix": "/v1/search", "cost": 5}, {"path_prefix": "/v1/", "cost": 2}]`, ""},
		{"another method first", `[{"method": "GET", "path_prefix": "/v1", "cost": 2}, {"method": "POST", "path_prefix": "/v1/search", "cost": 5}]`, ""},
		{"HEAD first leaves GET", `[{"method": "HEAD", "path_prefix": "/v1", "cost": 2}, {"method": "GET", "path_prefix": "/v1/x", "cost": 5}]`, ""},
		{"a method first leaves every method", `[{"method": "POST", "path_prefix": "/v1", "cost": 2}, {"path_prefix": "/v1/x", "cost": 5}]`, ""},
		{"not a prefix as a string", `[{"path_prefix": "/v1/search/", "cost": 2}, {"path_prefix": "/v1/search", "cost": 5}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"costs": ` + tc.costs + `}`))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Parse: %v; want it valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrValue) {
				t.Fatalf("Parse error %v; want an ErrValue naming %s", err, tc.field)
			}
		})
	}
}

// TestFirstCoversAgreesWithPairs: firstCovers, which looks prefixes up, finds for
// every route the first route that covers it, as comparing every pair
// does, on random routes over a few methods and short prefixes (many
// prefixes of one another, many equal).
func TestFirstCoversAgreesWithPairs(t *testing.T) {
	covers := func(e, r Cost) bool {
		return strings.HasPrefix(r.PathPrefix, e.PathPrefix) &&
			(e.Method == "" || e.Method == r.Method || e.Method == "GET" && r.Method == "HEAD")
	}
	methods := []string{"", "GET", "HEAD", "POST"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		costs := make([]Cost, 1+rng.IntN(12))
		for i := range costs {
			p := "/"
			for range rng.IntN(4) {
				p += string("ab/"[rng.IntN(3)])
			}
			costs[i] = Cost{Method: methods[rng.IntN(len(methods))], PathPrefix: p, Cost: 1}
		}
		got := firstCovers(costs)
		for i, r := range costs {
			want := i
			for k, e := range costs[:i] {
				if covers(e, r) {
					want = k
					break
				}
			}
			if got[i] != want {
				t.Fatalf("round %d: routes %+v: first cover of %d = %d, want %d", round, costs, i, got[i], want)
			}
		}
	}
}

// TestCostShadowedSaysHow: the error of a covered costs entry says how to
// make it apply. "Put the entry of the longer prefix first" was its advice
// for every case, wrong where both entries have one prefix: an entry for
// every method, then a POST one, of "/v1/" (the POST entry goes first),
// GET then HEAD (HEAD first), or one route written twice.
func TestCostShadowedSaysHow(t *testing.T) {
	for _, tc := range []struct{ name, costs, says string }{
		{"longer prefix", `[{"path_prefix": "/v1/", "cost": 2}, {"method": "POST", "path_prefix": "/v1/search", "cost": 5}]`, "put the entry of the longer prefix first"},
		{"one prefix, every method first", `[{"path_prefix": "/v1/", "cost": 2}, {"method": "POST", "path_prefix": "/v1/", "cost": 5}]`, "put the POST entry first"},
		{"one prefix, GET first", `[{"method": "GET", "path_prefix": "/v1/", "cost": 2}, {"method": "HEAD", "path_prefix": "/v1/", "cost": 5}]`, "put the HEAD entry first"},
		{"one route twice", `[{"method": "POST", "path_prefix": "/v1/", "cost": 2}, {"method": "POST", "path_prefix": "/v1/", "cost": 5}]`, "the same route twice: remove one"},
		{"one route twice, every method", `[{"path_prefix": "/v1/", "cost": 2}, {"path_prefix": "/v1/", "cost": 5}]`, "the same route twice: remove one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"costs": ` + tc.costs + `}`))
			if err == nil || !strings.HasSuffix(err.Error(), tc.says) {
				t.Errorf("Parse error %v; want it to end %q", err, tc.says)
			}
		})
	}
}
