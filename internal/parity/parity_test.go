package parity

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	base := func() Outcome {
		return Outcome{
			Response: Response{Status: 200, Header: http.Header{
				"Ratelimit":  {`"a";r=1;t=2, "b";r=3;t=4`},
				"Set-Cookie": {"x=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT", "y=2"},
				"Date":       {"Sun, 22 Nov 2026 09:47:30 GMT"},
			}, Body: []byte("hello")},
			Seen: &Seen{Method: "GET", Path: "/a%2Fb", Query: "q=1", Host: OriginHost, Header: http.Header{
				"X-Forwarded-For": {"127.0.0.2"}, "X-Forwarded-Host": {Host}, "X-Api-Key": {"k"},
			}, Body: []byte("up")},
		}
	}
	get := &Request{Method: "GET", Target: "/a%2Fb?q=1"}
	head := &Request{Method: "HEAD", Target: "/a%2Fb?q=1"}
	for _, tc := range []struct {
		name   string
		r      *Request
		change func(o *Outcome)
		want   string // a diff's beginning; "" for none
	}{
		{"same", get, func(*Outcome) {}, ""},
		{"a list on two lines and joined with a comma", get, func(o *Outcome) {
			o.Header["Ratelimit"] = []string{`"a";r=1;t=2`, `"b";r=3;t=4`}
		}, ""},
		{"lower-case names", get, func(o *Outcome) {
			o.Header["ratelimit"], o.Header["Ratelimit"] = o.Header["Ratelimit"], nil
		}, ""},
		{"framing and Date", get, func(o *Outcome) {
			o.Header["Date"], o.Header["Content-Length"] = []string{"Mon, 23 Nov 2026 00:00:00 GMT"}, []string{"5"}
		}, ""},
		{"a HEAD answer's body", head, func(o *Outcome) { o.Body = nil }, ""},
		{"the front end's host at the origin", get, func(o *Outcome) { o.Seen.Header.Set("X-Forwarded-Host", "other") }, ""},
		{"status", get, func(o *Outcome) { o.Status = 429 }, "status"},
		{"an item of a list", get, func(o *Outcome) { o.Header["Ratelimit"] = []string{`"a";r=0;t=2, "b";r=3;t=4`} }, "answer's Ratelimit"},
		{"a missing field", get, func(o *Outcome) { o.Header.Set("Retry-After", "3") }, "answer's Retry-After"},
		{"cookies are not lists", get, func(o *Outcome) {
			o.Header["Set-Cookie"] = []string{"x=1; Expires=Wed", "21 Oct 2037 07:28:00 GMT", "y=2"}
		}, "answer's Set-Cookie"},
		{"a GET answer's body", get, func(o *Outcome) { o.Body = nil }, "answer's body"},
		{"nothing at the origin", get, func(o *Outcome) { o.Seen = nil }, "reached the origin"},
		{"the origin's path", get, func(o *Outcome) { o.Seen.Path = "/a/b" }, "origin's path"},
		{"the origin's query", get, func(o *Outcome) { o.Seen.Query = "" }, "origin's query"},
		{"the origin's Host", get, func(o *Outcome) { o.Seen.Host = Host }, "origin's Host"},
		{"the client at the origin", get, func(o *Outcome) { o.Seen.Header.Set("X-Forwarded-For", "127.0.0.3") }, "origin's X-Forwarded-For"},
		{"a key header at the origin", get, func(o *Outcome) { o.Seen.Header.Del("X-Api-Key") }, "origin's X-Api-Key"},
		{"Unicode white space around a key at the origin", get, func(o *Outcome) { o.Seen.Header.Set("X-Api-Key", "k\u00a0") }, "origin's X-Api-Key"},
		{"a space and a tab around a list's element", get, func(o *Outcome) { o.Seen.Header.Set("X-Api-Key", " \tk ") }, ""},
		{"the origin's body", get, func(o *Outcome) { o.Seen.Body = nil }, "origin's body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base()
			tc.change(&b)
			d := Diff(tc.r, base(), b)
			switch {
			case tc.want == "" && len(d) > 0:
				t.Errorf("Diff = %q, want none", d)
			case tc.want != "" && (len(d) != 1 || !strings.HasPrefix(d[0], tc.want)):
				t.Errorf("Diff = %q, want one starting %q", d, tc.want)
			}
		})
	}
}

// reports records what Run reports instead of failing the test.
type reports struct {
	testing.TB
	got []string
}

func (e *reports) Helper()                        {}
func (e *reports) Errorf(format string, a ...any) { e.got = append(e.got, fmt.Sprintf(format, a...)) }

// TestRun: two local servers of the first configuration agree on every request
// of a sequence that reaches every state CheckCoverage asks for, and Run
// reports the first request on which a server whose plan allows one
// request more disagrees.
func TestRun(t *testing.T) {
	cfg := Configs()[0].Text
	reqs := Generate(1, 80, Options{SplitKeys: true, PlanOverrides: true, StepsBack: true})
	clock := NewClock(T0)
	var st Stats
	st.Add(Run(t, clock, reqs, Local(t, cfg, clock), Local(t, cfg, clock), nil))
	CheckCoverage(t, "limits", st)

	clock = NewClock(T0)
	more := strings.Replace(cfg, `"limit": 6,`, `"limit": 7,`, 1)
	e := &reports{TB: t}
	Run(e, clock, reqs, Local(t, cfg, clock), Local(t, more, clock), nil)
	if len(e.got) != 1 || !strings.Contains(e.got[0], `q=6;w=60`) || !strings.Contains(e.got[0], `q=7;w=60`) {
		t.Errorf("Run reported %q; want one disagreement on the free plan's minute quota", e.got)
	}
}
