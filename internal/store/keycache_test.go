package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// twoStores opens two stores on one fresh database: two processes (or two
// instances) sharing it, as far as each store can tell.
func twoStores(t *testing.T, engine string) (*store.Store, *store.Store) {
	t.Helper()
	var dsn string
	if engine == store.EngineSQLite {
		dsn = filepath.Join(t.TempDir(), "shared.db")
	} else {
		dsn = storetest.PostgresURL(t)
	}
	open := func() *store.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}

func forEachEngineName(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

// TestKeyCacheServesRepeatsFromMemory fails if KeyByPrefix stops using the
// cache: repeated lookups of one key read it from the database once.
func TestKeyCacheServesRepeatsFromMemory(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := newAccount(t, s)
		k := newKey(t, s, acct.ID)
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
		newAgent(t, s, acct.ID, "unrelated", t0)
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
	forEachEngineName(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		a, b := twoStores(t, engine)
		for _, writer := range []struct {
			name string
			s    *store.Store
		}{{"other store", b}, {"same store", a}} {
			t.Run(writer.name, func(t *testing.T) {
				w := writer.s
				acct := newAccount(t, w)
				k := newKey(t, w, acct.ID)
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

				if err := w.SetKeyRateLimit(ctx, k.ID, 7, event(acct.ID, k.ID, "rate_limit_changed", t0)); err != nil {
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
				if err := w.RevokeKey(ctx, acct.ID, k.ID, "usr_1", t0, event(acct.ID, k.ID, "revoked", t0)); err != nil {
					t.Fatal(err)
				}
				if got, _ := lookup(); got.RevokedAt == nil {
					t.Fatal("after revocation: key not revoked")
				}
			})
		}
	})
}

// TestKeyCacheRevocationUnderLoad: while many goroutines look a key up, a
// revocation by another store commits; every lookup that began after the
// commit returned must see it.
func TestKeyCacheRevocationUnderLoad(t *testing.T) {
	forEachEngineName(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		a, b := twoStores(t, engine)
		for round := range 5 {
			acct := newAccount(t, b)
			k := newKey(t, b, acct.ID)
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
					for !stop.Load() {
						after := revoked.Load()
						got, _, err := a.KeyByPrefix(ctx, k.Prefix)
						if err != nil {
							t.Error(err)
							return
						}
						if after && got.RevokedAt == nil {
							stale.Add(1)
						}
					}
				}()
			}
			time.Sleep(20 * time.Millisecond)
			at := t0.Add(time.Duration(round) * time.Second)
			if err := b.RevokeKey(ctx, acct.ID, k.ID, "usr_1", at, event(acct.ID, k.ID, "revoked", at)); err != nil {
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
	})
}

// BenchmarkKeyAuthPath compares the database read the cache saves with the
// check it costs instead, and the cached lookup as requests see it.
func BenchmarkKeyAuthPath(b *testing.B) {
	for _, e := range storetest.Engines() {
		b.Run(e, func(b *testing.B) {
			s := storetest.Open(b, e)
			ctx := context.Background()
			acct := newAccount(b, s)
			k := domain.APIKey{ID: domain.NewID(domain.PrefixKey, t0), AccountID: acct.ID, Name: "k", Prefix: "pfx_bench",
				Env: domain.EnvLive, Hash: []byte{1}, Scopes: []domain.Scope{domain.ScopeAgentsRead},
				RateLimitPerMinute: 1, CreatedAt: t0}
			if err := s.CreateKey(ctx, k, event(acct.ID, k.ID, "created", t0)); err != nil {
				b.Fatal(err)
			}
			b.Run("read", func(b *testing.B) {
				for b.Loop() {
					if _, _, err := s.ReadKeyByPrefix(ctx, "pfx_bench"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("epoch check", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.KeyEpoch(ctx); err != nil {
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
			b.Run("cached, 16 callers", func(b *testing.B) {
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
			})
		})
	}
}

// TestKeyByPrefixAfterClose fails rather than blocks.
func TestKeyByPrefixAfterClose(t *testing.T) {
	forEachEngineName(t, func(t *testing.T, engine string) {
		a, _ := twoStores(t, engine)
		acct := newAccount(t, a)
		k := newKey(t, a, acct.ID)
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
