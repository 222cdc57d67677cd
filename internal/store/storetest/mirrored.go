package storetest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// Mirrored is what one serve instance shares with the others on
// PostgreSQL and Redis, wired as serve wires it: its own store on the
// shared database, its own Redis client (one server's or a cluster's),
// the tracker whose mirror and list versions the store's writes raise and
// set, and a Redis limiter whose decisions carry its guards.
type Mirrored struct {
	Store   *store.Store
	Redis   redis.UniversalClient
	Fresh   *fresh.Tracker
	Limiter *ratelimit.Redis
}

// OpenMirrored opens one instance's Mirrored on the database dsn
// (PostgresURL) and the Redis opts names; all of it is closed when the
// test ends.
func OpenMirrored(t testing.TB, dsn string, opts *redis.Options) *Mirrored {
	t.Helper()
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	return OpenMirroredOn(t, dsn, rc)
}

// OpenMirroredOn is OpenMirrored on a client of the test's (a cluster's,
// say), which the test closes.
func OpenMirroredOn(t testing.TB, dsn string, rc redis.UniversalClient) *Mirrored {
	t.Helper()
	st := OpenDSN(t, store.EnginePostgres, dsn)
	tr, err := fresh.Open(context.Background(), st, rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	m := &Mirrored{Store: st, Redis: rc, Fresh: tr}
	fallback := ratelimit.NewMemory(nil)
	t.Cleanup(fallback.Close)
	m.Limiter = ratelimit.NewRedis(rc, fallback, nil)
	t.Cleanup(m.Limiter.Close)
	return m
}
