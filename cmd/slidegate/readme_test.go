package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// readmeSection returns the README's section "## name".
func readmeSection(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## "+name+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", "## "+name)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// TestReadmeNamesDynamoDBActions: the README's Command line section names
// every DynamoDB action `serve --store dynamodb --create-table` calls: the
// table's (dynamostore.TableAPI: CreateTable, DescribeTable while it waits
// for the table, UpdateTimeToLive) and the store's (dynamostore.Actions).
// An operator who granted what it listed, CreateTable and UpdateTimeToLive,
// got "describe table: ... AccessDeniedException" and no server.
func TestReadmeNamesDynamoDBActions(t *testing.T) {
	section := strings.Join(strings.Fields(readmeSection(t, "Command line")), " ")
	api := reflect.TypeFor[dynamostore.TableAPI]()
	want := []string{}
	for i := range api.NumMethod() {
		want = append(want, "dynamodb:"+api.Method(i).Name)
	}
	want = append(want, dynamostore.Actions...)
	for _, action := range want {
		t.Run(action, func(t *testing.T) {
			if !strings.Contains(section, "`"+action+"`") {
				t.Errorf("README's Command line section does not name %s, which serve --store dynamodb --create-table calls", action)
			}
		})
	}
}

// TestReadmeServeFlags: every flag of serve is in the README's synopsis,
// and where the Command line section gives a flag's default ("`--listen`
// (default `127.0.0.1:8080`"), it is the flag's.
func TestReadmeServeFlags(t *testing.T) {
	section := readmeSection(t, "Command line")
	var help bytes.Buffer
	if err := serve(context.Background(), []string{"-h"}, io.Discard, &help, nil); err != nil {
		t.Fatal(err)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	defaultOf := regexp.MustCompile(`\(default "?([^")]*)"?\)\s*$`)
	lines := strings.Split(help.String(), "\n")
	synopsis, _, _ := strings.Cut(section, "```\n\n")
	found := 0
	for i, line := range lines {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		found++
		name := m[1]
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(synopsis, "--"+name) {
				t.Errorf("README's synopsis has no --%s", name)
			}
			d := defaultOf.FindStringSubmatch(lines[i+1])
			j := strings.Index(section, "`--"+name+"`")
			if d == nil || j < 0 {
				return
			}
			near := section[j:min(len(section), j+80)]
			_, said, ok := strings.Cut(near, "(default ")
			if !ok {
				return
			}
			said = strings.NewReplacer("`", "", ",", "").Replace(strings.FieldsFunc(said, func(r rune) bool { return r == ';' || r == ')' || r == ' ' })[0])
			if got, err := time.ParseDuration(d[1]); err == nil {
				if want, err := time.ParseDuration(said); err != nil || want != got {
					t.Errorf("README gives --%s the default %q, the flag's is %s", name, said, got)
				}
				return
			}
			if said != d[1] {
				t.Errorf("README gives --%s the default %q, the flag's is %q", name, said, d[1])
			}
		})
	}
	if found < 10 {
		t.Fatalf("found %d flags in serve -h:\n%s", found, help.String())
	}
}

// readmeSession returns the commands of the console block of README's
// "Try it" and, for each, the output printed below it.
func readmeSession(t *testing.T) (cmds, outs []string) {
	t.Helper()
	_, block, ok := strings.Cut(readmeSection(t, "Try it"), "```console\n")
	if !ok {
		t.Fatal(`README's "Try it" has no console block`)
	}
	block, _, _ = strings.Cut(block, "```")
	for line := range strings.Lines(block) {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			cmds, outs = append(cmds, strings.TrimSpace(cmd)), append(outs, "")
			continue
		}
		if len(outs) == 0 {
			t.Fatalf("console block starts with output: %q", line)
		}
		outs[len(outs)-1] += line
	}
	return cmds, outs
}

// shellWords splits a command line as sh does for the quoting the
// README's session uses: single and double quotes, no escapes.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// curlRequest is what one of the session's curl commands sends, and which
// part of the answer it prints.
type curlRequest struct {
	method, path, body string
	header             []string
	include, codeOnly  bool
}

func parseCurl(t *testing.T, cmd string) curlRequest {
	t.Helper()
	w := shellWords(cmd)
	if len(w) == 0 || w[0] != "curl" {
		t.Fatalf("not a curl command: %s", cmd)
	}
	c := curlRequest{method: "GET"}
	for i := 1; i < len(w); i++ {
		arg := func() string {
			if i++; i >= len(w) {
				t.Fatalf("%s: %s takes a value", cmd, w[i-1])
			}
			return w[i]
		}
		switch a := w[i]; a {
		case "-s":
		case "-si":
			c.include = true
		case "-o":
			if arg() != "/dev/null" {
				t.Fatalf("%s: -o other than /dev/null", cmd)
			}
		case "-w":
			if arg() != `%{http_code}\n` {
				t.Fatalf("%s: -w other than the status code", cmd)
			}
			c.codeOnly = true
		case "-X":
			c.method = arg()
		case "-H":
			c.header = append(c.header, arg())
		case "-d":
			c.body = arg()
			if c.method == "GET" {
				c.method = "POST"
			}
		default:
			rest, ok := strings.CutPrefix(a, "localhost:8080")
			if !ok {
				t.Fatalf("%s: argument %q not understood", cmd, a)
			}
			c.path = rest
		}
	}
	return c
}

// TestReadmeSessionIsReal replays README's "Try it" session (every curl
// as printed, against `make run`'s configuration and demo origin) at the
// instants of its Date lines, and compares what curl would print with
// what the README prints: status codes, every header but Date's value,
// and the bodies with every number in them. The README calls the
// session real output; a change to a header, a body or the arithmetic
// that left it as it was would make it fiction.
func TestReadmeSessionIsReal(t *testing.T) {
	cfg, err := loadConfig("../../examples/config.json")
	if err != nil {
		t.Fatal(err)
	}
	demo := httptest.NewServer(demoOrigin())
	t.Cleanup(demo.Close)
	origin, err := url.Parse(demo.URL)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	p := httpapi.NewProxy(origin, log, cfg.Identity.Prefixes())
	boundOrigin(p, defaultOriginTimeout)
	// The session's instants, from its Date lines (Sun, 22 Nov 2026
	// 09:48:15 GMT) and the milliseconds its numbers give: the five 200s,
	// the 429 (retry_after_ms 44272), the pro key's request, the checks
	// (reset_after_ms 94230 and 103137).
	base := time.Date(2026, 11, 22, 9, 48, 15, 0, time.UTC)
	var now atomic.Int64 // nanoseconds after base
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: boundWrites(fullDuplex(p), defaultClientTimeout, time.Now), Logger: log,
		Now: func() time.Time { return base.Add(time.Duration(now.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(boundSilence(h, defaultClientTimeout, time.Now))
	t.Cleanup(srv.Close)
	const ms = time.Millisecond
	at := []time.Duration{700 * ms, 700 * ms, 700 * ms, 700 * ms, 700 * ms, 728*ms + 500, 750 * ms, 770*ms + 500*time.Microsecond, 792 * ms}
	cmds, outs := readmeSession(t)
	if len(cmds) != len(at) {
		t.Fatalf("README's session has %d commands, this test knows the instants of %d", len(cmds), len(at))
	}
	for i, cmd := range cmds {
		c := parseCurl(t, cmd)
		now.Store(int64(at[i]))
		got := rawExchange(t, srv.Listener.Addr().String(), c)
		if want := strings.TrimRight(outs[i], "\n"); got != want {
			t.Errorf("%s\nREADME prints:\n%s\ncurl prints:\n%s", cmd, want, got)
		}
	}
}

// rawExchange sends c over one connection and returns what curl prints of
// the answer: its status code, its head and body (-i, CRLFs as newlines,
// Date's value as in the README), or its body, without trailing newlines.
func rawExchange(t *testing.T, addr string, c curlRequest) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var req strings.Builder
	req.WriteString(c.method + " " + c.path + " HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n")
	for _, h := range c.header {
		req.WriteString(h + "\r\n")
	}
	if c.body != "" {
		req.WriteString("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " + strconv.Itoa(len(c.body)) + "\r\n")
	}
	req.WriteString("Connection: close\r\n\r\n" + c.body)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(bufio.NewReader(conn))
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok {
		t.Fatalf("%s %s: no end of head in %q", c.method, c.path, raw)
	}
	var lines []string
	for _, l := range strings.Split(head, "\r\n") {
		if strings.HasPrefix(l, "Connection: close") {
			continue // the test's own Connection: close
		}
		if strings.HasPrefix(l, "Date: ") {
			l = "Date: " + readmeDate
		}
		lines = append(lines, l)
	}
	switch {
	case c.codeOnly:
		status := strings.Fields(lines[0])
		return status[1]
	case c.include:
		return strings.TrimRight(strings.Join(lines, "\n")+"\n\n"+body, "\n")
	}
	return strings.TrimRight(body, "\n")
}

// readmeDate is the Date of the README's session.
const readmeDate = "Sun, 22 Nov 2026 09:48:15 GMT"
