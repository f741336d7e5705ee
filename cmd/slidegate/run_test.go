package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/internal/testenv"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

func TestCheckConfig(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"check-config", "../../examples/config.json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ok: plans enterprise, free, pro (default free), 2 API keys") {
		t.Errorf("output %q", out.String())
	}
	err := run(context.Background(), []string{"check-config", "../../config/testdata/invalid/zero_window.json"}, io.Discard, io.Discard)
	if err == nil || !strings.HasSuffix(err.Error(), `config: plans.free.limits[1].window: "0s": must be at least 1s`) || !strings.Contains(err.Error(), "zero_window.json: ") {
		t.Errorf("invalid config: %v, want the error naming the file", err)
	}
	if err := run(context.Background(), []string{"check-config", "no/such/file.json"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "no/such/file.json") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want an error naming it, wrapping fs.ErrNotExist", err)
	}
	// An empty name (check-config "$UNSET") is no file, not the defaults.
	out.Reset()
	if err := run(context.Background(), []string{"check-config", ""}, &out, io.Discard); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "FILE") || out.Len() != 0 {
		t.Errorf("check-config \"\": %v, output %q; want a usage error naming FILE and no ok", err, out.String())
	}
}

// TestBlankConfigFileRefused: a --config file that is empty or holds white
// space and a byte order mark alone, which as a document is the defaults,
// is refused by check-config and by serve at start, naming the file: a
// file truncated to be written again (or `echo > config.json`) made every
// keyed client a default plan's without a word. Leaving --config out
// still gives the defaults.
func TestBlankConfigFileRefused(t *testing.T) {
	for _, doc := range []string{"", "\n", " \t\r\n", "\ufeff", "\ufeff\n"} {
		path := filepath.Join(t.TempDir(), "config.json")
		writeFile(t, path, doc)
		var out bytes.Buffer
		err := run(context.Background(), []string{"check-config", path}, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), path+": empty file") || out.Len() != 0 {
			t.Errorf("check-config of %q: %v, output %q; want an empty-file error naming it and no ok", doc, err, out.String())
		}
		out.Reset()
		// Cancelled already: a serve that took the file would start,
		// stop at once and return nil rather than serve for ever.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err = run(ctx, []string{"serve", "--config", path, "--listen", "127.0.0.1:0"}, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), path+": empty file") || strings.Contains(out.String(), "listening") {
			t.Errorf("serve --config of %q: %v, output %q; want an empty-file error and no listener", doc, err, out.String())
		}
	}
}

// TestCheckConfigEndlessFile: a configuration file that never ends (a pipe
// whose writer goes on, as /dev/zero does) is refused once it is past
// config.MaxSize, not read until memory runs out.
func TestCheckConfigEndlessFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "config.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err) // Linux always has FIFOs: a failure here is no reason to skip
	}
	// The writer stops at 4 MiB (or when the reader hangs up), so that
	// without the bound the test fails instead of running for ever.
	wrote := make(chan int64, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			wrote <- -1
			return
		}
		n, _ := io.Copy(w, io.LimitReader(zeros{}, 4*config.MaxSize))
		w.Close()
		wrote <- n
	}()
	err := run(context.Background(), []string{"check-config", fifo}, io.Discard, io.Discard)
	if err == nil || !strings.HasSuffix(err.Error(), "config: (document): more than 1048576 bytes: a configuration may have at most 1048576 bytes") {
		t.Errorf("check-config of an endless file: %v", err)
	}
	// A reader opened and closed at once lets a writer still waiting in
	// its open go on (to EPIPE): a check-config that failed without
	// opening the file ends the test instead of leaving it blocked.
	if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		r.Close()
	}
	if n := <-wrote; n == 4*config.MaxSize {
		t.Errorf("check-config read all %d bytes the writer offered, want it to stop past %d", n, config.MaxSize)
	}
}

// zeros reads as /dev/zero does.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestHashKey(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"hash-key", "demo-key-pro"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36\n"; got != want {
		t.Errorf("hash-key = %q, want %q", got, want)
	}
	out.Reset()
	var errOut strings.Builder
	if err := hashKey([]string{"-"}, strings.NewReader("demo-key-pro\r\n"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36\n"; got != want || errOut.Len() != 0 {
		t.Errorf("hash-key - = %q (stderr %q), want %q and no warning", got, errOut.String(), want)
	}
}

// unending is a standard input of one line with no end in sight (as
// /dev/zero is, but it ends after 16 times the bound, so that a hash-key
// that reads it all fails the test instead of the machine) and counts
// what was read of it.
type unending struct{ n int }

func (u *unending) Read(p []byte) (int, error) {
	if u.n >= 16*maxHeaderBytes {
		return 0, io.EOF
	}
	p = p[:min(len(p), 16*maxHeaderBytes-u.n)]
	for i := range p {
		p[i] = 'k'
	}
	u.n += len(p)
	return len(p), nil
}

// TestHashKeyStdinBounded: "hash-key -" reads one line, but a line that
// does not end (/dev/zero, a pipe from a command that never prints a
// newline) was read until the process died of memory. It is read up to the
// most a request's header may hold and refused, naming the bound; a key of
// that length is still hashed.
func TestHashKeyStdinBounded(t *testing.T) {
	in := &unending{}
	var out, errOut strings.Builder
	err := hashKey([]string{"-"}, in, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(maxKeyBytes)) {
		t.Errorf("hash-key - on an endless line: error %v, want one naming the bound %d", err, maxKeyBytes)
	}
	if in.n > 2*maxKeyBytes || out.Len() != 0 {
		t.Errorf("read %d bytes and printed %q, want at most %d read and nothing printed", in.n, out.String(), 2*maxKeyBytes)
	}
	key := strings.Repeat("k", maxKeyBytes)
	out.Reset()
	if err := hashKey([]string{"-"}, strings.NewReader(key+"\r\n"), &out, &errOut); err != nil {
		t.Fatalf("a key of %d bytes: %v", len(key), err)
	}
	sum := sha256.Sum256([]byte(key))
	if got, want := out.String(), hex.EncodeToString(sum[:])+"\n"; got != want {
		t.Errorf("a key of %d bytes hashed to %q, want %q", len(key), got, want)
	}
}

// TestHashKeyTakesWhatServeTakes: hash-key - takes every key that serve's
// server lets through in a key header. Bounded by MaxHeaderBytes alone, it
// refused keys of 64 to 68 KiB that serve counted, as net/http reads 4 KiB
// past the bound before its 431. The longest X-API-Key serve's server
// takes is found by bisection over real requests.
func TestHashKeyTakesWhatServeTakes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := frontServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), slog.New(slog.DiscardHandler), defaultClientTimeout, time.Now)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	taken := func(n int) bool {
		req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", strings.Repeat("k", n))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("a key of %d bytes: %v", n, err)
		}
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusOK:
			return true
		case http.StatusRequestHeaderFieldsTooLarge:
			return false
		}
		t.Fatalf("a key of %d bytes: status %d", n, res.StatusCode)
		return false
	}
	lo, hi := 1, 2*maxKeyBytes // taken(lo), !taken(hi)
	if !taken(lo) || taken(hi) {
		t.Fatalf("serve's server takes a key of %d bytes: %v, of %d: %v; want true, false", lo, taken(lo), hi, taken(hi))
	}
	for hi-lo > 1 {
		if m := (lo + hi) / 2; taken(m) {
			lo = m
		} else {
			hi = m
		}
	}
	var out, errOut strings.Builder
	if err := hashKey([]string{"-"}, strings.NewReader(strings.Repeat("k", lo)+"\n"), &out, &errOut); err != nil {
		t.Errorf("serve takes a key of %d bytes, hash-key - refuses it: %v", lo, err)
	}
	if err := hashKey([]string{"-"}, strings.NewReader(strings.Repeat("k", maxKeyBytes+1)+"\n"), &out, &errOut); err == nil {
		t.Errorf("hash-key - took a key of %d bytes, more than serve takes (%d)", maxKeyBytes+1, lo)
	}
}

// TestHashKeyWarns: a key with a control character, which no header can
// carry (servers refuse it), is hashed as it is, for the check API, with a
// warning that says why no request through the pre-filter will match it.
// White space around a key is not the key's for the pre-filter on every
// platform nor for the check API (they trim it): the key is hashed without
// it, with a warning. Hashed with it, as before, the api_keys entry matched
// no request at all, the check API's included, and the key's client got
// the default plan. Keys a header carries as they are get no warning.
func TestHashKeyWarns(t *testing.T) {
	tests := []struct {
		arg, stdin, key string // key: what is hashed
		warning         string
		unsaid          string // what stderr must not say
	}{
		{arg: "k", key: "k"},
		{arg: "inner space\tand tab", key: "inner space\tand tab"},
		{arg: "\xd0\xba\xd0\xbb", key: "\xd0\xba\xd0\xbb"},
		// What an origin may trim is dropped by the pre-filter and the
		// check API (e450851, 4928531): hashed with it, "k\u00a0" (a key
		// copied from a page) matched no request.
		{arg: "k\u00a0", key: "k", warning: "white space"},
		{arg: "\u3000Bearer abc\u2028", key: "bearer abc", warning: "white space"},
		{arg: "k\xa0", key: "k", warning: "white space"}, // a Latin-1 no-break space
		{arg: "-", stdin: "k\u00a0\n", key: "k", warning: "white space"},
		// A key file saved with a byte order mark (Notepad's UTF-8):
		// hashed with it, the entry matched no request.
		{arg: "-", stdin: "\ufeffk\r\n", key: "k", warning: "white space"},
		{arg: " k", key: "k", warning: "white space"},
		{arg: "k\t", key: "k", warning: "white space"},
		{arg: " Bearer abc\t", key: "bearer abc", warning: "white space"},
		{arg: "-", stdin: "k \n", key: "k", warning: "white space"},
		{arg: "a\x00b", key: "a\x00b", warning: "control character"},
		{arg: "a\nb", key: "a\nb", warning: "control character"},
		{arg: "a\x7fb", key: "a\x7fb", warning: "control character"},
		// A key that is not UTF-8 cannot be sent to the check API (its
		// body is JSON, UTF-8), and a Worker reads such bytes as U+FFFD:
		// a key file saved as UTF-16 (PowerShell 5's "echo KEY > file")
		// was said to be for the check API only, and one in Latin-1 was
		// hashed without a word, for an entry a Worker never matched.
		{arg: "-", stdin: "\xff\xfek\x00\r\x00\n\x00", key: "\xff\xfek\x00\r\x00", warning: "not UTF-8", unsaid: "only the check API"},
		{arg: "cl\xe9", key: "cl\xe9", warning: "not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.arg+tt.stdin), func(t *testing.T) {
			var out, errOut strings.Builder
			if err := hashKey([]string{tt.arg}, strings.NewReader(tt.stdin), &out, &errOut); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tt.key))
			if got, want := out.String(), hex.EncodeToString(sum[:])+"\n"; got != want {
				t.Errorf("stdout %q, want %q", got, want)
			}
			if got := errOut.String(); (tt.warning == "") != (got == "") || !strings.Contains(got, tt.warning) {
				t.Errorf("stderr %q, want a warning about %q", got, tt.warning)
			}
			if got := errOut.String(); tt.unsaid != "" && strings.Contains(got, tt.unsaid) {
				t.Errorf("stderr %q says %q", got, tt.unsaid)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"hash-key"},
		{"check-config"},
		// "--" ends the options (3ece378) and gives no KEY or FILE:
		// hash-key -- $KEY, KEY unset, printed the hash of "--".
		{"hash-key", "--"},
		{"hash-key", " \t "}, // no key to the pre-filter nor the check API
		{"hash-key", "\u00a0\u2003"},
		{"check-config", "--"},
		{"serve", "--origin", "http://x", "--demo-origin"},
		{"serve", "--store", "redis"},
		{"serve", "--store", "dynamodb"},
		{"serve", "--table", "t"},
		{"serve", "--bogus"},
		{"serve", "--origin", "ftp://x", "--listen", "127.0.0.1:0"},
		{"serve", "--origin", "http://127.0.0.1:99999", "--listen", "127.0.0.1:0"},
		{"serve", "--origin", "http://127.0.0.1:0", "--listen", "127.0.0.1:0"},
		{"serve", "--origin", "http://:8080", "--listen", "127.0.0.1:0"},
		{"serve", "--origin", "http://user:secret@127.0.0.1:8080", "--listen", "127.0.0.1:0"},
		{"serve", "--max-identities", "-1"},
		{"serve", "--max-identities", "many"},
		{"serve", "--origin-timeout", "-1s"},
		{"serve", "--origin-timeout", "10"},
		{"serve", "--client-timeout", "-1s"},
		{"serve", "--client-timeout", "10"},
		// Empty values, as an unset variable gives them ("$CONFIG").
		{"serve", "--config", "", "--listen", "127.0.0.1:0"},
		{"serve", "--config=", "--listen", "127.0.0.1:0"},
		{"serve", "--listen", ""},
		{"serve", "--origin", "", "--listen", "127.0.0.1:0"},
		{"serve", "--store", "dynamodb", "--table", "t", "--endpoint", ""},
	} {
		// Cancelled: a serve that starts returns at once, not a usage error.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := run(ctx, args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("run(%q) = %v: the error shows the password", args, err)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"serve", "--help"}, {"serve", "-h"},
		{"check-config", "-h"}, {"check-config", "--help"}, {"check-config", "--h"}, {"check-config", "-help"},
		{"hash-key", "-h"}, {"hash-key", "--help"}, {"hash-key", "-help"}, {"hash-key", "--h"}} {
		var out, errOut strings.Builder
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Errorf("run(%q) = %v, want nil: asking for help is not an error", args, err)
		}
		if help := out.String() + errOut.String(); !strings.Contains(help, "listen") {
			t.Errorf("run(%q) printed %q, want the serve flags or the usage", args, help)
		}
		if args[0] != "serve" && errOut.Len() != 0 {
			t.Errorf("run(%q) printed %q on standard error, want the usage on standard output (asked for, as help prints it)", args, errOut.String())
		}
	}
	// A key that looks like a request for help is hashed after "--".
	var out strings.Builder
	if err := run(context.Background(), []string{"hash-key", "--", "-h"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte("-h")); out.String() != hex.EncodeToString(sum[:])+"\n" {
		t.Errorf("hash-key -- -h printed %q, want the hash of -h", out.String())
	}
}

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// serveInProcess runs `slidegate serve args...` on 127.0.0.1:0 until the
// test ends, and returns its base URL.
func serveInProcess(t *testing.T, args ...string) (base string, out *testenv.Buffer) {
	t.Helper()
	return serveLogging(t, io.Discard, args...)
}

// serveLogging is serveInProcess with the server's log (standard error)
// going to logs.
func serveLogging(t *testing.T, logs io.Writer, args ...string) (base string, out *testenv.Buffer) {
	t.Helper()
	base, out, stop := startServe(t, logs, args...)
	t.Cleanup(stop)
	return base, out
}

// startServe runs `slidegate serve args...` on 127.0.0.1:0 and returns its
// base URL and stop, which ends it and waits (bounded) for it to return;
// stop may be called more than once.
func startServe(t *testing.T, logs io.Writer, args ...string) (base string, out *testenv.Buffer, stop func()) {
	t.Helper()
	return startReloading(t, logs, nil, args...)
}

// startReloading is startServe with serve reloading its configuration at
// each receive from reload, as on SIGHUP.
func startReloading(t *testing.T, logs io.Writer, reload <-chan struct{}, args ...string) (base string, out *testenv.Buffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- runReloading(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), out, logs, reload)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve returned %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Error("serve did not return after cancel")
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return m[1], out, stop
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no address in %q", out.String())
		}
	}
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// farConfig writes the configuration file path with every window replaced
// by testenv.FarWindow's, and returns the copy's path and the window: the
// servers read the real clock, and a bucket boundary during the run
// (a minute's, a day's) would let a request through that the test expects
// limited.
func farConfig(t *testing.T, path string) (string, time.Duration) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := testenv.FarWindow(time.Now())
	src = regexp.MustCompile(`"window": *"[^"]*"`).ReplaceAll(src, []byte(fmt.Sprintf(`"window": %q`, w)))
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return out, w
}

// TestServeInProcess runs serve until its context is cancelled.
func TestServeInProcess(t *testing.T) {
	var out *testenv.Buffer
	t.Run("serve", func(t *testing.T) {
		var base string
		base, out = serveInProcess(t, "--config", "testdata/e2e.json", "--demo-origin")
		resp, err := http.Get(base + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"path":"/hello"`) || resp.Header.Get("RateLimit") == "" {
			t.Errorf("GET /hello = %d %s %v", resp.StatusCode, body, resp.Header)
		}
	})
	if !strings.Contains(out.String(), "slidegate: stopped") {
		t.Errorf("output %q", out.String())
	}
}

// TestServeMaxIdentities: the memory store holds about --max-identities
// identities (here 1,024, four per shard). A flood of new keys is served
// and limited as ever, and a key that has used its quota stays limited:
// what makes room is the least counted identities, never it.
func TestServeMaxIdentities(t *testing.T) {
	// A day-like window whose bucket outlasts the run (serve reads the real
	// clock), and count_denied, which turns the deny cache off: the last
	// answer comes from the store, which must still hold the spent key.
	cfg := filepath.Join(t.TempDir(), "config.json")
	w := testenv.FarWindow(time.Now())
	src := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 3, "window": %q}]}}, "count_denied": true}`, w)
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut testenv.Buffer
	base, _, stop := startServe(t, &errOut, "--config", cfg, "--demo-origin", "--max-identities", "1024")
	defer stop()
	send := func(key string) int { return get(t, base, "/x", key).status }
	for i, want := range []int{200, 200, 200, 429} {
		if got := send("spent"); got != want {
			t.Fatalf("spent, request %d: %d, want %d", i+1, got, want)
		}
	}
	for i := range 3000 {
		if got := send(fmt.Sprintf("key-%d", i)); got != http.StatusOK {
			t.Fatalf("key-%d: %d, want 200", i, got)
		}
	}
	if got := send("spent"); got != http.StatusTooManyRequests {
		t.Errorf("spent, after 3,000 new keys: %d, want 429 (its count kept)", got)
	}
	// At the latest when it stops, serve logs what its store evicted to
	// hold 1,024 identities of 3,001. The last report's total counts them
	// all: a run longer than evictionReport (a minute, on a loaded machine
	// under -race) reports once before, with the evictions so far, and
	// that first report was read (5 of 5 such runs failed).
	stop()
	all := regexp.MustCompile(`"evicted_total":(\d+)`).FindAllStringSubmatch(errOut.String(), -1)
	if all == nil {
		t.Fatalf("no eviction report in the log:\n%s", errOut.String())
	}
	m := all[len(all)-1]
	if n, _ := strconv.Atoi(m[1]); n < 3001-1024 {
		t.Errorf("evicted_total %d, want at least %d", n, 3001-1024)
	}
}

// TestServeMaxIdentitiesBothStores: --max-identities bounds the memory
// store of "scope": "local" limits as it does the shared one, and serve
// reports the evictions of both. A client rotating made-up keys and
// addresses (X-Forwarded-For from a trusted proxy) makes a new identity in
// each store with every request; an address that used its local limit
// stays limited through the flood.
func TestServeMaxIdentitiesBothStores(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.json")
	w := testenv.FarWindow(time.Now())
	// count_denied turns the deny cache off: the last answer comes from
	// the local store, which must still hold the spent address.
	src := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 1000, "window": %q}]}},
		"ip_limits": [{"name": "ip", "limit": 3, "window": %q, "scope": "local"}],
		"identity": {"trusted_proxies": ["127.0.0.1"]}, "count_denied": true}`, w, w)
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut testenv.Buffer
	base, _, stop := startServe(t, &errOut, "--config", cfg, "--demo-origin", "--max-identities", "1024")
	defer stop()
	send := func(addr, key string) int { return getFrom(t, base, "/x", key, addr).status }
	const spent, flood = "198.51.100.7", 3000
	for i, want := range []int{200, 200, 200, 429} {
		if got := send(spent, ""); got != want {
			t.Fatalf("%s, request %d: %d, want %d", spent, i+1, got, want)
		}
	}
	for i := range flood {
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		if got := send(addr, fmt.Sprint("key-", i)); got != http.StatusOK {
			t.Fatalf("%s with key-%d: %d, want 200", addr, i, got)
		}
	}
	if got := send(spent, ""); got != http.StatusTooManyRequests {
		t.Errorf("%s, after %d new addresses: %d, want 429 (its local count kept)", spent, flood, got)
	}
	// Each store held flood+1 identities (the local one the addresses, the
	// shared one the keys and the spent address's plan) in room for 1,024.
	stop()
	all := regexp.MustCompile(`"evicted_total":(\d+)`).FindAllStringSubmatch(errOut.String(), -1)
	if all == nil {
		t.Fatalf("no eviction report in the log:\n%s", errOut.String())
	}
	if n, _ := strconv.Atoi(all[len(all)-1][1]); n < 2*(flood+1-1024) {
		t.Errorf("evicted_total %d, want at least %d: both stores full", n, 2*(flood+1-1024))
	}
}

// TestLogEvictions: serve's periodic report logs evictions once, with the
// number since the last report.
func TestLogEvictions(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	rule := window.Rule{Name: "minute", Limit: 10, Period: time.Minute}
	pos := rule.At(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	fill := func(m *memstore.Store, prefix string, n int) {
		for i := range n {
			if _, _, _, err := m.UpdateRule(context.Background(), fmt.Sprint(prefix, i), rule, pos, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := memstore.NewLimited(256), memstore.NewLimited(256)
	fill(a, "a-", 300)
	fill(b, "b-", 400)
	total := a.Evicted() + b.Evicted()
	if a.Evicted() < 300-256 || b.Evicted() < 400-256 {
		t.Fatalf("Evicted = %d and %d, want at least %d and %d", a.Evicted(), b.Evicted(), 300-256, 400-256)
	}
	// The first report counts both stores.
	if got := logEvictions(log, []*memstore.Store{a, b}, 0); got != total {
		t.Errorf("logEvictions = %d, want %d", got, total)
	}
	if want := fmt.Sprintf(`"evicted":%d,"evicted_total":%d`, total, total); !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), `"level":"WARN"`) {
		t.Errorf("log %q, want a WARN line with %s", buf.String(), want)
	}
	// No new evictions: no line.
	buf.Reset()
	if got := logEvictions(log, []*memstore.Store{a, b}, total); got != total || buf.Len() != 0 {
		t.Errorf("no new evictions: logEvictions = %d, log %q; want %d and no line", got, buf.String(), total)
	}
	// More: the line gives those since the last report, and the total.
	fill(b, "c-", 100)
	now := a.Evicted() + b.Evicted()
	if got := logEvictions(log, []*memstore.Store{a, b}, total); got != now {
		t.Errorf("logEvictions = %d, want %d", got, now)
	}
	if want := fmt.Sprintf(`"evicted":%d,"evicted_total":%d`, now-total, now); !strings.Contains(buf.String(), want) {
		t.Errorf("log %q, want %s", buf.String(), want)
	}
}

// TestServeDynamoDB: two servers on one DynamoDB table (dynalite) share
// their counters. The servers read the real clock, so the limit's window
// is one whose bucket outlasts the run (farConfig).
func TestServeDynamoDB(t *testing.T) {
	srv := dynalite.Run(t)
	cfg, _ := farConfig(t, "testdata/shared.json")
	args := []string{"--config", cfg, "--demo-origin", "--store", "dynamodb", "--table", "slidegate-e2e", "--endpoint", srv.Endpoint}
	a, _ := serveInProcess(t, append(args, "--create-table")...)
	b, _ := serveInProcess(t, args...)
	for i, base := range []string{a, b, a} {
		if got := status(t, base+"/x"); got != 200 {
			t.Fatalf("request %d: %d", i+1, got)
		}
	}
	if got := status(t, b+"/x"); got != 429 {
		t.Errorf("4th request, on the second server: %d, want 429 (counters not shared)", got)
	}
}

// TestEndToEnd builds the real binary, starts it on a free port in front of
// its demo origin, drives it over HTTP to a 429, and stops it with SIGTERM
// while a request is in flight.
func TestEndToEnd(t *testing.T) {
	cfg, w := farConfig(t, "testdata/e2e.json")
	c := startBinary(t, "--config", cfg, "--demo-origin")
	base := c.base
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	if r := get("/healthz"); r.StatusCode != 200 {
		t.Errorf("healthz %d", r.StatusCode)
	}
	for i := range 3 {
		r := get("/api/things")
		if r.StatusCode != 200 {
			t.Fatalf("request %d: %d", i+1, r.StatusCode)
		}
		if got, want := r.Header.Get("RateLimit-Policy"), fmt.Sprintf(`"minute";q=3;w=%d`, int(w.Seconds())); got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		if got, want := r.Header.Get("X-RateLimit-Remaining"), string(rune('2'-i)); got != want {
			t.Errorf("request %d: remaining %q, want %q", i+1, got, want)
		}
	}
	r := get("/api/things")
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != 429 || r.Header.Get("Content-Type") != "application/problem+json" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("4th request: %d %v %s", r.StatusCode, r.Header, body)
	}
	if !strings.Contains(string(body), `"violated-policies":["minute"]`) || !strings.Contains(string(body), `"upgrade_url":"https://example.com/upgrade"`) {
		t.Errorf("429 body %s", body)
	}
	// A pro key is a separate identity with its own plan.
	if r := get("/api/things", "X-API-Key", "demo-key-pro"); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Limit") != "1000" {
		t.Errorf("pro key: %d limit %q", r.StatusCode, r.Header.Get("X-RateLimit-Limit"))
	}
	// The check API needs its token.
	post := func(auth string) int {
		req, _ := http.NewRequest("POST", base+"/v1/check", strings.NewReader(`{"key":"demo-key-pro"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(""); got != 401 {
		t.Errorf("check without token: %d", got)
	}
	if got := post("Bearer e2e-token-0123456789"); got != 200 {
		t.Errorf("check with token: %d", got)
	}
	if logs := c.stderr.String(); !strings.Contains(logs, `"msg":"denied"`) || strings.Contains(logs, "demo-key-pro") {
		t.Errorf("logs: %s", logs)
	}

	// Graceful shutdown: a streaming request is in flight (its first line
	// has arrived) when SIGTERM comes; it still completes.
	stream := get("/demo/stream", "X-API-Key", "demo-key-pro")
	br := bufio.NewReader(stream.Body)
	if l, err := br.ReadString('\n'); err != nil || l != "first\n" {
		t.Fatalf("stream first line %q %v", l, err)
	}
	c.signal(t, syscall.SIGTERM)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Errorf("in-flight request cut: %q %v", rest, err)
	}
	if err := c.wait(t); err != nil {
		t.Errorf("exit: %v (%s)", err, c.stderr.String())
	}
	if got := c.stdout.String(); !strings.Contains(got, "shutting down") || !strings.Contains(got, "slidegate: stopped") {
		t.Errorf("shutdown output %q", got)
	}
}

// TestServeIdentityOnTheWire: identities as the server reads them off the
// connection, header lines and all, from 127.0.0.1 as a trusted proxy:
// each pair of requests must be one client (the second of a quota of 2
// after the first is admitted, a third limited) or two. The log must hold
// no key.
func TestServeIdentityOnTheWire(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	// A window whose bucket outlasts the run: serve reads the real clock,
	// and a minute boundary would let a third request through.
	doc := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "minute", "limit": 2, "window": %q}]}},
		"identity": {"trusted_proxies": ["127.0.0.1"]}}`, testenv.FarWindow(time.Now()))
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	base, _ := serveLogging(t, &logs, "--config", cfg, "--demo-origin")
	do := func(raw string) int {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	get := func(lines string) int {
		return do("GET /x HTTP/1.1\r\nHost: a\r\n" + lines + "Connection: close\r\n\r\n")
	}
	tests := []struct {
		name         string
		first, other string
		same         bool
	}{
		{"key lines are their joined value", "X-API-Key: k1\r\nX-API-Key: k2\r\n", "X-API-Key: k1,k2\r\n", true},
		{"key lines are not their first line", "X-API-Key: k3\r\nX-API-Key: k4\r\n", "X-API-Key: k3\r\n", false},
		{"white space around a key is not the key", "X-API-Key: \t k5  \r\n", "X-API-Key: k5\r\n", true},
		{"case matters", "X-API-Key: k6\r\n", "X-API-Key: K6\r\n", false},
		{"non-ASCII keys", "X-API-Key: \xd0\xba\xd0\xbb\r\n", "X-API-Key: \xd0\xba\xd0\xbc\r\n", false},
		{"IPv4-mapped is IPv4", "X-Forwarded-For: 203.0.113.7\r\n", "X-Forwarded-For: [::ffff:203.0.113.7]:443\r\n", true},
		{"a trailing comma is no hop", "X-Forwarded-For: 203.0.113.8,\r\n", "X-Forwarded-For: 203.0.113.8\r\n", true},
		{"an empty element is no hop", "X-Forwarded-For: 203.0.113.9, , 127.0.0.1\r\n", "X-Forwarded-For: 203.0.113.9\r\n", true},
		{"the client, not the proxy", "X-Forwarded-For: 203.0.113.10,\r\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 2 {
				if code := get(tt.first); code != http.StatusOK {
					t.Fatalf("request %d: %d", i+1, code)
				}
			}
			want := http.StatusOK
			if tt.same {
				want = http.StatusTooManyRequests
			}
			if code := get(tt.other); code != want {
				t.Errorf("the other form: %d, want %d", code, want)
			}
			if tt.same {
				return
			}
			// The other form's own quota is untouched but for that one.
			if code := get(tt.other); code != http.StatusOK {
				t.Errorf("the other form again: %d", code)
			}
		})
	}
	// A 100 KB key never reaches the handler: the header limit refuses it.
	if code := get("X-API-Key: sk_" + strings.Repeat("B", 100<<10) + "\r\n"); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KB key: %d, want 431", code)
	}
	// A chunked check body over 4 KiB is a 400.
	chunk := strings.Repeat(" ", 4096)
	if code := do("POST /v1/check HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
		"1000\r\n" + chunk + "\r\n1\r\n \r\n0\r\n\r\n"); code != http.StatusBadRequest {
		t.Errorf("chunked check body of 4097 bytes: %d, want 400", code)
	}
	out := logs.String()
	if !strings.Contains(out, `"msg":"denied"`) {
		t.Fatalf("no denial logged: %s", out)
	}
	// No hex digest holds a k; the keys are nowhere else either.
	for _, key := range []string{"k1", "k2", "k3", "k5", "k6", "K6", "\xd0\xba", "sk_B"} {
		if strings.Contains(out, key) {
			t.Errorf("log holds %q: %s", key, out)
		}
	}
}

// TestServeStartLineHidesOriginQuery: the start line, which goes to logs,
// shows the origin without its query or fragment, which may hold a token
// (an Azure Function's ?code=), as the origin's errors do.
func TestServeStartLineHidesOriginQuery(t *testing.T) {
	tests := []struct{ origin, shown string }{
		{"http://127.0.0.1:1/api?code=s3cret-token", "origin http://127.0.0.1:1/api?…)"},
		{"http://127.0.0.1:1/api#s3cret-token", "origin http://127.0.0.1:1/api?…)"},
		{"http://127.0.0.1:1/a%2Fb", "origin http://127.0.0.1:1/a%2Fb)"},
	}
	for _, tt := range tests {
		t.Run(tt.origin, func(t *testing.T) {
			_, out := serveInProcess(t, "--origin", tt.origin)
			if got := out.String(); !strings.Contains(got, tt.shown) || strings.Contains(got, "s3cret") {
				t.Errorf("start line %q, want it to show %q and no token", got, tt.shown)
			}
		})
	}
}

// fakeDynamoDB answers every DynamoDB call with status and body, as
// DynamoDB's JSON protocol does, and counts the calls by their target.
func fakeDynamoDB(t *testing.T, status int, body string) (endpoint string, calls func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810."))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(seen) }
}

// TestServeChecksTable: serve --store dynamodb reads its table before it
// listens. A table that is not there (a mistyped --table, another region)
// stops it with an error naming the table; it used to start, and every
// request met a store error and was let through unlimited
// (on_store_error: allow).
func TestServeChecksTable(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "") // the fake is on loopback: NewClient's local credentials
	t.Run("missing table", func(t *testing.T) {
		endpoint, calls := fakeDynamoDB(t, http.StatusBadRequest,
			`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &testenv.Buffer{}
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--store", "dynamodb", "--table", "slidegate-typo", "--endpoint", endpoint}, out, io.Discard)
		}()
		var err error
		for deadline := time.Now().Add(15 * time.Second); ; {
			if strings.Contains(out.String(), "listening") {
				t.Fatalf("output %q: serve listened on a table it cannot use", out.String())
			}
			select {
			case err = <-done:
			case <-time.After(10 * time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatalf("serve did not return; output %q", out.String())
				}
				continue
			}
			break
		}
		if err == nil || !strings.Contains(err.Error(), `"slidegate-typo"`) || !strings.Contains(err.Error(), "--create-table") {
			t.Errorf("serve = %v, want an error naming the table and --create-table", err)
		}
		if got := calls(); len(got) != 1 || got[0] != "GetItem" {
			t.Errorf("calls %q, want one GetItem", got)
		}
	})
	t.Run("table there", func(t *testing.T) {
		endpoint, calls := fakeDynamoDB(t, http.StatusOK, `{}`)
		_, out := serveInProcess(t, "--store", "dynamodb", "--table", "slidegate", "--endpoint", endpoint)
		if !strings.Contains(out.String(), "store dynamodb") {
			t.Errorf("output %q", out.String())
		}
		if got := calls(); len(got) != 1 || got[0] != "GetItem" {
			t.Errorf("calls %q, want one GetItem", got)
		}
	})
}

// TestCheckConfigCarrierSize: a configuration too large, as one line of
// JSON, for a Lambda's environment (4 KB for all its variables) or a
// Worker's variable (5 KB) is valid, and serve takes it, but its
// deployment there fails: check-config says ok and warns, with the size
// and what to do, on stderr. One that fits gets no warning.
func TestCheckConfigCarrierSize(t *testing.T) {
	dir := t.TempDir()
	write := func(keys int) string {
		var b strings.Builder
		b.WriteString("{\n  \"api_keys\": {\n")
		for i := range keys {
			if i > 0 {
				b.WriteString(",\n")
			}
			sum := sha256.Sum256([]byte(strconv.Itoa(i)))
			fmt.Fprintf(&b, "    %q: \"pro\"", hex.EncodeToString(sum[:]))
		}
		b.WriteString("\n  }\n}\n")
		path := filepath.Join(dir, strconv.Itoa(keys)+".json")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tt := range []struct {
		keys int
		want []string // in the warning; none: no warning
	}{
		{0, nil},
		// Lambda measures its variables as one JSON object, names and
		// values, the configuration's quotes escaped again: 4,075 bytes
		// with 52 keys (3,810 as one line), 4,152 with 53 (3,883). Taken
		// as the line's length, 55 keys (4,029) were said to fit.
		{52, nil},
		{53, []string{"3883 bytes as one line of JSON", "4152 in a Lambda's", "Lambda", "default_plan"}},
		{55, []string{"4029 bytes as one line of JSON", "Lambda", "default_plan"}},
		{80, []string{"5854 bytes as one line of JSON", "Lambda", "Worker", "default_plan"}},
		// The Worker's secret, put from the file as docs/edge.md shows,
		// holds the file as it is: 5,158 bytes with 65 keys written over
		// lines, where the line (4,759) fits. check-config named the
		// Lambda alone, and wrangler secret put was refused.
		{65, []string{"4759 bytes as one line of JSON", "Lambda", "5158 bytes as it is", "Worker's variable", "secret put"}},
	} {
		path := write(tt.keys)
		var out, errs bytes.Buffer
		if err := run(context.Background(), []string{"check-config", path}, &out, &errs); err != nil {
			t.Fatalf("%d keys: %v", tt.keys, err)
		}
		if want := fmt.Sprintf("%d API keys", tt.keys); !strings.Contains(out.String(), ": ok: ") || !strings.Contains(out.String(), want) {
			t.Errorf("%d keys: output %q, want ok and %q", tt.keys, out.String(), want)
		}
		if tt.want == nil {
			if errs.Len() != 0 {
				t.Errorf("%d keys: stderr %q, want nothing", tt.keys, errs.String())
			}
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(errs.String(), w) {
				t.Errorf("%d keys: stderr %q, want %q in it", tt.keys, errs.String(), w)
			}
		}
		if tt.keys < 65 && strings.Contains(errs.String(), "Worker") {
			t.Errorf("%d keys: stderr %q names the Worker, whose variable holds it", tt.keys, errs.String())
		}
	}
}
