package api

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// BenchmarkAuthRefusalTiming prints the median time of GET /v1/me through
// the whole handler for each way a credential can be refused, and for a
// valid key as a reference: an unknown prefix must cost what a known
// prefix with a wrong secret, a revoked key or an expired key costs, or the
// time of a 401 tells whether a prefix exists. The cases run interleaved
// (one of each per iteration, in a rotating order) so that drift of a
// loaded machine falls on all of them alike.
//
//	go test -run '^$' -bench AuthRefusalTiming -benchtime 2500x ./internal/api/
func BenchmarkAuthRefusalTiming(b *testing.B) {
	for _, engine := range storetest.Engines() {
		b.Run(engine, func(b *testing.B) { benchAuthRefusalTiming(b, engine) })
	}
}

func benchAuthRefusalTiming(b *testing.B, engine string) {
	st := storetest.Open(b, engine)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "A", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, a); err != nil {
		b.Fatal(err)
	}
	u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: "o@x", Role: domain.RoleOwner, PasswordHash: "x", Active: true, CreatedAt: now}
	if err := st.CreateUser(ctx, u); err != nil {
		b.Fatal(err)
	}
	// The expired key was created an hour ago and expired a minute later.
	past := now.Add(-time.Hour)
	create := func(clock time.Time, expires *time.Time) keys.Created {
		b.Helper()
		c, err := keys.New(st, func() time.Time { return clock }).Create(ctx, keys.Actor{User: &u}, keys.CreateParams{
			AccountID: a.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimit: domain.MaxRateLimitPerMinute, ExpiresAt: expires,
		})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	valid := create(now, nil)
	revoked := create(now, nil)
	if err := keys.New(st, nil).Revoke(ctx, keys.Actor{User: &u}, a.ID, revoked.Key.ID); err != nil {
		b.Fatal(err)
	}
	expiry := past.Add(time.Minute)
	expired := create(past, &expiry)
	unknown, _ := credential.Generate(domain.EnvLive)

	log := slog.New(JSONLog(io.Discard))
	mem := ratelimit.NewMemory(nil)
	defer mem.Close()
	ck, err := st.Secret(ctx, "cursor")
	if err != nil {
		b.Fatal(err)
	}
	h := mustNew(b, Config{
		Store: st, Limiter: mem, UnauthLimiter: mem, UnauthRateLimit: 1 << 30,
		Toucher: keys.NewToucher(st.TouchKeys, log, time.Second), Log: log, CursorKey: ck,
	})

	cases := []struct {
		name   string
		token  string
		status int
	}{
		{"valid", valid.Credential, 200},
		{"unknown_prefix", unknown.Text, 401},
		{"wrong_secret", wrongSecret(valid.Credential), 401},
		{"revoked", revoked.Credential, 401},
		{"expired", expired.Credential, 401},
	}
	took := make([][]time.Duration, len(cases))
	do := func(i int) {
		req := httptest.NewRequest("GET", "/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+cases[i].token)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != cases[i].status {
			b.Fatalf("%s: status %d, want %d: %s", cases[i].name, rec.Code, cases[i].status, rec.Body)
		}
		took[i] = append(took[i], d)
	}
	for i := range cases { // warm up: caches, prepared statements, the expired key's audit write
		do(i)
		took[i] = took[i][:0]
	}
	n := 0
	for b.Loop() {
		for j := range cases {
			do((n + j) % len(cases))
		}
		n++
	}
	b.StopTimer()
	var line strings.Builder
	for i, c := range cases {
		m := median(took[i])
		b.ReportMetric(float64(m.Nanoseconds())/1e3, "µs-median-"+c.name)
		fmt.Fprintf(&line, " %s=%.1fµs", c.name, float64(m.Nanoseconds())/1e3)
	}
	b.Logf("%s: medians of %d requests each:%s", engine, n, line.String())
}

// wrongSecret is cred with another secret of valid form (checksum
// included): it passes parsing and fails only the hash comparison.
func wrongSecret(cred string) string {
	// rand.Text is base32 (A–Z, 2–7): letters and digits a secret may hold.
	body := cred[:len(cred)-credential.SecretLen] + (rand.Text() + rand.Text())[:credential.RandomLen]
	return body + credential.Checksum(body)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
