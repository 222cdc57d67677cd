package keys_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// instance is one serve process as far as authentication goes: its own
// store (PostgreSQL, shared), its own Redis client, limiter and tracker.
type instance struct {
	st    *store.Store
	lim   *ratelimit.Redis
	fresh *fresh.Tracker
	authn *keys.Authenticator
	rc    redis.UniversalClient
}

func newInstance(t *testing.T, dsn, redisURL string) *instance {
	t.Helper()
	rc, err := ratelimit.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	m := storetest.OpenMirroredOn(t, dsn, rc)
	a, err := keys.NewAuthenticator(keys.AuthConfig{Store: m.Store, Fresh: m.Fresh, Limiter: m.Limiter})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{st: m.Store, lim: m.Limiter, fresh: m.Fresh, authn: a, rc: rc}
}

func (in *instance) admit(token string) error {
	_, _, err := in.authn.AdmitFrom(context.Background(), token, time.Now(), "")
	return err
}

// mirroredWorld is three instances and a writer (an operator command) on
// one PostgreSQL database and one Redis (or Redis Cluster), with an
// account and its Owner.
type mirroredWorld struct {
	instances     []*instance
	writer        *instance
	owner         domain.User
	account       domain.Account
	dsn, redisURL string
}

// eachRedis runs fn on one Redis and on a 3-primary Redis Cluster.
func eachRedis(t *testing.T, fn func(t *testing.T, redisURL string)) {
	t.Run("redis", func(t *testing.T) { fn(t, testenv.RedisURL(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, testenv.RedisCluster(t).URL()) })
}

func newMirroredWorld(t *testing.T, redisURL string) *mirroredWorld {
	dsn := storetest.PostgresURL(t)
	w := &mirroredWorld{writer: newInstance(t, dsn, redisURL), dsn: dsn, redisURL: redisURL}
	for range 3 {
		w.instances = append(w.instances, newInstance(t, dsn, redisURL))
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	w.account = domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Acme", Active: true, CreatedAt: now}
	if err := w.writer.st.CreateAccount(ctx, w.account); err != nil {
		t.Fatal(err)
	}
	w.owner = domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: w.account.ID, Email: "owner@acme.test",
		Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
	if err := w.writer.st.CreateUser(ctx, w.owner); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *mirroredWorld) newKey(t *testing.T) keys.Created {
	t.Helper()
	c, err := keys.New(w.writer.st, nil).Create(context.Background(), keys.Actor{User: &w.owner},
		keys.CreateParams{AccountID: w.account.ID, Name: "k-" + domain.NewID("t", time.Now()), Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// warm makes every instance hold the key (and checks it is admitted).
func (w *mirroredWorld) warm(t *testing.T, token string) {
	t.Helper()
	for i, in := range w.instances {
		if err := in.admit(token); err != nil {
			t.Fatalf("instance %d before the change: %v", i, err)
		}
	}
}

func (w *mirroredWorld) allRefuse(t *testing.T, trial int, token string) {
	t.Helper()
	for i, in := range w.instances {
		var refused *keys.Refused
		if err := in.admit(token); !errors.As(err, &refused) {
			t.Fatalf("trial %d, instance %d: the very next request after the change: %v, want refused", trial, i, err)
		}
	}
}

// TestAdmitHeldKeyCostsNoStoreRoundTrip: while nothing changes, a held key
// is admitted and limited with no store check and no store read.
func TestAdmitHeldKeyCostsNoStoreRoundTrip(t *testing.T) {
	eachRedis(t, func(t *testing.T, redisURL string) {
		w := newMirroredWorld(t, redisURL)
		c := w.newKey(t)
		in := w.instances[0]
		w.warm(t, c.Credential)
		before := in.authn.CacheStats()
		for range 100 {
			if err := in.admit(c.Credential); err != nil {
				t.Fatal(err)
			}
		}
		after := in.authn.CacheStats()
		if after.Checks != before.Checks || after.Reads != before.Reads || after.Misses != before.Misses {
			t.Fatalf("store work for 100 requests on a held key: %+v -> %+v, want none", before, after)
		}
	})
}

// TestAdmitRevocationThroughEveryWriter: after a revocation, a rate-limit
// change or an account's deactivation, the very next request on every
// instance sees it, over hundreds of trials.
func TestAdmitRevocationThroughEveryWriter(t *testing.T) {
	eachRedis(t, func(t *testing.T, redisURL string) {
		w := newMirroredWorld(t, redisURL)
		svc := keys.New(w.writer.st, nil)
		owner := keys.Actor{User: &w.owner}
		const trials = 150
		for trial := range trials {
			admitRevocationTrial(t, w, svc, owner, trial)
		}
	})
}

// admitRevocationTrial is one trial of TestAdmitRevocationThroughEveryWriter:
// a fresh key held everywhere, then by trial%3 a revocation, a rate-limit
// change or the account's deactivation, seen by every instance's next request.
func admitRevocationTrial(t *testing.T, w *mirroredWorld, svc *keys.Service, owner keys.Actor, trial int) {
	t.Helper()
	ctx := context.Background()
	c := w.newKey(t)
	w.warm(t, c.Credential)
	switch trial % 3 {
	case 0: // revocation
		if err := svc.Revoke(ctx, owner, w.account.ID, c.Key.ID); err != nil {
			t.Fatal(err)
		}
		w.allRefuse(t, trial, c.Credential)
	case 1: // rate limit down to what the key has used: the next is 429
		if err := svc.SetRateLimit(ctx, c.Key.ID, 1); err != nil {
			t.Fatal(err)
		}
		admitRevocationAllLimitedAtOne(t, w, trial, c.Credential)
	case 2: // account deactivated, then active again for the next trials
		if err := w.writer.st.SetAccountActive(ctx, w.account.ID, false); err != nil {
			t.Fatal(err)
		}
		w.allRefuse(t, trial, c.Credential)
		if err := w.writer.st.SetAccountActive(ctx, w.account.ID, true); err != nil {
			t.Fatal(err)
		}
		w.warm(t, c.Credential)
	}
}

// admitRevocationAllLimitedAtOne: every instance's next request with token
// is refused by a limit of 1.
func admitRevocationAllLimitedAtOne(t *testing.T, w *mirroredWorld, trial int, token string) {
	t.Helper()
	for i, in := range w.instances {
		_, res, err := in.authn.AdmitFrom(context.Background(), token, time.Now(), "")
		if err != nil || res.Allowed || res.Limit != 1 {
			t.Fatalf("trial %d, instance %d after the limit change: %+v, %v; want refused at 1", trial, i, res, err)
		}
	}
}

// TestAdmitMirrorLostOrBackwards: a Redis that lost the mirror (restarted
// empty) or holds an older one (a replica behind) never lets a revoked key
// through; the instance raises the mirror back to the store's epoch.
func TestAdmitMirrorLostOrBackwards(t *testing.T) {
	eachRedis(t, func(t *testing.T, redisURL string) {
		w := newMirroredWorld(t, redisURL)
		ctx := context.Background()
		svc := keys.New(w.writer.st, nil)
		for trial, lose := range []func(int64) error{
			func(int64) error { return w.writer.rc.Del(ctx, w.mirrorKey()).Err() },
			// Below the epoch the instances hold the key under (e-1). Back to
			// exactly that epoch cannot be told from "nothing changed"
			// (docs/production.md): the repair ends it within a second.
			func(e int64) error { return w.writer.rc.Set(ctx, w.mirrorKey(), e-2, 0).Err() },
			func(int64) error { return w.writer.rc.Set(ctx, w.mirrorKey(), 0, 0).Err() },
		} {
			c := w.newKey(t)
			w.warm(t, c.Credential)
			if err := svc.Revoke(ctx, keys.Actor{User: &w.owner}, w.account.ID, c.Key.ID); err != nil {
				t.Fatal(err)
			}
			epoch, _, err := w.writer.st.ReadKeyEpoch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := lose(epoch); err != nil {
				t.Fatal(err)
			}
			w.allRefuse(t, trial, c.Credential)
			if got, ok, err := w.mirrorEpoch(ctx); err != nil || !ok || got != epoch {
				t.Fatalf("trial %d: mirror %d (%v, %v) after the instances' requests, want the store's %d", trial, got, ok, err, epoch)
			}
		}
	})
}

// TestAdmitWriterWithoutRedis: a writer that cannot raise the mirror keeps
// its change and says so; the instances' repair raises the mirror, after
// which the change holds everywhere.
func TestAdmitWriterWithoutRedis(t *testing.T) {
	eachRedis(t, func(t *testing.T, redisURL string) {
		w := newMirroredWorld(t, redisURL)
		ctx := context.Background()
		c := w.newKey(t)
		w.warm(t, c.Credential)
		// The writer's Redis is a port nothing listens on.
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		defer dead.Close()
		wst := storetest.OpenDSN(t, store.EnginePostgres, w.dsn)
		if _, err := fresh.Open(ctx, wst, dead, nil); err != nil {
			t.Fatal(err)
		}
		wctx, report := fresh.WithReport(ctx)
		if err := keys.New(wst, nil).Revoke(wctx, keys.Actor{User: &w.owner}, w.account.ID, c.Key.ID); err != nil {
			t.Fatalf("revoke: %v", err)
		}
		if report.Err() == nil {
			t.Fatal("the writer's report holds no failure to raise")
		}
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		for _, in := range w.instances {
			go in.fresh.Repair(rctx)
		}
		epoch, _, err := w.writer.st.ReadKeyEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("the mirror repaired to %d", epoch), func() bool {
			got, ok, _ := w.mirrorEpoch(ctx)
			return ok && got == epoch
		})
		w.allRefuse(t, 0, c.Credential)
	})
}

// mirrorKey is the mirror that vouches for the world's account's keys.
func (w *mirroredWorld) mirrorKey() string { return w.writer.fresh.MirrorKey(w.account.ID) }

// mirrorEpoch reads the mirror of the world's account; ok is false when
// Redis holds none.
func (w *mirroredWorld) mirrorEpoch(ctx context.Context) (epoch int64, ok bool, err error) {
	epoch, err = w.writer.rc.Get(ctx, w.mirrorKey()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	return epoch, err == nil, err
}

// waitFor polls cond for up to ten repair periods (a loaded machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * fresh.StaleBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not seen: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
