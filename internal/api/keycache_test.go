package api

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/wire"
)

// sharedStores opens the fixture's store and a second store on the same
// database: what another process (the CLI) or another instance holds.
func sharedStores(t *testing.T, engine string) (served, other *store.Store) {
	return storetest.OpenTwo(t, engine)
}

// newCountedFixture is newFixture with its Authenticator, whose key cache
// counts its work.
func newCountedFixture(t *testing.T, engine string) (*fixture, *keys.Authenticator) {
	st := storetest.Open(t, engine)
	var authn *keys.Authenticator
	f := newFixtureOn(t, st, func(c *Config) {
		var err error
		if authn, err = keys.NewAuthenticator(keys.AuthConfig{Store: st, Limiter: c.Limiter}); err != nil {
			t.Fatal(err)
		}
		c.Authenticator = authn
	})
	return f, authn
}

// TestKeysAreNotReadPerRequest fails if the request path stops using the
// key cache: many requests with one key read it from the database once.
func TestKeysAreNotReadPerRequest(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f, authn := newCountedFixture(t, engine)
		key := f.key(allAgentScopes...)
		f.get("/v1/me", key).wantStatus(t, 200)
		before := authn.CacheStats()
		for range 30 {
			f.get("/v1/me", key).wantStatus(t, 200)
			f.get("/v1/ai-agents", key).wantStatus(t, 200)
		}
		after := authn.CacheStats()
		if reads := after.Misses - before.Misses; reads != 0 {
			t.Fatalf("60 requests with a known key read it %d times from the database, want 0", reads)
		}
		if hits := after.Hits - before.Hits; hits != 60 {
			t.Fatalf("%d lookups answered from memory, want 60", hits)
		}
	})
}

// TestKeyChangesByAnotherProcessApplyOnTheNextRequest: revocation, a
// rate-limit change and account (de)activation made through another store
// on the same database (the CLI in another process on SQLite, another
// instance on PostgreSQL) apply to the very next request, although the key
// is held in memory; and expiry follows the clock with the key held.
func TestKeyChangesByAnotherProcessApplyOnTheNextRequest(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		served, other := sharedStores(t, engine)
		f := newFixtureOn(t, served)
		ctx := context.Background()
		cli := keys.New(other, f.clock.Now)
		c := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		warm := func() {
			t.Helper()
			for range 3 {
				f.get("/v1/me", c.Credential).wantStatus(t, 200)
			}
		}
		warm()

		if err := cli.SetRateLimit(ctx, c.Key.ID, 77); err != nil {
			t.Fatal(err)
		}
		r := f.get("/v1/me", c.Credential)
		r.wantStatus(t, 200)
		if got := r.Header().Get("X-RateLimit-Limit"); got != "77" {
			t.Fatalf("after set-rate-limit elsewhere: X-RateLimit-Limit %q, want 77", got)
		}
		if got := r.data()["rate_limit_per_minute"]; got != float64(77) {
			t.Fatalf("after set-rate-limit elsewhere: rate_limit_per_minute %v", got)
		}

		warm()
		if err := other.SetAccountActive(ctx, f.account.ID, false); err != nil {
			t.Fatal(err)
		}
		f.get("/v1/me", c.Credential).wantError(t, 401, domain.CodeInvalidCredentials)
		if err := other.SetAccountActive(ctx, f.account.ID, true); err != nil {
			t.Fatal(err)
		}
		warm()

		if err := cli.Revoke(ctx, keys.Actor{User: &f.owner}, f.account.ID, c.Key.ID); err != nil {
			t.Fatal(err)
		}
		f.get("/v1/me", c.Credential).wantError(t, 401, domain.CodeInvalidCredentials)

		exp := f.clock.Now().Add(time.Minute)
		e := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.ExpiresAt = &exp }, allAgentScopes...)
		for range 3 {
			f.get("/v1/me", e.Credential).wantStatus(t, 200)
		}
		f.clock.Advance(time.Minute)
		f.get("/v1/me", e.Credential).wantError(t, 401, domain.CodeInvalidCredentials)
	})
}

// TestMeShowsThisRequestsTimeWithTheKeyHeld: last_used_at is the current
// request's time, not the time the key was read into memory.
func TestMeShowsThisRequestsTimeWithTheKeyHeld(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(domain.ScopeAgentsRead)
	for i := range 3 {
		r := f.get("/v1/me", key)
		r.wantStatus(t, 200)
		want := f.clock.Now().UTC().Format(wire.TimeFormat)
		if got := r.data()["last_used_at"]; got != want {
			t.Fatalf("request %d: last_used_at %v, want %s", i, got, want)
		}
		f.clock.Advance(1500 * time.Millisecond)
	}
}

// TestRequestLogLine pins the request log line's fields and types, and
// that neither the query string nor a credential reaches it.
func TestRequestLogLine(t *testing.T) {
	f := newFixture(t, "sqlite")
	c := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	r := f.get("/v1/ai-agents?limit=5", c.Credential)
	r.wantStatus(t, 200)
	var line map[string]any
	for _, l := range strings.Split(f.logs.String(), "\n") {
		var m map[string]any
		if jsonUnmarshal(l, &m) == nil && m["msg"] == "request" && m["request_id"] == r.Header().Get("X-Request-Id") {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no request line for %s in:\n%s", r.Header().Get("X-Request-Id"), f.logs.String())
	}
	want := map[string]any{
		"level": "INFO", "msg": "request", "method": "GET", "path": "/v1/ai-agents",
		"route": "GET /v1/ai-agents", "status": float64(200), "bytes": float64(r.Body.Len()),
		"key_prefix": c.Key.Prefix, "remote": "192.0.2.1",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %#v, want %#v", k, line[k], v)
		}
	}
	if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
		t.Errorf("duration_ms = %#v, want a non-negative number", line["duration_ms"])
	}
	if _, err := time.Parse(time.RFC3339Nano, line["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	if len(line) != len(want)+3 { // + request_id, duration_ms, time
		t.Errorf("fields %v", line)
	}

	// A credential pasted into the path is redacted.
	f.get("/v1/ai-agents/"+c.Credential, c.Credential)
	if strings.Contains(f.logs.String(), c.Credential[len(c.Credential)-38:]) {
		t.Fatal("a secret reached the log")
	}
	if !strings.Contains(f.logs.String(), `"path":"/v1/ai-agents/`+credential.Redact(c.Credential)+`"`) {
		t.Fatal("no redacted path in the log")
	}
}

// BenchmarkRequestLogLine compares the request log line as Logger.Info with
// key-value pairs writes it with logRequest's, both to JSONLog.
func BenchmarkRequestLogLine(b *testing.B) {
	s := &Server{log: slog.New(JSONLog(io.Discard))}
	r := httptest.NewRequest("GET", "http://api.test/v1/ai-agents?limit=5", nil)
	rec := &recorder{id: domain.NewRequestID(time.Now()), status: 200, written: 1234, keyPfx: "abcdef012345", route: "GET /v1/ai-agents"}
	d := 1234 * time.Microsecond
	b.Run("Info", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.log.Info("request", "request_id", rec.id, "method", r.Method, "path", credential.RedactText(r.URL.Path),
				"route", rec.route, "status", rec.status, "bytes", rec.written,
				"duration_ms", float64(d.Microseconds())/1000, "key_prefix", rec.keyPfx, "remote", s.clients.Addr(r))
		}
	})
	b.Run("logRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.logRequest(r, rec, d)
		}
	})
}

// TestEveryRefusalCostsOneStoreRead: with keys held in memory, a refusal
// answered from memory would come back faster than an unknown prefix's,
// which needs a store read; so every refusal, whatever its reason, reads
// the key from the store once (docs/api.md: no oracle in timing), and an
// admitted request reads nothing.
func TestEveryRefusalCostsOneStoreRead(t *testing.T) {
	f, authn := newCountedFixture(t, "sqlite")
	ctx := context.Background()
	good := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	revoked := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	exp := f.clock.Now().Add(time.Minute)
	expiring := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.ExpiresAt = &exp }, allAgentScopes...)
	other, otherOwner := f.newAccount("Other")
	inactive := f.keyIn(other, otherOwner, nil, allAgentScopes...)
	for _, c := range []string{good.Credential, revoked.Credential, expiring.Credential, inactive.Credential} {
		f.get("/v1/me", c).wantStatus(t, 200) // now held in memory
	}
	if err := f.keys.Revoke(ctx, keys.Actor{User: &f.owner}, f.account.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetAccountActive(ctx, other.ID, false); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	unknown, _ := credential.Generate(domain.EnvLive)
	forged, _ := credential.Generate(domain.EnvLive)
	wrongSecret := rechecksum(t, strings.Replace(forged.Text, forged.Prefix, good.Key.Prefix, 1))
	reads := func(cred string, want int) {
		t.Helper()
		f.get("/v1/me", cred) // the first one after a change may read to refill
		before := authn.CacheStats().Reads
		r := f.get("/v1/me", cred)
		if got := authn.CacheStats().Reads - before; got != uint64(want) {
			t.Fatalf("status %d: %d store reads, want %d", r.Code, got, want)
		}
	}
	reads(good.Credential, 0)
	for name, cred := range map[string]string{
		"unknown": unknown.Text, "wrong secret": wrongSecret, "revoked": revoked.Credential,
		"expired": expiring.Credential, "account inactive": inactive.Credential,
	} {
		t.Run(name, func(t *testing.T) {
			f.get("/v1/me", cred).wantError(t, 401, domain.CodeInvalidCredentials)
			reads(cred, 1)
		})
	}
}
