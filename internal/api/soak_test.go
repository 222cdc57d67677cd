package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestSoak drives a real server with many keys and mixed endpoints for a
// bounded time (AGENTAPI_SOAK_SECONDS, default 8; the 60 s run is
// `AGENTAPI_SOAK_SECONDS=60 go test -run TestSoak ./internal/api/`).
// No error other than the designed 429s, exact admission per key, and no
// goroutine or heap growth across the run.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	secs := soakSeconds()
	// The fixture's clock stands still, so no admission ever leaves the
	// window and each key's accounting is exact over the whole run.
	// Its log lines are scanned for credentials as they are written and not
	// kept, so the heap measured below is the server's, not the log's.
	scan := &testenv.ScanningWriter{}
	f := newFixture(t, "sqlite", func(c *Config) { c.Log = slog.New(slog.NewJSONHandler(scan, nil)) })
	srv := httptest.NewServer(f.h)
	defer srv.Close()

	ks := soakKeys(f)
	seedKey := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 100000 }, allAgentScopes...).Credential
	var agentIDs []string
	for i := range 20 {
		r := f.send("POST", "/v1/ai-agents", seedKey, fmt.Sprintf(`{"name":"soak %d"}`, i))
		agentIDs = append(agentIDs, r.data()["id"].(string))
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	load := &soakLoad{client: client, url: srv.URL, ks: ks, agentIDs: agentIDs}

	load.run(t, time.Second) // warm up: pools, caches, connections
	client.CloseIdleConnections()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()
	total := load.run(t, time.Duration(secs)*time.Second)

	client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if g := runtime.NumGoroutine(); g > goroutinesBefore+5 {
		t.Errorf("goroutines grew from %d to %d", goroutinesBefore, g)
	}
	if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 4<<20 {
		t.Errorf("heap grew by %d MiB", grow>>20)
	}
	refused := soakWantExactAccounting(t, ks)
	lines, leaked := scan.Result()
	if leaked != "" {
		t.Errorf("a credential (prefix %s) reached the log", leaked)
	}
	if lines < total {
		t.Errorf("%d log lines for %d requests", lines, total)
	}
	t.Logf("%d requests in %d s, %d refused by design; heap %d → %d KiB, goroutines %d → %d",
		total, secs, refused, before.HeapAlloc>>10, after.HeapAlloc>>10, goroutinesBefore, runtime.NumGoroutine())
}

// soakSeconds is the run's length: AGENTAPI_SOAK_SECONDS, default 8.
func soakSeconds() int {
	secs := 8
	if v, err := strconv.Atoi(os.Getenv("AGENTAPI_SOAK_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	return secs
}

// soakNKeys is how many keys the soak spreads its requests over.
const soakNKeys = 40

// soakKey is one key of the soak with its ceiling and what it got.
type soakKey struct {
	cred  string
	limit int
	ok    atomic.Int64
	lim   atomic.Int64
}

// soakKeys creates the soak's keys.
func soakKeys(f *fixture) []*soakKey {
	ks := make([]*soakKey, soakNKeys)
	for i := range ks {
		// Odd keys run out within the run (their accounting must be exact);
		// even keys never do, so the run does real work, not only 429s.
		limit := 50 + i*10
		if i%2 == 0 {
			limit = 10_000_000
		}
		ks[i] = &soakKey{limit: limit, cred: f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = limit }, allAgentScopes...).Credential}
	}
	return ks
}

// soakLoad is the mixed traffic the soak sends.
type soakLoad struct {
	client   *http.Client
	url      string
	ks       []*soakKey
	agentIDs []string
	seq      atomic.Int64
}

// run sends requests from 16 workers for d and returns how many were sent.
func (l *soakLoad) run(t *testing.T, d time.Duration) (requests int64) {
	var wg sync.WaitGroup
	var n atomic.Int64
	deadline := time.Now().Add(d)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(t, w, deadline, &n)
		}()
	}
	wg.Wait()
	return n.Load()
}

// worker is one of run's workers: it stops at the deadline or at the first
// error or unexpected status.
func (l *soakLoad) worker(t *testing.T, w int, deadline time.Time, n *atomic.Int64) {
	for i := 0; time.Now().Before(deadline); i++ {
		kk := l.ks[(w*7+i)%soakNKeys]
		req := l.request(i)
		req.Header.Set("Authorization", "Bearer "+kk.cred)
		resp, err := l.client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		n.Add(1)
		switch resp.StatusCode {
		case 200, 201:
			kk.ok.Add(1)
		case 429:
			kk.lim.Add(1)
		default:
			t.Errorf("status %d for %s %s", resp.StatusCode, req.Method, req.URL.Path)
			return
		}
	}
}

// request is the i-th request of a worker, cycling through five endpoints.
func (l *soakLoad) request(i int) *http.Request {
	var req *http.Request
	switch i % 5 {
	case 0:
		req, _ = http.NewRequest("GET", l.url+"/v1/me", nil)
	case 1:
		req, _ = http.NewRequest("GET", l.url+"/v1/ai-agents?limit=10", nil)
	case 2:
		req, _ = http.NewRequest("GET", l.url+"/v1/ai-agents/"+l.agentIDs[i%len(l.agentIDs)], nil)
	case 3:
		req, _ = http.NewRequest("PUT", l.url+"/v1/ai-agents/"+l.agentIDs[i%len(l.agentIDs)]+"/enabled", strings.NewReader(`{"enabled":true}`))
		req.Header.Set("Content-Type", "application/json")
	case 4:
		req, _ = http.NewRequest("POST", l.url+"/v1/ai-agents", strings.NewReader(fmt.Sprintf(`{"name":"w%d"}`, l.seq.Add(1))))
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// soakWantExactAccounting checks each key's admissions against its ceiling
// and returns how many requests were refused in all.
func soakWantExactAccounting(t *testing.T, ks []*soakKey) int64 {
	t.Helper()
	// Exact accounting: a key that was ever refused was admitted exactly
	// its ceiling; one never refused, at most its ceiling.
	var refused int64
	for i, kk := range ks {
		refused += kk.lim.Load()
		if ok := kk.ok.Load(); (kk.lim.Load() > 0 && ok != int64(kk.limit)) || ok > int64(kk.limit) {
			t.Errorf("key %d (ceiling %d): admitted %d, refused %d", i, kk.limit, ok, kk.lim.Load())
		}
	}
	return refused
}
