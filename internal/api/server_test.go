package api

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// mustNew is New for a Config the test knows to be whole.
func mustNew(tb testing.TB, cfg Config) http.Handler {
	tb.Helper()
	h, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// TestNewRefusesMissingDependencies: a Config without a dependency every
// request needs is refused when the handler is built, naming what is
// missing, instead of panicking on the first request.
func TestNewRefusesMissingDependencies(t *testing.T) {
	st := storetest.Open(t, "sqlite")
	mem := ratelimit.NewMemory(nil)
	t.Cleanup(mem.Close)
	log := slog.New(slog.DiscardHandler)
	whole := func() Config {
		return Config{Store: st, Limiter: mem, UnauthLimiter: mem,
			Toucher: keys.NewToucher(st.TouchKeys, log, time.Second), CursorKey: []byte("k")}
	}
	if _, err := New(whole()); err != nil {
		t.Fatalf("whole config refused: %v", err)
	}
	for _, tc := range []struct {
		missing string
		drop    func(*Config)
	}{
		{"Store", func(c *Config) { c.Store = nil }},
		{"Limiter", func(c *Config) { c.Limiter = nil }},
		{"UnauthLimiter", func(c *Config) { c.UnauthLimiter = nil }},
		{"Toucher", func(c *Config) { c.Toucher = nil }},
		{"CursorKey", func(c *Config) { c.CursorKey = nil }},
	} {
		t.Run(tc.missing, func(t *testing.T) {
			cfg := whole()
			tc.drop(&cfg)
			h, err := New(cfg)
			if err == nil || h != nil {
				t.Fatalf("New without %s = %v, %v; want an error", tc.missing, h, err)
			}
			if !strings.Contains(err.Error(), tc.missing) {
				t.Errorf("error %q does not name %s", err, tc.missing)
			}
		})
	}
}
