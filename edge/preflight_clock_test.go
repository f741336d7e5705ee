package main

import (
	"net/netip"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/parity"
)

// TestPreflightMovesNoClock: a CORS preflight that passes undecided
// (no ip_limits) counts nothing and is decided by no limit, so the time it
// came at is no time a check has seen: after the clock steps back, the
// next check is decided at its own time, as on the local server (and the
// Lambda). The Worker kept the preflight's time as the isolate's newest
// (httpapi's admit reads the clock before it lets the preflight pass, and
// the Worker keeps every time read), and decided the check in the
// bucket the preflight had reached: with a limit of 2 a second used up at
// 09:47:31.90, a preflight at 09:47:32.10 and a step back to 09:47:31.95,
// the local server answers 429 and the Worker 200.
func TestPreflightMovesNoClock(t *testing.T) {
	c := parity.Config{Text: `{
  "plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}},
  "default_plan": "free"
}`}
	client := netip.MustParseAddr("127.0.0.2")
	get := parity.Request{Method: "GET", Target: "/v1/items", Client: client}
	preflight := parity.Request{Method: "OPTIONS", Target: "/v1/items", Client: client, Header: []parity.Field{
		{Name: "Origin", Value: parity.AppOrigin}, {Name: "Access-Control-Request-Method", Value: "DELETE"},
	}}
	reqs := []parity.Request{get, get, preflight, get}
	reqs[0].Step = time.Date(2026, 11, 22, 9, 47, 31, 900_000_000, time.UTC).Sub(parity.T0)
	reqs[2].Step = 200 * time.Millisecond
	reqs[3].Step = -150 * time.Millisecond
	clock := parity.NewClock(parity.T0)
	local, worker := parity.LocalOf(t, c, clock), wasmWorkerSide(t, c, clock)
	st := parity.Run(t, clock, reqs, local, worker, wasmNormaliser)
	if st.Requests == len(reqs) && st.Denied != 1 {
		t.Errorf("%d denials; want the last request's", st.Denied)
	}
}
