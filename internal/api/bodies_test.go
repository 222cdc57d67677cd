package api

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/secretscan/secretscantest"
)

// readCounter counts the requests whose body has been read from at least
// once: readBody sizes its buffer before its first Read.
type readCounter struct {
	once *sync.Once
	n    *atomic.Int64
	io.ReadCloser
}

func (c readCounter) Read(p []byte) (int, error) {
	c.once.Do(func() { c.n.Add(1) })
	return c.ReadCloser.Read(p)
}

// TestDeclaredLengthBounded: bodies declared near 1 MiB whose bytes do not
// come hold only what they have sent (bodybudget.FirstStep before any
// byte), not what they declare: 60 such connections all read, none is
// refused, and the heap grows by their connections' state. 1,000
// connections sending only the headers of POST /v1/ai-agents with
// Content-Length: 1048000 once took a server's heap from 66 MB to
// 1,068 MB, each held until the read time-out; then each reserved its
// declared length, and 8 filled an 8 MiB budget.
func TestDeclaredLengthBounded(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1_000_000 }, allAgentScopes...).Credential
	const (
		conns    = 60
		declared = 1_048_000
		budget   = 8 << 20
	)
	// The handler alone, without the fixture's OpenAPI checks (which keep
	// a copy of the body).
	h := mustNew(t, Config{Store: f.st, Limiter: ratelimit.NewMemory(nil), UnauthLimiter: ratelimit.NewMemory(nil),
		Toucher: f.toucher, Log: slog.New(slog.DiscardHandler), CursorKey: []byte("cursor key"), MaxBodyMemory: budget})
	var reading, active atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		r.Body = readCounter{new(sync.Once), &reading, r.Body}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	if status, _, body := sendRaw(t, addr, "POST /v1/ai-agents HTTP/1.1\r\nAuthorization: Bearer "+key+
		"\r\nContent-Type: application/json", `{"name":"warm"}`); status != http.StatusCreated {
		t.Fatalf("warm-up: %d %s", status, body) // and the key is in the cache
	}
	open := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
		for deadline := time.Now().Add(20 * time.Second); active.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		head := "POST /v1/ai-agents HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json" + fmt.Sprintf("\r\nIdempotency-Key: k-%d\r\nContent-Length: %d\r\n\r\n", i, declared)
		if _, err := io.WriteString(c, head+`{"na`); err != nil {
			t.Fatal(err)
		}
	}
	// Every one is reading, holding its first step; none is refused.
	for deadline := time.Now().Add(20 * time.Second); reading.Load() < conns+1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d requests declaring %d bytes, 4 sent, budget %d MiB: %d reading, heap in use grew %.1f MiB",
		conns, declared, budget>>20, reading.Load(), float64(grew)/(1<<20))
	if reading.Load() != conns+1 { // and the warm-up
		t.Errorf("%d requests reading, want all %d and the warm-up", reading.Load(), conns)
	}
	// A first step and a connection's own state (about 80 KiB each).
	if limit := int64(conns * (bodybudget.FirstStep + 128<<10)); grew > limit {
		t.Errorf("heap in use grew %d bytes, over %d", grew, limit)
	}
}

// TestDeclaredLengthOverLimit: a body declared larger than the limit is
// refused with 413 at once, before any of it is read, not answered 400
// when the read times out.
func TestDeclaredLengthOverLimit(t *testing.T) {
	scanKeys := withScanKeys(t, filepath.Join(t.TempDir(), "keys.json"), secretscantest.NewSigner(t, "gh"))
	f := newFixture(t, "sqlite", scanKeys)
	key := f.key(allAgentScopes...)
	id := f.createAgent(key, "Support bot")
	// Through the OpenAPI check, which wraps the body in place, and the
	// handler alone, as serve runs it.
	cfg := Config{Store: f.st, Limiter: ratelimit.NewMemory(nil), UnauthLimiter: ratelimit.NewMemory(nil),
		Toucher: f.toucher, Log: slog.New(slog.DiscardHandler), CursorKey: []byte("cursor key")}
	scanKeys(&cfg)
	for _, stack := range []struct {
		name string
		h    http.Handler
	}{{"checked", f.h}, {"bare", mustNew(t, cfg)}} {
		t.Run(stack.name, func(t *testing.T) { wantRefusedAtOnce(t, stack.name, stack.h, key, id) })
	}
}

func wantRefusedAtOnce(t *testing.T, stack string, h http.Handler, key, id string) {
	srv := httptest.NewServer(h) // no read time-out: a read that waits waits for ever
	t.Cleanup(srv.Close)
	for _, tc := range []refusedAtOnceCase{
		{"create", "POST", "/v1/ai-agents", "", 99999999999999},
		{"just over", "POST", "/v1/ai-agents", "", MaxBodyBytes + 1},
		{"idempotency key", "POST", "/v1/ai-agents", "\r\nIdempotency-Key: big-1", 99999999999999},
		{"expect 100-continue", "POST", "/v1/ai-agents", "\r\nExpect: 100-continue", 99999999999999},
		{"update", "PATCH", "/v1/ai-agents/" + id, "", 99999999999999},
		{"enable", "PUT", "/v1/ai-agents/" + id + "/enabled", "", 99999999999999},
		{"ask", "POST", "/v1/ai-agents/" + id + "/questions", "\r\nIdempotency-Key: big-2", 99999999999999},
		// readSignedReport shares readBody; it sets no Connection: close,
		// so only the stack serve runs (net/http closes by itself).
		{"leak report", "POST", reportPath, "\r\n" + secretscan.HeaderKeyID + ": gh\r\n" + secretscan.HeaderSignature + ": x", 99999999999999},
	} {
		if tc.path == reportPath && stack != "bare" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { refusedAtOnceSend(t, srv.Listener.Addr().String(), key, tc) })
	}
}

// refusedAtOnceCase is one request of wantRefusedAtOnce: header is added
// after Content-Type, length is the declared Content-Length.
type refusedAtOnceCase struct {
	name, method, path, header string
	length                     int64
}

// refusedAtOnceSend sends tc's head (and "{}" unless it waits for 100
// Continue) and wants a 413 within 5 s, the connection closed.
func refusedAtOnceSend(t *testing.T, addr, key string, tc refusedAtOnceCase) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\nContent-Type: application/json%s\r\nContent-Length: %d\r\n\r\n",
		tc.method, tc.path, key, tc.header, tc.length)
	body := "{}"
	if strings.Contains(tc.header, "100-continue") {
		body = "" // a client that waits for 100 Continue sends nothing yet
	}
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within 5 s (%v): the body is waited for", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	rec := &response{ResponseRecorder: httptest.NewRecorder()}
	rec.Code = resp.StatusCode
	if err := jsonUnmarshal(string(b), &rec.body); err != nil {
		t.Fatalf("%d, body not JSON: %.300s", resp.StatusCode, b)
	}
	rec.wantError(t, http.StatusRequestEntityTooLarge, domain.CodeFileTooLarge)
	if !resp.Close {
		t.Error("the connection is kept open, with the body unread on it")
	}
	t.Logf("answered in %v", time.Since(start))
}

// TestSlowBodiesOfOneAccount: one account's slow 1 MiB bodies, from many
// connections, hold at most its share of the body budget (an eighth, at
// least 2 MiB: bodybudget.Share), so another account's PATCH is answered
// at once, not after a 2 s wait with 503. Before, each body reserved its
// declared Content-Length up front, and eight of them filled this 8 MiB
// budget.
func TestSlowBodiesOfOneAccount(t *testing.T) {
	f := newFixture(t, "sqlite")
	hog := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1_000_000 }, allAgentScopes...).Credential
	acct, owner := f.newAccount("Other")
	other := f.keyIn(acct, owner, nil, allAgentScopes...).Credential
	id := f.createAgent(other, "Support bot")
	const budget = 8 << 20
	h := mustNew(t, Config{Store: f.st, Limiter: ratelimit.NewMemory(nil), UnauthLimiter: ratelimit.NewMemory(nil),
		Toucher: f.toucher, Log: slog.New(slog.DiscardHandler), CursorKey: []byte("cursor key"), MaxBodyMemory: budget})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	// 12 connections of the hog each declare 1 MiB and send 300 KiB, then
	// stall, as a slow sender does.
	const conns = 12
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		head := fmt.Sprintf("POST /v1/ai-agents HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nIdempotency-Key: slow-%d\r\nContent-Length: %d\r\n\r\n", hog, i, MaxBodyBytes)
		go func() { _, _ = io.WriteString(c, head+`{"name":"`+strings.Repeat("x", 300<<10)) }()
	}
	time.Sleep(500 * time.Millisecond) // the slow bodies arrive and stall
	for i := range 5 {
		start := time.Now()
		status, _, body := sendRaw(t, addr, "PATCH /v1/ai-agents/"+id+" HTTP/1.1\r\nAuthorization: Bearer "+other+
			"\r\nContent-Type: application/json", fmt.Sprintf(`{"name":"Support bot %d"}`, i))
		took := time.Since(start)
		if status != http.StatusOK || took > time.Second {
			t.Fatalf("another account's PATCH beside the slow bodies: %d after %v: %.300s", status, took, body)
		}
	}
}
