package api

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// BenchmarkHandlerMe is the whole /v1 stack in process for GET /v1/me, as
// serve builds it (JSON request log included, written to io.Discard): what
// every request costs us before HTTP and the network. With -cpuprofile it
// shows the split (log line, headers, key lookup, encoding).
func BenchmarkHandlerMe(b *testing.B) {
	st := storetest.Open(b, "sqlite")
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "A", Active: true, CreatedAt: now}
	_ = st.CreateAccount(ctx, a)
	u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: "o@x", Role: domain.RoleOwner, PasswordHash: "x", Active: true, CreatedAt: now}
	_ = st.CreateUser(ctx, u)
	c, err := keys.New(st, nil).Create(ctx, keys.Actor{User: &u}, keys.CreateParams{AccountID: a.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimit: 100_000_000})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(JSONLog(io.Discard))
	mem := ratelimit.NewMemory(nil)
	defer mem.Close()
	ck, _ := st.Secret(ctx, "cursor")
	h := mustNew(b, Config{Store: st, Limiter: mem, UnauthLimiter: mem, Toucher: keys.NewToucher(st.TouchKeys, log, time.Second), Log: log, CursorKey: ck})
	req := httptest.NewRequest("GET", "/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+c.Credential)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}
