package keys_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// cachedStore is a store seen through an Authenticator's key cache: what
// one serve instance (or the CLI's process) looks keys up through.
type cachedStore struct {
	*store.Store
	a *keys.Authenticator
}

func newCachedStore(t testing.TB, s *store.Store) cachedStore {
	a, err := keys.NewAuthenticator(keys.AuthConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	return cachedStore{Store: s, a: a}
}

func (c cachedStore) KeyByPrefix(ctx context.Context, prefix string) (domain.APIKey, bool, error) {
	return c.a.KeyByPrefix(ctx, prefix)
}

func (c cachedStore) KeyCacheStats() keys.CacheStats { return c.a.CacheStats() }

// t0 is the tests' clock, the fixtures' (storetest.T0): nothing here reads the real time.
var t0 = storetest.T0

// twoStores opens two stores on one fresh database: two processes (or two
// instances) sharing it, as far as each store can tell.
func twoStores(t *testing.T, engine string) (cachedStore, cachedStore) {
	a, b := storetest.OpenTwo(t, engine)
	return newCachedStore(t, a), newCachedStore(t, b)
}

func forEachEngine(t *testing.T, fn func(t *testing.T, s cachedStore)) {
	t.Helper()
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) { fn(t, newCachedStore(t, storetest.Open(t, e))) })
	}
}

// TestKeyCacheServesRepeatsFromMemory fails if KeyByPrefix stops using the
// cache: repeated lookups of one key read it from the database once.
func TestKeyCacheServesRepeatsFromMemory(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s cachedStore) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		before := s.KeyCacheStats()
		for range 50 {
			got, active, err := s.KeyByPrefix(ctx, k.Prefix)
			if err != nil || got.ID != k.ID || !active {
				t.Fatalf("lookup: %v %v %v", got.ID, active, err)
			}
		}
		d := s.KeyCacheStats()
		if misses, hits := d.Misses-before.Misses, d.Hits-before.Hits; misses != 1 || hits != 49 {
			t.Fatalf("50 lookups: %d database reads, %d from memory; want 1 and 49", misses, hits)
		}
		// Writes that change no key leave the cache alone.
		storetest.Agent(t, s, acct.ID, "unrelated", t0)
		if err := s.TouchKeys(ctx, map[string]time.Time{k.ID: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.KeyByPrefix(ctx, k.Prefix); err != nil {
			t.Fatal(err)
		}
		if m := s.KeyCacheStats().Misses - d.Misses; m != 0 {
			t.Fatalf("an agent create and a last_used_at flush cost %d key reads, want 0", m)
		}
	})
}

// TestKeyCacheSeesEveryKeyWriteAtOnce: each write that changes what a key
// lets through, made by another store on the same database (another
// process, another instance), is seen by the very next lookup; and so is
// one made through the same store.
func TestKeyCacheSeesEveryKeyWriteAtOnce(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := twoStores(t, engine)
		for _, writer := range []struct {
			name string
			s    cachedStore
		}{{"other store", b}, {"same store", a}} {
			t.Run(writer.name, func(t *testing.T) { keyCacheSeesWritesBy(t, a, writer.s) })
		}
	})
}

// keyCacheSeesWritesBy: each key write made through w is seen by a's very
// next lookup of the key.
func keyCacheSeesWritesBy(t *testing.T, a, w cachedStore) {
	t.Helper()
	ctx := context.Background()
	acct := storetest.Account(t, w)
	k := storetest.Key(t, w, acct.ID)
	lookup := func() (domain.APIKey, bool) {
		t.Helper()
		got, active, err := a.KeyByPrefix(ctx, k.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		return got, active
	}
	if got, active := lookup(); got.RateLimitPerMinute != 120 || !active {
		t.Fatalf("fresh key: %+v active %v", got, active)
	}
	lookup() // now held in memory

	if err := w.SetKeyRateLimit(ctx, k.ID, 7, storetest.Event(acct.ID, k.ID, "rate_limit_changed", t0)); err != nil {
		t.Fatal(err)
	}
	if got, _ := lookup(); got.RateLimitPerMinute != 7 {
		t.Fatalf("after set-rate-limit: %d", got.RateLimitPerMinute)
	}
	if err := w.SetAccountActive(ctx, acct.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, active := lookup(); active {
		t.Fatal("after deactivation: account still active")
	}
	if err := w.SetAccountActive(ctx, acct.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, active := lookup(); !active {
		t.Fatal("after activation: account still inactive")
	}
	if err := w.RevokeKey(ctx, acct.ID, k.ID, "usr_1", t0, storetest.Event(acct.ID, k.ID, "revoked", t0)); err != nil {
		t.Fatal(err)
	}
	if got, _ := lookup(); got.RevokedAt == nil {
		t.Fatal("after revocation: key not revoked")
	}
}

// TestKeyCacheRevocationUnderLoad: while many goroutines look a key up, a
// revocation by another store commits; every lookup that began after the
// commit returned must see it.
func TestKeyCacheRevocationUnderLoad(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := twoStores(t, engine)
		for round := range 5 {
			keyCacheRevocationRound(t, a, b, round)
		}
	})
}

// keyCacheRevocationRound is one round of TestKeyCacheRevocationUnderLoad:
// 8 goroutines look a fresh key up through a while b revokes it.
func keyCacheRevocationRound(t *testing.T, a, b cachedStore, round int) {
	t.Helper()
	ctx := context.Background()
	acct := storetest.Account(t, b)
	k := storetest.Key(t, b, acct.ID)
	var (
		revoked atomic.Bool
		stop    atomic.Bool
		stale   atomic.Int64
		wg      sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keyCacheRevocationLookUntil(t, a, k.Prefix, &revoked, &stop, &stale)
		}()
	}
	time.Sleep(20 * time.Millisecond)
	at := t0.Add(time.Duration(round) * time.Second)
	if err := b.RevokeKey(ctx, acct.ID, k.ID, "usr_1", at, storetest.Event(acct.ID, k.ID, "revoked", at)); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	time.Sleep(20 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if n := stale.Load(); n != 0 {
		t.Fatalf("round %d: %d lookups begun after the revocation saw the key unrevoked", round, n)
	}
}

// keyCacheRevocationLookUntil looks prefix up through a until stop, counting
// in stale the lookups begun after revoked was set that saw the key unrevoked.
func keyCacheRevocationLookUntil(t *testing.T, a cachedStore, prefix string, revoked, stop *atomic.Bool, stale *atomic.Int64) {
	ctx := context.Background()
	for !stop.Load() {
		after := revoked.Load()
		got, _, err := a.KeyByPrefix(ctx, prefix)
		if err != nil {
			t.Error(err)
			return
		}
		if after && got.RevokedAt == nil {
			stale.Add(1)
		}
	}
}

// BenchmarkKeyAuthPath compares the database read the cache saves with the
// check it costs instead, and the cached lookup as requests see it.
func BenchmarkKeyAuthPath(b *testing.B) {
	for _, e := range storetest.Engines() {
		b.Run(e, func(b *testing.B) { benchKeyAuthPathOn(b, e) })
	}
}

// benchKeyAuthPathOn runs BenchmarkKeyAuthPath's sub-benchmarks on one
// engine's store, holding one key.
func benchKeyAuthPathOn(b *testing.B, e string) {
	s := newCachedStore(b, storetest.Open(b, e))
	ctx := context.Background()
	acct := storetest.Account(b, s)
	k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: acct.ID, Name: "k", Prefix: "pfx_bench",
		Env: domain.EnvLive, Hash: []byte{1}, Scopes: []domain.Scope{domain.ScopeAgentsRead},
		RateLimitPerMinute: 1, CreatedAt: t0}
	if err := s.CreateKey(ctx, k, storetest.Event(acct.ID, k.ID, "created", t0)); err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.ReadKeyByPrefix(ctx, "pfx_bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	tr := fresh.New(s.Store, fresh.Options{})
	b.Run("epoch check", func(b *testing.B) {
		for b.Loop() {
			if _, err := tr.Check(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.KeyByPrefix(ctx, "pfx_bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached, 16 callers", func(b *testing.B) { benchKeyAuthPathParallel(b, s) })
}

// benchKeyAuthPathParallel is BenchmarkKeyAuthPath's "cached, 16 callers":
// cached lookups from parallel callers, reporting the epoch checks per lookup.
func benchKeyAuthPathParallel(b *testing.B, s cachedStore) {
	ctx := context.Background()
	b.SetParallelism(8)
	before := s.KeyCacheStats()
	b.Cleanup(func() {
		d := s.KeyCacheStats()
		b.ReportMetric(float64(d.Checks-before.Checks)/float64(d.Hits+d.Misses-before.Hits-before.Misses), "checks/lookup")
	})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.KeyByPrefix(ctx, "pfx_bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestKeyByPrefixAfterClose fails rather than blocks.
func TestKeyByPrefixAfterClose(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, _ := twoStores(t, engine)
		acct := storetest.Account(t, a)
		k := storetest.Key(t, a, acct.ID)
		if _, _, err := a.KeyByPrefix(context.Background(), k.Prefix); err != nil {
			t.Fatal(err)
		}
		a.Close()
		done := make(chan error, 1)
		go func() { _, _, err := a.KeyByPrefix(context.Background(), k.Prefix); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a closed store answered from memory")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("KeyByPrefix on a closed store blocked")
		}
	})
}

// TestHeldKeyNeedsNoStore: a key read once is held with its epoch, and
// HeldKey answers without the store (closed here).
func TestHeldKeyNeedsNoStore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s cachedStore) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		if _, _, err := s.KeyByPrefix(ctx, k.Prefix); err != nil {
			t.Fatal(err)
		}
		l, _ := s.a.HeldKey(k.Prefix)
		epoch, _, err := s.ReadKeyEpoch(ctx)
		if err != nil || l.Epoch() != epoch {
			t.Fatalf("lookup under %d, store at %d (%v)", l.Epoch(), epoch, err)
		}
		s.Close()
		h, ok := s.a.HeldKey(k.Prefix)
		if !ok || h.Key.ID != k.ID || h.Epoch() != epoch {
			t.Fatalf("held %v %v under %d", ok, h.Key.ID, h.Epoch())
		}
		if _, ok := s.a.HeldKey("zzzzzzzzzzzz"); ok {
			t.Fatal("an unknown prefix is held")
		}
	})
}

// TestKeyChangeRereadsOnlyItsAccount: two instances hold keys of accounts
// A and B; a revocation in A (made through the other instance) makes the
// first re-read A's key, refused on its very next lookup, while B's key is
// still answered from memory: no database read for it.
func TestKeyChangeRereadsOnlyItsAccount(t *testing.T) {
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) { keyChangeRereadsOnlyItsAccount(t, e) })
	}
}

func keyChangeRereadsOnlyItsAccount(t *testing.T, engine string) {
	ctx := context.Background()
	s1, s2 := twoStores(t, engine)
	a, b := storetest.Account(t, s1), storetest.Account(t, s1)
	ka, kb := storetest.Key(t, s1, a.ID), storetest.Key(t, s1, b.ID)
	for _, k := range []domain.APIKey{ka, kb} {
		if _, _, err := s1.KeyByPrefix(ctx, k.Prefix); err != nil {
			t.Fatal(err)
		}
	}
	if err := s2.RevokeKey(ctx, a.ID, ka.ID, "usr_1", t0, storetest.Event(a.ID, ka.ID, "revoked", t0)); err != nil {
		t.Fatal(err)
	}
	before := s1.KeyCacheStats()
	got, _, err := s1.KeyByPrefix(ctx, ka.Prefix)
	if err != nil || got.RevokedAt == nil {
		t.Fatalf("A's key after its revocation elsewhere: revoked %v, %v", got.RevokedAt, err)
	}
	if r := s1.KeyCacheStats().Reads - before.Reads; r != 1 {
		t.Fatalf("A's key: %d reads, want 1", r)
	}
	mid := s1.KeyCacheStats()
	if _, _, err := s1.KeyByPrefix(ctx, kb.Prefix); err != nil {
		t.Fatal(err)
	}
	d := s1.KeyCacheStats()
	if d.Reads != mid.Reads || d.Hits != mid.Hits+1 {
		t.Fatalf("B's key after a change in A: %d reads, %d hits; want 0 and 1", d.Reads-mid.Reads, d.Hits-mid.Hits)
	}
}
