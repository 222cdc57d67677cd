package storetest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// Mirrored is what one serve instance shares with the others on
// PostgreSQL and Redis, wired as serve wires it: its own store on the
// shared database, its own Redis client, the key epoch's mirror and the
// agent-list versions the store's writes raise and set, and a Redis
// limiter that checks held keys against the mirror.
type Mirrored struct {
	Store    *store.Store
	Redis    *redis.Client
	Mirror   *ratelimit.Mirror
	Versions *ratelimit.Versions
	Limiter  *ratelimit.Redis
}

// OpenMirrored opens one instance's Mirrored on the database dsn
// (PostgresURL) and the Redis opts names; all of it is closed when the
// test ends.
func OpenMirrored(t testing.TB, dsn string, opts *redis.Options) *Mirrored {
	t.Helper()
	st := openDSN(t, store.EnginePostgres, dsn)
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	id, err := st.Secret(context.Background(), ratelimit.MirrorSecret)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mirrored{Store: st, Redis: rc, Mirror: ratelimit.NewMirror(rc, ratelimit.MirrorKey(id), nil),
		Versions: ratelimit.NewVersions(rc, id, nil)}
	st.SetEpochNotifier(m.Mirror)
	st.SetListNotifier(m.Versions)
	fallback := ratelimit.NewMemory(nil)
	t.Cleanup(fallback.Close)
	m.Limiter = ratelimit.NewRedis(rc, fallback, nil)
	m.Limiter.UseMirror(m.Mirror)
	t.Cleanup(m.Limiter.Close)
	return m
}
