package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeBoundsOpenConnections runs the built binary with --max-conns 2:
// two keep-alive connections are served and held; a third is not served
// while they stay open (it waits in the kernel's queue, costing serve
// nothing), is served as soon as one closes, and the wait is logged.
func TestServeBoundsOpenConnections(t *testing.T) {
	s := startServer(t, nil, "--db", filepath.Join(t.TempDir(), "conns.db"), "--max-conns", "2")
	http.DefaultClient.CloseIdleConnections() // startServer's health check
	addr := strings.TrimPrefix(s.base, "http://")
	get := func(c net.Conn) *bufio.Reader {
		t.Helper()
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		return bufio.NewReader(c)
	}
	status := func(r *bufio.Reader, c net.Conn, within time.Duration) (string, error) {
		_ = c.SetReadDeadline(time.Now().Add(within))
		line, err := r.ReadString('\n')
		return strings.TrimSpace(line), err
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := get(c)
		if line, err := status(r, c, 10*time.Second); err != nil || line != "HTTP/1.1 200 OK" {
			t.Fatalf("a connection within the bound: %q, %v", line, err)
		}
		held = append(held, c)
	}

	third, err := net.Dial("tcp", addr) // the kernel accepts it; serve does not yet
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	r := get(third)
	if line, err := status(r, third, 500*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection past --max-conns 2 was served: %q, %v", line, err)
	}
	held[0].Close()
	if line, err := status(r, third, 10*time.Second); err != nil || line != "HTTP/1.1 200 OK" {
		t.Fatalf("the waiting connection once one closed: %q, %v", line, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s.stderr.String(), "connection limit reached") {
		if time.Now().After(deadline) {
			t.Fatalf("the wait was not logged:\n%s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
