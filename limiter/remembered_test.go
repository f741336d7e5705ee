package limiter

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
)

// TestRememberedAnswersFromMemoryAlone: Remembered gives, with no store
// call and no count, the answer CheckInto gives from the deny cache, and
// false for a request the cache does not refuse (the identity not blocked,
// another rule set, past the wait, the cache off), so that the HTTP layer
// counts nothing on its ip rules for a request the plan is known to refuse.
func TestRememberedAnswersFromMemoryAlone(t *testing.T) {
	s := &counting{Conditional: memstore.New()}
	l := New(Options{Store: s})
	r := rule("minute", 3, time.Minute)
	var res Result
	if l.Remembered(t0, "k", []Rule{r}, 1, &res) {
		t.Fatal("Remembered reports a denial of an identity never checked")
	}
	for range 4 {
		check(t, l, t0, "k", 1, r)
	}
	before := s.calls()
	at := t0.Add(10 * time.Second)
	if !l.Remembered(at, "k", []Rule{r}, 1, &res) {
		t.Fatal("Remembered does not report the blocked identity")
	}
	if got := s.calls() - before; got != 0 {
		t.Errorf("Remembered made %d store calls, want 0", got)
	}
	want := check(t, l, at, "k", 1, r)
	if !want.Cached || res.Decision != want.Decision || res.N != want.N || res.Rules[0] != want.Rules[0] || !res.Cached || !res.At.Equal(want.At) {
		t.Errorf("Remembered: %+v (cached %v, at %v), want CheckInto's %+v (cached %v, at %v)", res.Decision, res.Cached, res.At, want.Decision, want.Cached, want.At)
	}
	// In this order: a check at or past the wait drops the remembered
	// denial (the request goes to the store).
	for _, c := range []struct {
		name string
		ok   func() bool
	}{
		{"another identity", func() bool { return l.Remembered(at, "other", []Rule{r}, 1, &res) }},
		{"a negative cost", func() bool { return l.Remembered(at, "k", []Rule{r}, -1, &res) }},
		{"another rule set", func() bool { return l.Remembered(at, "k", []Rule{rule("hour", 100, time.Hour)}, 1, &res) }},
		{"still blocked", func() bool { return !l.Remembered(at, "k", []Rule{r}, 1, &res) }},
		{"at its wait", func() bool { return l.Remembered(at.Add(want.RetryAfter), "k", []Rule{r}, 1, &res) }},
	} {
		if c.ok() {
			t.Errorf("%s: Remembered reports a denial (or, still blocked, none)", c.name)
		}
	}
	if got := load(t, s, "k", r, t0); got != 3 {
		t.Errorf("stored count %d, want 3: Remembered counted", got)
	}
	off := New(Options{Store: memstore.New(), DisableDenyCache: true})
	for range 4 {
		check(t, off, t0, "k", 1, r)
	}
	if off.Remembered(at, "k", []Rule{r}, 1, &res) {
		t.Error("Remembered reports a denial with the deny cache off")
	}
}
