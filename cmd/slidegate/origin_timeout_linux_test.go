package main

import (
	"fmt"
	"net"
	"syscall"
	"testing"
)

// blackHole returns the address of a listener whose queue of connections
// is full, so that the kernel drops new connection attempts without an
// answer: what a client sees of an origin host that is down behind a
// firewall that drops packets.
func blackHole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // a queue of one connection
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	c, err := net.Dial("tcp", addr) // fills the queue: never accepted
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return addr
}

// TestServeOriginUnreachableBounded: an origin host that does not answer
// connection attempts (down behind a firewall that drops them) gets the
// client a 504 once --origin-timeout has passed, as an origin that takes
// the request and does not answer does. The connection attempt had a
// bound of its own, 30 s (Go's default transport's), so with
// --origin-timeout 5s every request waited 30 s. The dial deadline
// (10 s) bounds the wait; no timing is asserted.
func TestServeOriginUnreachableBounded(t *testing.T) {
	base, _ := serveInProcess(t, "--config", operatorConfig(t, ""), "--origin", "http://"+blackHole(t), "--origin-timeout", "200ms")
	getTimedOut(t, base)
}
