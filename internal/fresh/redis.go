package fresh

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// mirror is what the tracker keeps in Redis (docs/production.md, "One
// Redis round trip per request", "Agent lists from memory"):
//
//   - The key epoch's mirror. Writers raise it after committing a change
//     that raised the epoch; a request's rate-limit decision compares it
//     with the epoch a key is held under (Guard), so that a key held in
//     memory is used only while nothing changed. On one Redis it is one
//     key per database, the epoch itself; on a Redis Cluster one per
//     account, the account's epoch, in the account's hash slot beside its
//     windows. It only ever moves forwards (raiseScript): a writer that
//     raises late cannot undo a later writer's raise.
//   - Each account's agent-list version: a fresh random number set after
//     every commit that changed the account's agents, read with the
//     decision of a list request (ListKey), never a counter: a Redis that
//     lost its data and counted up again could otherwise bring back a
//     version under which a page read before a change is held. An absent
//     version is a version too (-1).
type mirror struct {
	client  redis.UniversalClient
	cluster bool
	tag     string // the database's, from its StoreID
	one     string // the mirror on one Redis (epochKey)
	log     *slog.Logger
	// timeout bounds one raise or version (RaiseTimeout); tests shorten it.
	timeout time.Duration
	// failed and listFailed count raises and versions that did not reach
	// Redis (a CLI exits 1 on the first).
	failed, listFailed atomic.Int64
	// repaired is the key epoch up to which Repair raised the accounts'
	// mirrors (a cluster's).
	repaired int64
}

// RaiseTimeout bounds a writer's raise; past it the change stays committed
// and the writer says so (StaleBound).
const RaiseTimeout = 2 * time.Second

// StaleBound is how long a key can be accepted after a change whose raise
// failed: every instance repairs the mirror at least this often.
const StaleBound = time.Second

// RepairEvery is how often an instance repairs the mirror (Repair), well
// within StaleBound.
const RepairEvery = StaleBound / 2

// versionTTL lets an account's list version expire when nothing changed
// it for a day: an absent version is as good as any, and Redis keeps one
// key per account that writes, not one per account ever seen. A
// cluster's per-account mirrors expire alike: a lost one is rebuilt from
// the store by the first request that finds it absent.
const versionTTL = 24 * time.Hour

func newMirror(client redis.UniversalClient, storeID []byte, log *slog.Logger) *mirror {
	_, cluster := client.(*redis.ClusterClient)
	tag := hex.EncodeToString(storeID[:min(len(storeID), 8)])
	return &mirror{client: client, cluster: cluster, tag: tag, one: "agentapi:key-epoch:" + tag,
		log: log, timeout: RaiseTimeout, repaired: -1}
}

// epochKey is the mirror that vouches for accountID's keys.
func (m *mirror) epochKey(accountID string) string {
	if m.cluster {
		return "agentapi:key-epoch:" + m.tag + ":{" + accountID + "}"
	}
	return m.one
}

// listKey is accountID's agent-list version.
func (m *mirror) listKey(accountID string) string {
	if m.cluster {
		return "agentapi:agents-version:" + m.tag + ":{" + accountID + "}"
	}
	return "agentapi:agents-version:" + m.tag + ":" + accountID
}

// raiseScript sets KEYS[1] to ARGV[1] unless it already holds as much or
// more, and returns what it then holds; ARGV[2] is an expiry in
// milliseconds, 0 for none.
var raiseScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1') or -1
if n > cur then
  if ARGV[2] ~= '0' then
    redis.call('SET', KEYS[1], n, 'PX', ARGV[2])
  else
    redis.call('SET', KEYS[1], n)
  end
  return n
end
return cur
`)

// raiseTo raises key to epoch (set only if greater).
func (m *mirror) raiseTo(ctx context.Context, key string, epoch int64) error {
	ttl := int64(0)
	if m.cluster {
		ttl = versionTTL.Milliseconds()
	}
	return raiseScript.Run(ctx, m.client, []string{key}, epoch, ttl).Err()
}

// raise raises the mirror after a commit: on one Redis to epoch, on a
// cluster each changed account's to its own epoch; within RaiseTimeout
// whatever ctx allows (a writer whose caller went away after the commit
// still raises). A failure is logged and counted.
func (m *mirror) raise(ctx context.Context, accounts map[string]int64, epoch int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout)
	defer cancel()
	var err error
	if m.cluster {
		for acct, e := range accounts {
			if rerr := m.raiseTo(ctx, m.epochKey(acct), e); rerr != nil {
				err = rerr
			}
		}
	} else {
		err = m.raiseTo(ctx, m.one, epoch)
	}
	if err != nil {
		m.failed.Add(1)
		m.log.Warn("key epoch mirror: raise failed; instances repair it within a second", "epoch", epoch, "err", err)
		return fmt.Errorf("raise the key epoch mirror in Redis: %w", err)
	}
	return nil
}

// newVersion sets a new list version for accountID, within RaiseTimeout
// whatever ctx allows (the change it reports is committed). A failure is
// logged and counted; pages then stay servable for at most ListStaleBound.
func (m *mirror) newVersion(ctx context.Context, accountID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout)
	defer cancel()
	if err := m.client.Set(ctx, m.listKey(accountID), randomVersion(), versionTTL).Err(); err != nil {
		m.listFailed.Add(1)
		m.log.Warn("agent list version: set failed; pages held in memory expire within a second", "err", err)
		return fmt.Errorf("set the agent list version in Redis: %w", err)
	}
	return nil
}

// randomVersion is a random version in [0, 2⁴⁸): exact as a number in the
// decision script (Lua's numbers are doubles), never -1 (absent), and
// with 2⁻⁴⁸ odds of meeting any one earlier version again.
func randomVersion() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return int64(binary.LittleEndian.Uint64(b[:]) >> 16)
}

// Mirrored reports that keys held in memory may be used without asking
// the store, provided each decision carries Guard: PostgreSQL with Redis.
// On SQLite the store's own check (PRAGMA data_version) costs less than
// any round trip and stays.
func (t *Tracker) Mirrored() bool {
	return t.mirror != nil && t.st.Engine() == store.EnginePostgres
}

// Held is what a key held in memory was read under: the epoch the holder
// is synced to (Sync), and its account's key epoch when it was read
// (store.HeldKey).
type Held struct {
	Synced, Account int64
}

// Guard is the guard of a decision for a key of accountID held under h
// (Mirrored): the decision is made only while the mirror still vouches
// for h. On one Redis the mirror must equal the epoch the holder is
// synced to; on a cluster, the account's mirror its epoch. Without Redis
// the decision is not guarded.
func (t *Tracker) Guard(accountID string, h Held) ratelimit.Guard {
	if t.mirror == nil {
		return ratelimit.Guard{}
	}
	g := ratelimit.Guard{Key: t.mirror.epochKey(accountID), Want: h.Synced}
	if t.mirror.cluster {
		g.Want = h.Account
	}
	return g
}

// Stale reports that a key held under h cannot be vouched for by the
// mirror whatever it says: on one Redis, it is held under an epoch below
// the highest this instance has learned of (a Redis that went back to
// exactly that epoch, a replica promoted with an older copy, is not
// believed). On a cluster, Repair drops such keys instead.
func (t *Tracker) Stale(h Held) bool {
	return t.mirror != nil && !t.mirror.cluster && h.Synced < t.seen.Load()
}

// Behind raises the mirror of accountID when a decision found it at
// found while the store, just read (h), says more: Redis lost it, or went
// back to an older copy.
func (t *Tracker) Behind(ctx context.Context, accountID string, found int64, h Held) {
	if t.mirror == nil {
		return
	}
	want := h.Synced
	if t.mirror.cluster {
		want = h.Account
	}
	if found >= want {
		return
	}
	if err := t.mirror.raiseTo(ctx, t.mirror.epochKey(accountID), want); err != nil {
		t.log.Warn("key epoch mirror behind the store and not raised", "err", err)
	}
}

// MirrorKey is the Redis key of the mirror that vouches for accountID's
// keys (the database's one on one Redis); "" without Redis.
func (t *Tracker) MirrorKey(accountID string) string {
	if t.mirror == nil {
		return ""
	}
	return t.mirror.epochKey(accountID)
}

// ListKey is the Redis key of accountID's agent-list version, read with
// the decision of a list request; "" without Redis.
func (t *Tracker) ListKey(accountID string) string {
	if t.mirror == nil {
		return ""
	}
	return t.mirror.listKey(accountID)
}

// RaiseFailures counts the raises of the mirror that did not reach Redis.
func (t *Tracker) RaiseFailures() int64 {
	if t.mirror == nil {
		return 0
	}
	return t.mirror.failed.Load()
}

// ListFailures counts the list versions that could not be set in Redis.
func (t *Tracker) ListFailures() int64 {
	if t.mirror == nil {
		return 0
	}
	return t.mirror.listFailed.Load()
}

// Repair sets the mirror right every RepairEvery until ctx ends: a writer
// that could not raise it, or a Redis that lost it or went back to an
// older copy, is set right within StaleBound. It also syncs the holders
// (Sync), so that a key held of an account that changed is dropped within
// that bound whatever Redis says. Failures are logged once per outage.
func (t *Tracker) Repair(ctx context.Context) {
	tick := time.NewTicker(RepairEvery)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := t.repairOnce(ctx)
		if err != nil && !failing {
			t.log.Warn("key epoch mirror: repair failed", "err", err)
		}
		failing = err != nil
	}
}

func (t *Tracker) repairOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RepairEvery)
	defer cancel()
	m, err := t.Check(ctx)
	if err != nil {
		return fmt.Errorf("read the store's key epoch: %w", err)
	}
	if err := t.Sync(ctx, m); err != nil {
		return err
	}
	if t.mirror == nil {
		return nil
	}
	if !t.mirror.cluster {
		return t.mirror.raiseTo(ctx, t.mirror.epochKey(""), m.Epoch)
	}
	return t.repairAccounts(ctx, m)
}

// repairAccounts raises the mirror of every account whose keys changed
// since the last repair (a cluster's); the first repair raises every
// account that ever changed, so that a raise that failed before the
// instance started is repaired too. The raises go in pipelines, which the
// cluster client sends to each primary in one round trip.
func (t *Tracker) repairAccounts(ctx context.Context, m Mark) error {
	from := t.mirror.repaired
	if m.Epoch <= from {
		return nil
	}
	changed, err := t.st.KeyChangesSince(ctx, max(from, 0))
	if err != nil {
		return err
	}
	pipe := t.mirror.client.Pipeline()
	ttl := versionTTL.Milliseconds()
	for acct, e := range changed {
		raiseScript.Eval(ctx, pipe, []string{t.mirror.epochKey(acct)}, e, ttl)
		if pipe.Len() >= repairBatch {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	t.mirror.repaired = m.Epoch
	return nil
}

// repairBatch bounds the raises sent in one pipeline.
const repairBatch = 500
