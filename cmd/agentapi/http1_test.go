package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRequestsGoAnswersFirst drives serve's real listener with raw request
// bytes. A request with both Content-Length and chunked Transfer-Encoding
// (a smuggling attempt) is answered by the API and its connection closed,
// so a second request hidden behind it is never read. The requests Go's
// server answers before the API ever sees them are pinned here as the
// README lists them: if Go changes, so must the README.
func TestRequestsGoAnswersFirst(t *testing.T) {
	db := filepath.Join(t.TempDir(), "http1.db")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--db", db}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	}()
	defer func() {
		cancel()
		waitExit(t, done, errb.String)
	}()
	waitReady(t, "http://"+addr, errb.String)

	exchange := func(raw string) []*http.Response {
		t.Helper()
		return goAnswersFirstExchange(t, addr, raw)
	}
	const second = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

	// Content-Length beside chunked: the API answers (its envelope and
	// request id), then the connection closes; the smuggled request is not
	// served.
	got := exchange("POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + second)
	if len(got) != 1 || got[0].StatusCode != http.StatusUnauthorized || got[0].Header.Get("X-Request-Id") == "" || !got[0].Close {
		t.Fatalf("Content-Length and chunked: %d responses, want one 401 from the API that closes: %+v", len(got), got)
	}
	// Content-Length alone keeps the connection for the next request.
	got = exchange("POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" + second)
	if len(got) != 2 || got[1].StatusCode != http.StatusOK {
		t.Fatalf("Content-Length alone: %d responses, want 2", len(got))
	}

	// What Go answers before the API: plain text, no request id, closed.
	for _, c := range []struct {
		name, raw string
		status    int
	}{
		{"transfer coding other than chunked", "POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}", http.StatusNotImplemented},
		{"gzip transfer coding", "POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", http.StatusNotImplemented},
		{"chunked twice", "POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", http.StatusNotImplemented},
		{"HTTP/2.0 request line", "GET /v1/me HTTP/2.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"HTTP/3.0 request line", "GET /v1/me HTTP/3.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"HTTP/0.9 request line", "GET /v1/me HTTP/0.9\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		{"expectation other than 100-continue", "GET /v1/me HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", http.StatusExpectationFailed},
		{"header line without a colon", "GET /v1/me HTTP/1.1\r\nHost: x\r\nnonsense\r\n\r\n", http.StatusBadRequest},
		{"Content-Length not a number", "POST /v1/ai-agents HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", http.StatusBadRequest},
		{"headers over 16 KiB", "GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 24<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
	} {
		goAnswersFirstCheckPlain(t, c.name, exchange(c.raw+second), c.status)
	}
}

// goAnswersFirstExchange sends raw on a new connection to addr and reads
// every response until the server closes it.
func goAnswersFirstExchange(t *testing.T, addr, raw string) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(c)
	var got []*http.Response
	for {
		resp, err := http.ReadResponse(rd, nil)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return got // closed by the server
		}
		if err != nil {
			t.Fatalf("%q: after %d responses: %v (connection left open?)", raw, len(got), err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got = append(got, resp)
	}
}

// goAnswersFirstCheckPlain: got is one response with status from Go
// itself: no request id, not the API's JSON.
func goAnswersFirstCheckPlain(t *testing.T, name string, got []*http.Response, status int) {
	t.Helper()
	if len(got) != 1 || got[0].StatusCode != status || got[0].Header.Get("X-Request-Id") != "" ||
		strings.HasPrefix(got[0].Header.Get("Content-Type"), "application/json") {
		t.Errorf("%s: %d responses %+v, want Go's plain %d and the connection closed", name, len(got), got, status)
	}
}
