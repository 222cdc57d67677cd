package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowClientsCannotHoldTheServer opens slow-loris connections (headers
// dribbled, body never finished, idle keep-alive) against the API server's
// real configuration with its timeouts shortened, and checks each is cut
// while ordinary requests keep being served.
func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	srv := newHTTPServer(context.Background(), h, slog.New(slog.DiscardHandler))
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = 300*time.Millisecond, 600*time.Millisecond, time.Second, 500*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	addr := ln.Addr().String()

	closedWithin := func(name string, c net.Conn, d time.Duration) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(d))
		start := time.Now()
		_, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: connection still open after %v", name, time.Since(start))
		}
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Headers dribbled one byte at a time, never finished.
	loris := dial()
	go func() {
		for _, b := range []byte("GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
			if _, err := loris.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// A body promised and never sent.
	body := dial()
	_, _ = io.WriteString(body, "POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	// A keep-alive connection left idle after one request.
	idle := dial()
	_, _ = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request on the idle connection: %v", err)
	}

	// Meanwhile ordinary clients are served.
	for range 5 {
		resp, err := http.Post("http://"+addr+"/v1/ai-agents", "application/json", strings.NewReader(`{"name":"x"}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("ordinary request while slow clients wait: %v", err)
		}
		resp.Body.Close()
	}
	closedWithin("dribbled headers", loris, 3*time.Second)
	closedWithin("unfinished body", body, 3*time.Second)
	closedWithin("idle keep-alive", idle, 3*time.Second)
}
