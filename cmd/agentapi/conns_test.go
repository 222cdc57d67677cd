package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeBoundsOpenConnections runs the built binary with --max-conns 2:
// two connections in the middle of a request (headers sent, the body
// still coming) are held; a third is not served while they stay open
// (none is idle or still sending its headers to give way), is served as
// soon as one closes, and the wait is logged.
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
	// Two connections past their headers with their bodies still owed:
	// each is answered 401 (no key) and logged, and stays in progress. The
	// health check's connection may still count for a moment after the
	// client closed it, and serve then closes a connection still sending
	// its headers; so each held one is dialled until serve has read it.
	var held []net.Conn
	for len(held) < 2 {
		held = append(held, holdConn(t, s, addr, len(held)+1))
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

// holdConn dials addr and sends a request's headers and the first byte of
// its body, until serve has logged n such requests (this one read), at
// most 5 tries.
func holdConn(t *testing.T, s *server, addr string, n int) net.Conn {
	t.Helper()
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("POST /v1/ai-agents HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if strings.Count(s.stderr.String(), `"method":"POST"`) >= n {
				t.Cleanup(func() { c.Close() })
				return c
			}
		}
		c.Close()
	}
	t.Fatalf("serve never read held connection %d:\n%s", n, s.stderr.String())
	return nil
}

// TestIdleConnectionsGiveWay: 4,096 idle keep-alive connections from one
// address (the default --max-conns) keep no one else waiting. At the
// default --max-conns-per-addr that address holds 256 and the rest are
// closed, so a client from another address is served at once; with no
// per-address bound, serve closes the connection idle longest for a new
// one, so even a client from the same address is (it waited 19.8 s).
func TestIdleConnectionsGiveWay(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		from  string
	}{
		{"another address", nil, "127.0.0.2"},
		{"the same address", []string{"--max-conns-per-addr", "100000"}, "127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, nil, append([]string{"--db", filepath.Join(t.TempDir(), "idle.db")}, c.flags...)...)
			addr := strings.TrimPrefix(s.base, "http://")
			served := holdIdle(t, addr, defaultMaxConns)
			start := time.Now()
			code, err := getFrom(c.from, s.base+"/healthz")
			if err != nil || code != 200 || time.Since(start) > 3*time.Second {
				t.Fatalf("a new client from %s: %d, %v after %v (%d idle connections served)", c.from, code, err, time.Since(start), served)
			}
			if c.flags == nil && served != defaultMaxConnsPerAddr {
				t.Fatalf("one address was served %d connections, want %d", served, defaultMaxConnsPerAddr)
			}
		})
	}
}

// holdIdle opens n connections to addr from 127.0.0.1, asks GET /healthz
// on each and leaves the ones that answered open and idle; it returns how
// many answered.
func holdIdle(t *testing.T, addr string, n int) int {
	var mu sync.Mutex
	served := 0
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode == 200 {
				resp.Body.Close()
				mu.Lock()
				served++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return served
}

// getFrom GETs url on a new connection from the local address from.
func getFrom(from, url string) (int, error) {
	return getWithin(from, url, 30*time.Second)
}

// getWithin is getFrom giving up after timeout.
func getWithin(from, url string, timeout time.Duration) (int, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
