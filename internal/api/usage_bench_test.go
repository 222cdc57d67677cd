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
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/usage"
)

// discardUsage is a usage store that keeps nothing: the benchmark measures
// the request's side of recording, not the batch's write
// (store.BenchmarkWriteUsage).
type discardUsage struct{}

func (discardUsage) WritePackedUsage(context.Context, *requestlog.Buffer, []store.UsageCount) error {
	return nil
}
func (discardUsage) SweepUsage(context.Context, time.Time) error { return nil }

// BenchmarkUsageHook is BenchmarkHandlerMe without and with the usage
// recorder: the difference is what recording costs a request on its own
// path (the hook and the buffer; the batch is flushed every 1,000
// requests, as a 1,000 req/s load would, its cost counted).
func BenchmarkUsageHook(b *testing.B) {
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
	for _, on := range []bool{false, true} {
		name := "off"
		var rec *usage.Recorder
		cfg := Config{Store: st, Limiter: mem, UnauthLimiter: mem, Toucher: keys.NewToucher(st.TouchKeys, log, time.Second), Log: log, CursorKey: ck}
		if on {
			name, rec = "on", usage.New(discardUsage{}, nil, usage.Options{})
			cfg.Usage = rec
		}
		h := mustNew(b, cfg)
		req := httptest.NewRequest("GET", "/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+c.Credential)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
				if i++; rec != nil && i%1000 == 0 {
					_ = rec.Flush(ctx)
				}
			}
		})
	}
}
