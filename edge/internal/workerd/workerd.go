//go:build !(js && wasm)

// Package workerd runs slidegate's Worker (and the baseline Worker) under
// `wrangler dev` for tests: it builds a Worker with the Makefile's commands,
// writes a test wrangler.toml, starts workerd on a free 127.0.0.1 port with
// its KV persisted to a temporary directory, and stops it afterwards.
//
// The tests that use it need the pinned wrangler (npm ci). Without it they
// fail when CI=true and skip otherwise (testenv.Require).
package workerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/slidegate/slidegate/internal/testenv"
)

// Errors of the harness.
var (
	ErrNotReady = errors.New("workerd: wrangler dev did not become ready")
	ErrNoSize   = errors.New("workerd: wrangler printed no upload size")
)

// Wrangler returns the path of the repository's pinned wrangler.
func Wrangler() (string, error) { return testenv.Bin("wrangler") }

// Build builds the Worker in package pkg (relative to root, "./edge") into
// dir/build with the commands of `make build-edge`: the syumai assets in Go
// mode, the Wasm build and, when pack is set, wasmpack's merge of the data
// segments. The stock baseline is built without pack, as syumai's
// template builds it.
func Build(ctx context.Context, root, pkg, dir string, pack bool) error {
	out := filepath.Join(dir, "build")
	wasm := filepath.Join(out, "app.wasm")
	steps := [][]string{
		{"go", "run", "github.com/syumai/workers/cmd/workers-assets-gen", "-mode=go", "-o", out},
		{"go", "build", "-trimpath", "-ldflags=-s -w", "-o", wasm, pkg},
	}
	if pack {
		steps = append(steps, []string{"go", "run", "./edge/cmd/wasmpack", wasm})
	}
	for i, args := range steps {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = root
		cmd.Env = os.Environ()
		if i == 1 {
			cmd.Env = append(cmd.Env, "GOOS=js", "GOARCH=wasm")
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("workerd: %s: %w\n%s", strings.Join(args, " "), err, b)
		}
	}
	return nil
}

// Config is a test wrangler.toml.
type Config struct {
	Name string            // Worker name
	Main string            // main module, relative to dir; "" means build/worker.mjs
	Vars map[string]string // [vars]
	KV   bool              // bind SLIDEGATE_KV
}

// Write writes c as dir/wrangler.toml.
func (c Config) Write(dir string) error {
	var b strings.Builder
	main := c.Main
	if main == "" {
		main = "build/worker.mjs"
	}
	fmt.Fprintf(&b, "name = %q\nmain = %q\ncompatibility_date = \"2026-04-01\"\n", c.Name, main)
	if c.KV {
		b.WriteString("\n[[kv_namespaces]]\nbinding = \"SLIDEGATE_KV\"\nid = \"test\"\n")
	}
	if len(c.Vars) > 0 {
		b.WriteString("\n[vars]\n")
		for k, v := range c.Vars {
			fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(v))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "wrangler.toml"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("workerd: %w", err)
	}
	return nil
}

// Worker is a running `wrangler dev`.
type Worker struct {
	URL     string // http://127.0.0.1:port
	Dir     string // the directory of its wrangler.toml and build/
	Persist string // its local KV state, beside Dir so that wrangler never sees it change
	cmd     *exec.Cmd
	log     *testenv.Buffer
	done    chan struct{}
	shared  bool // Persist is another Worker's: Stop leaves it
}

// Start runs `wrangler dev` in dir (which holds wrangler.toml and build/) on
// free 127.0.0.1 ports and waits, at most a minute, until GET readyPath
// answers.
//
// The ports are port 0, which workerd and wrangler's inspector bind as the
// kernel chooses, and the Worker's URL is the one wrangler prints once it
// listens. A port found free by the test and handed to wrangler was bound
// seconds later, after node and workerd had started, and on a busy machine
// something else took it in between now and then: wrangler exited with
// "Address already in use" and the test failed (once in twelve runs of
// TestWorkerdOriginRefusesUpload beside the other packages' tests).
func Start(wrangler, dir, readyPath string) (*Worker, error) {
	return StartSharing(wrangler, dir, readyPath, "")
}

// StartSharing is Start with the local KV state of another running Worker
// (its Persist; "" for a state of its own): two workerd processes, two
// isolates that see each other's KV writes at once, as two Cloudflare
// locations would once KV has propagated.
func StartSharing(wrangler, dir, readyPath, persist string) (*Worker, error) {
	shared := persist != ""
	if !shared {
		var err error
		if persist, err = os.MkdirTemp("", "slidegate-kv-"); err != nil {
			return nil, fmt.Errorf("workerd: %w", err)
		}
	}
	w := &Worker{
		Dir: dir, Persist: persist,
		log: &testenv.Buffer{Max: 1 << 20}, done: make(chan struct{}), shared: shared,
	}
	w.cmd = exec.Command(wrangler, "dev", "--ip", "127.0.0.1", "--port", "0",
		"--inspector-port", "0", "--persist-to", w.Persist, "--show-interactive-dev-session=false")
	w.cmd.Dir = dir
	w.cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CI=true")
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.cmd.Start(); err != nil {
		if !shared {
			os.RemoveAll(persist)
		}
		return nil, fmt.Errorf("workerd: start wrangler: %w", err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-w.done:
			return nil, fmt.Errorf("%w: it exited:\n%s", ErrNotReady, w.Log())
		default:
		}
		if w.URL == "" {
			if m := readyLine.FindStringSubmatch(w.Log()); m != nil {
				w.URL = m[1]
			}
		}
		// Until wrangler prints the port workerd listens on, there is
		// nothing to ask.
		if w.URL != "" {
			if res, err := client.Get(w.URL + readyPath); err == nil {
				res.Body.Close()
				if res.StatusCode < 500 {
					return w, nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.Stop()
	return nil, fmt.Errorf("%w within a minute:\n%s", ErrNotReady, w.Log())
}

// Stop ends wrangler and workerd (the whole process group), waits for them
// and removes the KV state, unless it is another Worker's.
func (w *Worker) Stop() {
	if w == nil || w.cmd.Process == nil {
		return
	}
	if !w.shared {
		defer os.RemoveAll(w.Persist)
	}
	pgid := w.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-w.done
	}
}

// Log returns what wrangler printed so far.
func (w *Worker) Log() string { return w.log.String() }

// KVList runs `wrangler kv key list --local` against the Worker's persisted
// KV and returns its JSON output.
func (w *Worker) KVList(ctx context.Context, wrangler, prefix string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, wrangler, "kv", "key", "list", "--local", "--binding", "SLIDEGATE_KV",
		"--persist-to", w.Persist, "--prefix", prefix)
	cmd.Dir = w.Dir
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CI=true")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("workerd: kv key list: %w\n%s", err, errOut.String())
	}
	return out.Bytes(), nil
}

// readyLine is wrangler's "[wrangler:info] Ready on http://127.0.0.1:40123",
// printed once workerd listens; its URL holds the port the kernel chose.
var readyLine = regexp.MustCompile(`Ready on (http://127\.0\.0\.1:[0-9]+)`)

// sizeLine is wrangler's "Total Upload: 6949.82 KiB / gzip: 1945.53 KiB".
var sizeLine = regexp.MustCompile(`Total Upload: ([0-9.]+) KiB / gzip: ([0-9.]+) KiB`)

// DryRun runs `wrangler deploy --dry-run --outdir outdir` in dir and returns
// the upload size and its gzip size as wrangler reports them, in bytes.
func DryRun(ctx context.Context, wrangler, dir, outdir string) (raw, gz int64, err error) {
	cmd := exec.CommandContext(ctx, wrangler, "deploy", "--dry-run", "--outdir", outdir)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CI=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("workerd: deploy --dry-run: %w\n%s", err, out)
	}
	m := sizeLine.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("%w:\n%s", ErrNoSize, out)
	}
	kib := func(b []byte) int64 { f, _ := strconv.ParseFloat(string(b), 64); return int64(f * 1024) }
	return kib(m[1]), kib(m[2]), nil
}

// CPU returns the CPU time (user and system) that the workerd processes of
// w have used so far, read from /proc (Linux): the cost of the Worker's
// requests, less sensitive to a busy machine than their latency.
func (w *Worker) CPU() (time.Duration, error) {
	pgrp := w.cmd.Process.Pid // Setpgid: the group is wrangler's pid
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	found := false
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // not a process, or gone
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split
		// after its closing parenthesis.
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if s[open+1:close] != "workerd" || len(f) < 13 || f[2] != strconv.Itoa(pgrp) {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
		found = true
	}
	if !found {
		return 0, fmt.Errorf("workerd: no workerd process in group %d", pgrp)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const clockTicks = 100
