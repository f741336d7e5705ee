//go:build unix

package dynalite

import (
	"fmt"
	"syscall"
)

// Pause freezes the server (SIGSTOP): it keeps its port, the kernel still
// accepts connections, but no request is answered until Resume. It plays a
// hung DynamoDB.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return ErrStopped
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("dynalite: %v: %w", sig, err)
	}
	return nil
}
