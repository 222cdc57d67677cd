package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
)

// BenchmarkMeBody is GET /me's body through encoding/json of its
// keyObject (timestamps formatted into strings first) and written from the
// key (appendMeBody): what justifies the hand-written encoder.
func BenchmarkMeBody(b *testing.B) {
	exp := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	k := domain.APIKey{ID: "key_01JDZ9X3N4W7Q8R2T5Y6U1I0OP", Name: "CI deploys", Description: "Used by the nightly job",
		Prefix: "agk_live_abcd1234", Scopes: []domain.Scope{domain.ScopeAgentsRead, domain.ScopeAgentsWrite},
		RateLimitPerMinute: 600, ExpiresAt: &exp}
	now := time.Now().UTC()
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(single{Data: meObject(k, now)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendMeBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := getAppendBuf()
			*buf = appendMeBody(*buf, &k, now)
			putAppendBuf(buf)
		}
	})
}

// BenchmarkRateHeaders is the five rate-limit fields every /v1 response
// carries, as setRateHeaders built them before (Set, concatenation) and
// now (one string, one array).
func BenchmarkRateHeaders(b *testing.B) {
	now := time.Now()
	res := ratelimit.Result{Allowed: true, Limit: 600, Remaining: 417, Reset: now.Add(37 * time.Second)}
	for _, c := range []struct {
		name string
		set  func(http.Header, ratelimit.Result, time.Time, string)
	}{{"before", setRateHeadersSimply}, {"after", setRateHeaders}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := make(http.Header, 8)
				c.set(h, res, now, "per-key")
			}
		})
	}
}

// BenchmarkJSONHeaders is a JSON body's two fields, formatted and
// allocated per response as before, and shared (setJSONHeaders).
func BenchmarkJSONHeaders(b *testing.B) {
	const n = 353 // a GET /me body
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := make(http.Header, 8)
			h["Content-Type"] = []string{"application/json"}
			h["Content-Length"] = []string{strconv.Itoa(n)}
		}
	})
	b.Run("after", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := make(http.Header, 8)
			setJSONHeaders(h, n)
		}
	})
}
