package dynalite

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func dial(endpoint string) error {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(endpoint, "http://"), time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func TestStopRestart(t *testing.T) {
	s := Run(t)
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("Endpoint = %q, want http://127.0.0.1:PORT", s.Endpoint)
	}
	if err := dial(s.Endpoint); err != nil {
		t.Fatalf("dial running server: %v", err)
	}
	if err := s.Restart(); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart while running = %v, want ErrRunning", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := dial(s.Endpoint); err == nil {
		t.Fatal("dial stopped server succeeded")
	}
	if err := s.Stop(); !errors.Is(err, ErrStopped) {
		t.Fatalf("second Stop = %v, want ErrStopped", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := dial(s.Endpoint); err != nil {
		t.Fatalf("dial restarted server: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	s := Run(t)
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Pause(); !errors.Is(err, ErrStopped) {
		t.Fatalf("Pause after Stop = %v, want ErrStopped", err)
	}
}

func TestFindMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Find(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Find outside the module = %v, want ErrNotFound", err)
	}
}

func TestShared(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("Shared returned two servers")
	}
	if err := dial(a.Endpoint); err != nil {
		t.Fatalf("dial shared server: %v", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}
