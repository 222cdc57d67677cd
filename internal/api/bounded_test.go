package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
)

// hostileBody is a body of n distinct three-letter attributes, each given
// times times, none of which the endpoint takes.
func hostileBody(n, times int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b strings.Builder
	b.WriteByte('{')
	for range times {
		for i := range n {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			for j, v := 0, i; j < 3; j, v = j+1, v/len(alphabet) {
				b.WriteByte(alphabet[v%len(alphabet)])
			}
			b.WriteString(`":0`)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// hostileQuery is a query string of about size bytes of distinct unknown
// parameters.
func hostileQuery(size int) (string, int) {
	var b strings.Builder
	n := 0
	for b.Len() < size {
		if n > 0 {
			b.WriteByte('&')
		}
		fmt.Fprintf(&b, "p%d=1", n)
		n++
	}
	return b.String(), n
}

// maxErrorResponse is docs/api.md's bound on any error response.
const maxErrorResponse = 16 << 10

// wantBounded checks an error answer against docs/api.md's bounds: at
// most 20 entries in errors, at most 16 KiB, and a message that tells how
// many problems there were in all (say).
func wantBounded(t *testing.T, r *response, code domain.Code, say string) {
	t.Helper()
	if n := r.Body.Len(); n > maxErrorResponse {
		t.Fatalf("error response of %d bytes, over %d", n, maxErrorResponse)
	}
	if r.Code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", r.Code)
	}
	e, _ := r.body["error"].(map[string]any)
	if e["code"] != string(code) {
		t.Fatalf("code %v, want %s", e["code"], code)
	}
	list, _ := e["errors"].([]any)
	if len(list) != maxFieldErrors {
		t.Fatalf("%d errors entries, want %d", len(list), maxFieldErrors)
	}
	for _, it := range list {
		if it.(map[string]any)["code"] != string(code) {
			t.Fatalf("entry %v: not %s", it, code)
		}
	}
	if !strings.Contains(r.message(), say) {
		t.Fatalf("message %q does not say %q", r.message(), say)
	}
}

func TestErrorListBounded(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)

	const attrs = 128_000
	body := hostileBody(attrs, 1)
	if len(body) > MaxBodyBytes {
		t.Fatalf("body of %d bytes is over the limit", len(body))
	}
	// 128,000 unknown attributes and the missing name.
	wantBounded(t, f.send("POST", "/v1/ai-agents", key, body), domain.CodeInvalidField, "and 128000 more problems")

	q, n := hostileQuery(40_000)
	wantBounded(t, f.get("/v1/me?"+q, key), domain.CodeInvalidField, fmt.Sprintf("and %d more problems", n-1))

	// Attributes given twice: the same bounds.
	wantBounded(t, f.send("POST", "/v1/ai-agents", key, hostileBody(60_000, 2)), domain.CodeInvalidJSON, "60000 attributes appear more than once")

	// Long names are cut short in field and message, so that 20 entries
	// of the worst escaping still fit.
	long := strings.Repeat("%01%E2%80%A8%F4%8F%BF%BF", 1000)
	var lq []string
	for i := range 30 {
		lq = append(lq, fmt.Sprintf("%s%d=1", long, i))
	}
	wantBounded(t, f.get("/v1/me?"+strings.Join(lq, "&"), key), domain.CodeInvalidField, "and 29 more problems")
	var lb []string
	for i := range 30 {
		lb = append(lb, fmt.Sprintf(`"%s%d":1`, strings.Repeat(`\u0001\u2028\uDBFF\uDFFF`, 400), i))
	}
	wantBounded(t, f.send("POST", "/v1/ai-agents", key, "{"+strings.Join(lb, ",")+`,"name":"x"}`), domain.CodeInvalidField, "and 29 more problems")
	for i := range lb {
		lb[i] += "," + lb[i]
	}
	wantBounded(t, f.send("POST", "/v1/ai-agents", key, "{"+strings.Join(lb, ",")+`}`), domain.CodeInvalidJSON, "30 attributes appear more than once")
}

// TestHostileBodiesMemory: what a hostile body costs is bounded by the
// body, not by the number of problems in it. 1 MiB of 128,000 unknown
// attributes used to cost 157 MiB of allocation and a 12 MB answer per
// request; 100 in flight from one key took a server to 6.6 GB.
func TestHostileBodiesMemory(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1_000_000 }, allAgentScopes...).Credential
	// The handler alone, without the fixture's OpenAPI checks.
	h := mustNew(t, Config{Store: f.st, Limiter: ratelimit.NewMemory(nil), UnauthLimiter: ratelimit.NewMemory(nil),
		Toucher: f.toucher, Log: slog.New(slog.DiscardHandler), CursorKey: []byte("cursor key")})
	body := hostileBody(128_000, 1)
	send := func() int {
		r := httptest.NewRequest("POST", "/v1/ai-agents", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest {
			t.Errorf("status %d", w.Code)
		}
		return w.Body.Len()
	}
	send() // warm: key cache, pools

	const inFlight = 16
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	var largest atomic.Int64
	for range inFlight {
		wg.Go(func() {
			n := int64(send())
			for {
				if m := largest.Load(); n <= m || largest.CompareAndSwap(m, n) {
					return
				}
			}
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / inFlight
	t.Logf("%d hostile requests in flight: %.1f MiB allocated per request (body %.1f MiB), answers of at most %d bytes",
		inFlight, float64(perRequest)/(1<<20), float64(len(body))/(1<<20), largest.Load())
	if largest.Load() > maxErrorResponse {
		t.Errorf("an answer of %d bytes", largest.Load())
	}
	// The body's bytes (read into a buffer that doubles from 64 KiB as
	// they arrive, since a declared length is trusted only that far:
	// about twice them), a string of them, and 16 bytes a member to find
	// names given twice: about 5 MiB. Nothing may be spent per problem.
	if limit := uint64(6 * MaxBodyBytes); perRequest > limit {
		t.Errorf("%d bytes allocated per request, over %d", perRequest, limit)
	}
}
