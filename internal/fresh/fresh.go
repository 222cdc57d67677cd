// Package fresh keeps what an instance holds in memory fresh: the keys
// authentication holds (internal/keys) and the agent-list pages
// (internal/agents). It is the one owner of the machinery: the key epoch's
// check (Check), the accounts whose keys changed (Sync, Holder), the
// epoch's mirror in Redis and each account's agent-list version (Guard,
// ListKey), and what a commit that changed keys or agents makes happen
// (Committed). The store raises the epoch in the transaction of every
// write that can change a held key or page (store.Tx); nothing else has
// to remember to.
//
// What it promises, and the bounds when Redis cannot be told, are in
// docs/production.md ("Key epochs", "One Redis round trip per request",
// "Agent lists from memory", "Redis Cluster").
package fresh

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/store"
)

// Tracker keeps one instance's held copies fresh for one database.
type Tracker struct {
	st    *store.Store
	log   *slog.Logger
	watch *sqliteWatch // SQLite's check; nil on PostgreSQL
	// read is the check itself (readEpoch; tests replace it).
	read func(context.Context) (Mark, error)

	checks checker
	// seen is the highest key epoch this instance has learned of: from
	// its checks and its own commits.
	seen atomic.Int64

	// syncMu admits one Sync at a time; synced (written under it) is the
	// epoch up to which every holder has dropped what changed.
	syncMu  sync.Mutex
	synced  atomic.Int64
	holders []Holder

	// agentWrites counts the commits through this store that changed
	// agents, in agentWriteShares shares by account (AgentWrites).
	agentWrites [agentWriteShares]atomic.Uint64

	mirror *mirror // nil without Redis
}

// Options are a Tracker's optional parts.
type Options struct {
	// Redis is the client the epoch's mirror and the agent-list versions
	// live on (a Redis Cluster's too); nil: none.
	Redis redis.UniversalClient
	// StoreID names them (bytes every instance on the database reads
	// alike: the MirrorSecret server secret, Open), so that databases
	// sharing one Redis never share a mirror.
	StoreID []byte
	// Log receives what could not be told to Redis; nil: discarded.
	Log *slog.Logger
	// RaiseTimeout bounds each raise and version set; zero: RaiseTimeout.
	RaiseTimeout time.Duration
}

// MirrorSecret is the name of the server secret (store.Secret) whose bytes
// name a database's mirror and versions: every instance and operator
// command on that database reads the same.
const MirrorSecret = "key-epoch-mirror"

// New returns st's tracker, observing its commits (store.Observe): call it
// before the store is used.
func New(st *store.Store, o Options) *Tracker {
	t := &Tracker{st: st, log: cmp.Or(o.Log, slog.New(slog.DiscardHandler))}
	t.synced.Store(-1)
	t.checks.sem = make(chan struct{}, 1)
	t.read = t.readEpoch
	if st.Engine() == store.EngineSQLite {
		t.watch = &sqliteWatch{st: st}
	}
	if o.Redis != nil {
		t.mirror = newMirror(o.Redis, o.StoreID, t.log)
		if o.RaiseTimeout > 0 {
			t.mirror.timeout = o.RaiseTimeout
		}
	}
	st.Observe(t)
	return t
}

// Open is New with Redis (nil: none), the mirror named by the database's
// MirrorSecret.
func Open(ctx context.Context, st *store.Store, client redis.UniversalClient, log *slog.Logger) (*Tracker, error) {
	o := Options{Redis: client, Log: log}
	if client != nil {
		id, err := st.Secret(ctx, MirrorSecret)
		if err != nil {
			return nil, fmt.Errorf("key epoch mirror: %w", err)
		}
		o.StoreID = id
	}
	return New(st, o), nil
}

// Close releases the SQLite check's connection, waiting for a check in
// progress; checks after it open a new one.
func (t *Tracker) Close() {
	if t.watch == nil {
		return
	}
	t.checks.sem <- struct{}{}
	t.watch.reset()
	<-t.checks.sem
}

// noteSeen raises seen to epoch.
func (t *Tracker) noteSeen(epoch int64) {
	for {
		cur := t.seen.Load()
		if epoch <= cur || t.seen.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

// A Holder holds copies that a change to an account's keys makes wrong
// (internal/keys' key cache).
type Holder interface {
	// Forget drops what is held of the accounts in changed (of every
	// account when all); what is held from then on is current as of the
	// key epoch synced.
	Forget(changed store.KeyChanges, all bool, synced int64)
}

// Hold makes Sync tell h what changed; h starts synced with the others.
func (t *Tracker) Hold(h Holder) {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	t.holders = append(t.holders, h)
	h.Forget(nil, true, t.synced.Load())
}

// Sync brings every holder to the check m: the copies of every account
// whose keys changed since the last Sync are dropped, or every copy when
// a change names no account (Mark.Legacy) or nothing was synced yet.
func (t *Tracker) Sync(ctx context.Context, m Mark) error {
	if m.Epoch <= t.synced.Load() {
		return nil // the common case: nothing changed
	}
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	from := t.synced.Load()
	if m.Epoch <= from {
		return nil
	}
	var changed store.KeyChanges
	all := from < 0 || m.Legacy > from
	if !all {
		var err error
		if changed, err = t.st.KeyChangesSince(ctx, from); err != nil {
			return fmt.Errorf("key changes: %w", err)
		}
	}
	for _, h := range t.holders {
		h.Forget(changed, all, m.Epoch)
	}
	t.synced.Store(m.Epoch)
	return nil
}

// Committed is what the store tells the tracker after each commit that
// changed keys or agents (store.Observer): the epoch is noted, and Redis
// told (the mirror raised, the account's list version set) before the
// write returns, so that every instance sees the change on its very next
// request. A failure to tell Redis does not undo the commit: it is logged
// and counted, the Report in ctx (WithReport) receives it, and the bounds
// of docs/production.md hold.
func (t *Tracker) Committed(ctx context.Context, c store.Commit) {
	t.noteSeen(c.KeyEpoch)
	for _, acct := range c.AgentAccounts {
		t.agentWrites[agentWriteShare(acct)].Add(1)
	}
	if t.mirror == nil {
		return
	}
	if c.KeyEpoch > 0 {
		if err := t.mirror.raise(ctx, c.KeyAccounts, c.KeyEpoch); err != nil {
			if r, _ := ctx.Value(reportKey{}).(*Report); r != nil {
				r.set(err)
			}
		}
	}
	for _, acct := range c.AgentAccounts {
		_ = t.mirror.newVersion(ctx, acct)
	}
}

// Report receives the failure to raise the mirror after a commit, for a
// writer that must say so (the console shows a warning).
type Report struct {
	mu  sync.Mutex
	err error
}

type reportKey struct{}

// WithReport returns ctx carrying a report that the writes made under it
// fill when they could not raise the mirror.
func WithReport(ctx context.Context) (context.Context, *Report) {
	r := &Report{}
	return context.WithValue(ctx, reportKey{}, r), r
}

func (r *Report) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Err is the last failure to raise the mirror, nil when none.
func (r *Report) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// agentWriteShares is how many counts AgentWrites keeps: an account's
// write moves the count of its share only, so one busy writer does not
// make every other account's held list pages read again.
const agentWriteShares = 64

// AgentWrites counts the commits through this store that changed the
// agents of accountID or of an account sharing its count, each counted
// once it committed.
func (t *Tracker) AgentWrites(accountID string) uint64 {
	return t.agentWrites[agentWriteShare(accountID)].Load()
}

func agentWriteShare(accountID string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(accountID))
	return h.Sum32() % agentWriteShares
}
