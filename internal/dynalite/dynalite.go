package dynalite

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testenv"
)

// guard runs dynalite's cli.js (process.argv[1]) so that an uncaught
// exception is printed instead of ending the process: dynalite 4.0.0 throws
// from a request's 'error' event (index.js, httpHandler), so a client that
// gives up on a request it has not finished reading (a context deadline)
// would otherwise kill the server.
const guard = `process.on('uncaughtException', function (err) {
  console.error('[harness] dynalite: uncaught exception: ' + (err && (err.code || err.message)))
})
require(process.argv[1])`

// logMax bounds the server output kept for failure reports.
const logMax = 64 << 10

// readyTimeout bounds how long a start waits for the listening line.
const readyTimeout = 15 * time.Second

// Errors returned by Find and Start.
var (
	ErrNotFound = errors.New("dynalite: node_modules/.bin/dynalite not found (run npm ci)")
	ErrRunning  = errors.New("dynalite: server already running")
	ErrStopped  = errors.New("dynalite: server not running")
)

// Find returns the path of the repository's pinned dynalite
// (node_modules/.bin/dynalite at the module root).
func Find() (string, error) {
	p, err := testenv.Bin("dynalite")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return p, nil
}

// Server is one dynalite process. Its methods are safe for concurrent use.
type Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:PORT". It stays
	// the same across Stop and Restart.
	Endpoint string

	bin  string
	port int
	dir  string // LevelDB data directory

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited

	out testenv.Buffer // what the server processes printed, for failure reports
}

// Start finds dynalite, starts it on a free 127.0.0.1 port with its data in
// dir and waits until it listens. An empty dir keeps the data in memory,
// which is faster but lost on Stop. A port taken between choosing and
// binding is retried with another one.
func Start(dir string) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		port, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), bin: bin, port: port, dir: dir, out: testenv.Buffer{Max: logMax}}
		err = s.Restart()
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			return nil, err
		}
	}
}

// Restart starts the server again on its port and data directory after Stop
// and waits until it listens.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return ErrRunning
	}
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}
	if s.dir != "" {
		args = append(args, "--path", s.dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("%w: node: %v", ErrNotFound, err)
	}
	cli, err := filepath.EvalSymlinks(s.bin)
	if err != nil {
		return fmt.Errorf("dynalite: %w", err)
	}
	cmd := exec.Command(node, append([]string{"-e", guard, cli}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("dynalite: stdout: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&limitedWriter{w: &stderr, n: 4096}, &s.out)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dynalite: start %s: %w", s.bin, err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			_, _ = s.out.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.HasPrefix(sc.Text(), "Dynalite listening at") {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(&s.out, out)
	}()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(&s.out, "[dynalite pid %d exited: %v]\n", cmd.Process.Pid, err)
		exited <- err
		close(done)
	}()
	select {
	case <-ready:
		s.cmd, s.done = cmd, done
		return nil
	case err := <-exited:
		return fmt.Errorf("dynalite: exited before listening on %s: %v: %s", s.Endpoint, err, strings.TrimSpace(stderr.String()))
	case <-time.After(readyTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("dynalite: not listening on %s after %s", s.Endpoint, readyTimeout)
	}
}

// Stop kills the server and waits for it to exit. Data written before Stop
// is kept in the data directory for Restart.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return ErrStopped
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
	return nil
}

// Output returns the last 64 KB the server's processes printed, and how
// each one ended: for the log of a failed test.
func (s *Server) Output() string { return s.out.String() }

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

// Run starts a server for t in a temporary directory and stops it when t
// ends. When dynalite is missing, t fails if CI is "true" and is skipped
// otherwise.
func Run(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		fatalOrSkip(t, err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func fatalOrSkip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotFound) {
		testenv.Require(t, err) // fails under CI=true, skips elsewhere
	}
	t.Fatal(err)
}

// shared is the server of Shared, one per test binary.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns one server for the whole test binary, started on first use,
// with its data in memory.
// Call StopShared from TestMain after m.Run. When dynalite is missing, t
// fails if CI is "true" and is skipped otherwise.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		shared.srv, shared.err = Start("") // in memory: nothing restarts it
	})
	if shared.err != nil {
		fatalOrSkip(t, shared.err)
	}
	return shared.srv
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	if shared.srv != nil {
		_ = shared.srv.Stop()
	}
}
