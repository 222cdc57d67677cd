package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// The key cache keeps keys read by KeyByPrefix in memory, so that the
// authentication hot path does not read the key on every request, while
// KeyByPrefix keeps its promise: what it returns is the key as it stands at
// some moment after the call began. Revocation, a rate-limit change and an
// account's (de)activation therefore still apply on the very next request,
// whichever process or instance made them.
//
// How: every write that can make a held key wrong bumps key_epoch in its own
// transaction (bumpKeyEpoch). Each KeyByPrefix first learns the current
// epoch through a check that started after the call began, and uses held
// keys only when they were read under that same epoch. The check is what
// must be cheap:
//
//   - SQLite: PRAGMA data_version on one dedicated connection, which changes
//     exactly when another connection (of this process or any other) has
//     committed; only then is the key_epoch row read. Most requests thus cost
//     one pragma, no table read.
//   - PostgreSQL: one indexed read of key_epoch, a single round trip. There
//     is no cheaper signal that is also immediate: LISTEN/NOTIFY arrives
//     after the commit, so a request at another instance could beat it.
//
// Concurrent callers share checks: a caller waits for a check that started
// after it arrived, and does not start one of its own if such a check has
// already completed. Under load this turns many checks into few.
type keyCache struct {
	max int

	// sem admits one check at a time; checkSeq numbers the checks started,
	// doneSeq and doneMark (guarded by sem) are those of the last check
	// that succeeded. hungGen counts the checks that gave up on a store
	// that did not answer within AuthReadTimeout, hungErr (guarded by sem)
	// is the last one's error.
	sem      chan struct{}
	checkSeq atomic.Uint64
	doneSeq  uint64
	doneMark mark
	hungGen  atomic.Uint64
	hungErr  error

	mu      sync.RWMutex
	epoch   int64 // the epoch under which every entry was read
	entries map[string]cachedKey

	hits, misses, checks, reads atomic.Uint64

	// seen is the highest key epoch this store has learned of: from its
	// checks (lookups, the mirror's repair) and its own writes (noteSeen).
	seen atomic.Int64

	// notifier raises the epoch's mirror after a bump (epochmirror.go).
	notifier EpochNotifier
}

type cachedKey struct {
	key           domain.APIKey
	accountActive bool
}

// keyCacheMax bounds the memory the cache holds (about 520 bytes a key,
// twice that in RSS with the garbage collector's headroom); past it an
// arbitrary entry makes room, which costs its key one store read when it
// comes back. An instance with more keys in use than this is served as
// before the cache for the rest: a read per request.
const keyCacheMax = 20_000

func newKeyCache(max int) *keyCache {
	return &keyCache{max: max, sem: make(chan struct{}, 1), epoch: -1, entries: map[string]cachedKey{}}
}

// mark is what one check learned: the key epoch and, on SQLite, a token
// that changes whenever anything commits to the database (the list cache's
// validity, listcache.go); changeOK is false where there is no such token.
type mark struct {
	epoch    int64
	change   changeToken
	changeOK bool
}

// changeToken is a SQLite data_version together with the number of the
// watch's connection it was read on (data_version is per connection).
type changeToken struct{ conn, dataVersion int64 }

// currentMark returns what a check that started after this call began
// found, running one when no such check has completed.
func (c *keyCache) currentMark(ctx context.Context, check func(context.Context) (mark, error)) (mark, error) {
	ticket, gen := c.checkSeq.Load(), c.hungGen.Load()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return mark{}, ctx.Err()
	}
	defer func() { <-c.sem }()
	// A check numbered above ticket was started after the Load above, so
	// after this call began: whatever committed before it, it has seen.
	if c.doneSeq > ticket {
		return c.doneMark, nil
	}
	// A check that gave up on a store that did not answer while this call
	// waited: the call fails with it, rather than each caller queued
	// behind it waiting AuthReadTimeout in turn. A call that arrives after
	// it runs a check of its own.
	if c.hungGen.Load() > gen {
		return mark{}, c.hungErr
	}
	n := c.checkSeq.Add(1)
	c.checks.Add(1)
	m, err := check(ctx)
	if err != nil {
		// Any other failure is not shared: callers waiting on this check
		// run their own rather than inherit what may be this caller's
		// cancellation.
		if errors.Is(err, ErrStoreHung) {
			c.hungErr = err
			c.hungGen.Add(1)
		}
		return mark{}, err
	}
	c.doneSeq, c.doneMark = n, m
	c.noteSeen(m.epoch)
	return m, nil
}

// noteSeen raises seen to epoch.
func (c *keyCache) noteSeen(epoch int64) {
	for {
		cur := c.seen.Load()
		if epoch <= cur || c.seen.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

func (c *keyCache) get(epoch int64, prefix string) (cachedKey, bool) {
	c.mu.RLock()
	e, ok := c.entries[prefix]
	ok = ok && c.epoch == epoch
	c.mu.RUnlock()
	return e, ok
}

// put holds e, read after a check saw epoch. Entries of an older epoch are
// dropped all at once; an entry read under an older epoch than the cache's
// is not kept (a revocation may have committed since it was read).
func (c *keyCache) put(epoch int64, prefix string, e cachedKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case epoch < c.epoch:
		return
	case epoch > c.epoch:
		clear(c.entries)
		c.epoch = epoch
	}
	if _, held := c.entries[prefix]; !held && len(c.entries) >= c.max {
		for p := range c.entries { // map order is randomised: an arbitrary victim
			delete(c.entries, p)
			break
		}
	}
	c.entries[prefix] = e
}

// KeyCacheStats counts the key cache's work since the store opened.
type KeyCacheStats struct {
	Hits   uint64 // KeyByPrefix answered from memory
	Misses uint64 // KeyByPrefix read the key from the database
	Checks uint64 // epoch checks run (shared by concurrent callers)
	Reads  uint64 // keys read from the database, by lookups or EqualiseRefusal
}

// KeyCacheStats reports the key cache's counters (for metrics and for tests
// that must fail if the cache is bypassed).
func (s *Store) KeyCacheStats() KeyCacheStats {
	c := s.keyCache
	return KeyCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Checks: c.checks.Load(), Reads: c.reads.Load()}
}

// KeyByPrefix is the authentication hot path: the key with that prefix and
// whether its account is active, as they stand at some moment after the
// call began. ErrNotFound when no key has the prefix.
func (s *Store) KeyByPrefix(ctx context.Context, prefix string) (domain.APIKey, bool, error) {
	l, err := s.LookupKey(ctx, prefix)
	return l.Key, l.AccountActive, err
}

// KeyLookup is what LookupKey found: the key and whether its account is
// active. Where it came from stays the store's business; a refusal of it
// is given its price by EqualiseRefusal.
type KeyLookup struct {
	Key           domain.APIKey
	AccountActive bool
	fromMemory    bool
	epoch         int64
}

// Epoch is the key epoch under which the lookup's key was read.
func (l KeyLookup) Epoch() int64 { return l.epoch }

// LookupKey is KeyByPrefix for authentication: a key it returns that is
// then refused goes through EqualiseRefusal.
func (s *Store) LookupKey(ctx context.Context, prefix string) (KeyLookup, error) {
	c := s.keyCache
	m, err := c.currentMark(ctx, s.check)
	if err != nil {
		return KeyLookup{}, fmt.Errorf("key epoch: %w", err)
	}
	epoch := m.epoch
	if e, ok := c.get(epoch, prefix); ok {
		c.hits.Add(1)
		return KeyLookup{Key: e.key, AccountActive: e.accountActive, fromMemory: true, epoch: epoch}, nil
	}
	c.misses.Add(1)
	k, active, err := s.readKeyByPrefix(ctx, prefix)
	if err != nil {
		return KeyLookup{}, err
	}
	// Keyed by the stored prefix, not the caller's string, which may be a
	// slice of a whole request header.
	c.put(epoch, k.Prefix, cachedKey{key: k, accountActive: active})
	return KeyLookup{Key: k, AccountActive: active, epoch: epoch}, nil
}

// EqualiseRefusal gives the refusal of a key found by LookupKey the cost of
// a lookup of an unknown prefix, which always reads the database and finds
// nothing: a key answered from memory is followed by that same read, for
// absentPrefix. Reading the refused key's own row instead costs more
// (scanning and decoding it), enough for a median to tell a known prefix
// from an unknown one: BenchmarkAuthRefusalTiming in internal/api prints
// the medians of both.
func (s *Store) EqualiseRefusal(ctx context.Context, l KeyLookup) error {
	if !l.fromMemory {
		return nil // it read the database already
	}
	if _, _, err := s.readKeyByPrefix(ctx, absentPrefix); err != nil && !errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("read absent key: %w", err)
	}
	return nil
}

// absentPrefix has a prefix's length and a character no prefix has
// (credential.Parse accepts only 0-9 and a-z), so no key is ever found by
// it: reading it costs what reading an unknown prefix costs.
const absentPrefix = "------------"

// check reads the current key epoch and, on SQLite, the change token.
func (s *Store) check(ctx context.Context) (mark, error) {
	if s.engine == EnginePostgres {
		ctx, cancel := s.authRead(ctx)
		defer cancel()
		var epoch int64
		if err := s.epochStmt.QueryRowContext(ctx).Scan(&epoch); err != nil {
			return mark{}, fmt.Errorf("read key epoch: %w", hung(ctx, err))
		}
		return mark{epoch: epoch}, nil
	}
	return s.watch.check(ctx)
}

// AuthReadTimeout bounds each PostgreSQL read that authentication makes
// (the key epoch, a key): a server that stops answering without closing
// its connections (a stopped process, a hung host) then costs a request a
// 500 after this long, rather than the request's whole bound; a healthy
// one answers these reads in milliseconds. Checks queued behind one that
// gave up fail with it (keyCache.currentMark), so a hung server costs no
// request more than about this long. SQLite, a local file, does not hang
// so; its waits are bounded by busy_timeout, and its hot path allocates
// no timer.
const AuthReadTimeout = 2 * time.Second

// ErrStoreHung is the cause of a read given up on after AuthReadTimeout.
var ErrStoreHung = errors.New("the store did not answer in time")

// authRead is ctx bounded by AuthReadTimeout on PostgreSQL, and ctx
// itself on SQLite, for one read that authentication makes.
func (s *Store) authRead(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.engine != EnginePostgres {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, AuthReadTimeout, ErrStoreHung)
}

// hung returns err, or ErrStoreHung wrapping it when ctx's own bound
// (AuthReadTimeout) ended the read.
func hung(ctx context.Context, err error) error {
	if context.Cause(ctx) == ErrStoreHung {
		return fmt.Errorf("%w: %w", ErrStoreHung, err)
	}
	return err
}

const (
	keyEpochSQL     = `SELECT epoch FROM key_epoch WHERE id = 1`
	bumpKeyEpochSQL = `UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch`
)

// bumpKeyEpoch makes every instance drop the keys it holds; it runs in the
// transaction of each write that can change what a held key says: a key's
// revocation or rate limit, an account's active flag. Any new write of that
// kind must call it. The transaction must be run by inTx, which tells
// the EpochNotifier the new epoch once it commits.
func bumpKeyEpoch(ctx context.Context, tx *Tx) error {
	if err := tx.QueryRowContext(ctx, bumpKeyEpochSQL).Scan(&tx.epoch); err != nil {
		return fmt.Errorf("bump key epoch: %w", err)
	}
	tx.bumped = true
	return nil
}

// sqliteWatch is the SQLite epoch check: one dedicated read-only connection
// whose PRAGMA data_version changes when any other connection commits.
// Its methods run one at a time (keyCache.currentEpoch serialises them).
//
// It uses the driver's own connection and statements (sql.Conn.Raw):
// through database/sql most of the pragma's cost was database/sql's
// bookkeeping and the driver's cancellation goroutine rather than SQLite's
// work. BenchmarkKeyAuthPath in internal/store/keycache_test.go shows the
// check ("epoch check") against the read it saves ("read").
type sqliteWatch struct {
	db *sql.DB

	conn        *sql.Conn
	connNo      int64 // numbers conn, for changeToken
	dvStmt      driver.StmtQueryContext
	epochStmt   driver.StmtQueryContext
	row         []driver.Value
	dataVersion int64
	epochNow    int64
	known       bool // dataVersion and epochNow were read on conn
}

// check returns the key epoch and the change token: the connection's
// data_version, which moves with every commit by any other connection, and
// this connection never writes.
func (w *sqliteWatch) check(ctx context.Context) (mark, error) {
	if w.conn == nil {
		if err := w.connect(ctx); err != nil {
			return mark{}, err
		}
	}
	err := w.conn.Raw(func(any) error {
		dv, err := w.readInt(w.dvStmt)
		if err != nil {
			return fmt.Errorf("read data_version: %w", err)
		}
		if w.known && dv == w.dataVersion {
			return nil
		}
		// Read after data_version: a commit between the two reads moves
		// data_version again, so the next check reads the epoch again.
		epoch, err := w.readInt(w.epochStmt)
		if err != nil {
			return fmt.Errorf("read key epoch: %w", err)
		}
		w.dataVersion, w.epochNow, w.known = dv, epoch, true
		return nil
	})
	if err != nil {
		w.reset()
		return mark{}, err
	}
	return w.mark(), nil
}

func (w *sqliteWatch) mark() mark {
	return mark{epoch: w.epochNow, change: changeToken{conn: w.connNo, dataVersion: w.dataVersion}, changeOK: true}
}

// readInt runs a statement returning one integer. It passes no cancellable
// context on purpose: with one, the driver starts a goroutine per statement
// to watch it, which would cost more than the statement. Neither statement
// waits on anything but busy_timeout.
func (w *sqliteWatch) readInt(st driver.StmtQueryContext) (int64, error) {
	rows, err := st.QueryContext(context.Background(), nil)
	if err != nil {
		return 0, err
	}
	err = rows.Next(w.row)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	v, ok := w.row[0].(int64)
	if !ok {
		return 0, fmt.Errorf("not an integer: %T", w.row[0])
	}
	return v, nil
}

func (w *sqliteWatch) connect(ctx context.Context) error {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("key epoch connection: %w", err)
	}
	var dv, ep driver.StmtQueryContext
	err = conn.Raw(func(c any) error {
		dc, ok := c.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("sqlite driver connection is %T", c)
		}
		prep := func(q string) (driver.StmtQueryContext, error) {
			st, err := dc.PrepareContext(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("prepare %q: %w", q, err)
			}
			sq, ok := st.(driver.StmtQueryContext)
			if !ok {
				st.Close()
				return nil, fmt.Errorf("sqlite statement is %T", st)
			}
			return sq, nil
		}
		if dv, err = prep(`PRAGMA data_version`); err != nil {
			return err
		}
		if ep, err = prep(keyEpochSQL); err != nil {
			dv.(driver.Stmt).Close()
			return err
		}
		return nil
	})
	if err != nil {
		conn.Close()
		return err
	}
	w.conn, w.dvStmt, w.epochStmt, w.known = conn, dv, ep, false
	w.connNo++
	w.row = make([]driver.Value, 1)
	return nil
}

// reset drops the connection after an error; data_version is per
// connection, so the next one starts from an unknown value.
func (w *sqliteWatch) reset() {
	if w.conn == nil {
		return
	}
	// The statements belong to the driver's connection; reporting it bad
	// makes database/sql close it rather than pool it.
	_ = w.conn.Raw(func(any) error {
		w.dvStmt.(driver.Stmt).Close()
		w.epochStmt.(driver.Stmt).Close()
		return driver.ErrBadConn
	})
	w.conn.Close()
	w.conn, w.dvStmt, w.epochStmt, w.known = nil, nil, nil, false
}

func (w *sqliteWatch) close() error {
	w.reset()
	return w.db.Close()
}
