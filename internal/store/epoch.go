package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
)

// The key epoch and the change signal are what callers that hold what
// they read (keys' key cache, agents' list cache) ask the store before
// using it: a check that started after their call began says whether
// anything they hold may have changed.
//
// Every write that can make a held key wrong bumps key_epoch in its own
// transaction (bumpKeyEpoch). The check that reads it must be cheap:
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
// already completed. Under load this turns many checks into few. The
// sharing lives here, with the one connection SQLite's check owns, because
// it is also what lets that connection serve one check at a time.
type checker struct {
	// sem admits one check at a time; checkSeq numbers the checks started,
	// doneSeq and doneMark (guarded by sem) are those of the last check
	// that succeeded. hungGen counts the checks that gave up on a store
	// that did not answer within AuthReadTimeout, hungErr (guarded by sem)
	// is the last one's error.
	sem      chan struct{}
	checkSeq atomic.Uint64
	doneSeq  uint64
	doneMark Mark
	hungGen  atomic.Uint64
	hungErr  error
	checks   atomic.Uint64

	// seen is the highest key epoch this store has learned of: from its
	// checks (lookups, the mirror's repair) and its own writes (noteSeen).
	seen atomic.Int64

	// notifier raises the epoch's mirror after a bump; lists announces
	// every change of agents (SetEpochNotifier, SetListNotifier).
	notifier EpochNotifier
	lists    ListNotifier
	// agentWrites counts the commits through this store that changed
	// agents, in agentWriteShares shares by account (AgentWrites).
	agentWrites [agentWriteShares]atomic.Uint64
}

// agentWriteShares is how many counts AgentWrites keeps: an account's
// write moves the count of its share only, so one busy writer does not
// make every other account's held list pages read again.
const agentWriteShares = 64

// Mark is what one check learned: the key epoch and, on SQLite, a token
// that changes whenever anything commits to the database; ChangeOK is
// false where there is no such token.
type Mark struct {
	Epoch    int64
	Change   ChangeToken
	ChangeOK bool
	// Legacy is the highest key epoch raised by a writer that records no
	// account (an instance of 1.2 during a rolling upgrade): a holder that
	// read the account changes only up to below it must drop every key it
	// holds (KeyChangesSince).
	Legacy int64
}

// ChangeToken is a SQLite data_version together with the number of the
// watch's connection it was read on (data_version is per connection).
type ChangeToken struct{ Conn, DataVersion int64 }

// Check returns what a check that started after this call began found,
// running one when no such check has completed.
func (s *Store) Check(ctx context.Context) (Mark, error) {
	return s.checker.current(ctx, s.check)
}

func (c *checker) current(ctx context.Context, check func(context.Context) (Mark, error)) (Mark, error) {
	ticket, gen := c.checkSeq.Load(), c.hungGen.Load()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return Mark{}, ctx.Err()
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
		return Mark{}, c.hungErr
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
		return Mark{}, fmt.Errorf("key epoch: %w", err)
	}
	c.doneSeq, c.doneMark = n, m
	c.noteSeen(m.Epoch)
	return m, nil
}

// Checks counts the checks run since the store opened (shared by
// concurrent callers).
func (s *Store) Checks() uint64 { return s.checker.checks.Load() }

// noteSeen raises seen to epoch.
func (c *checker) noteSeen(epoch int64) {
	for {
		cur := c.seen.Load()
		if epoch <= cur || c.seen.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

// SeenKeyEpoch is the highest key epoch this store has learned of, from
// its checks (lookups, CurrentKeyEpoch: the mirror's repair) and its own
// commits. A key held under a lower epoch is stale whatever the mirror
// says: a Redis that went back to exactly the held epoch (a replica
// promoted with an older copy) is not believed.
func (s *Store) SeenKeyEpoch() int64 { return s.checker.seen.Load() }

// CurrentKeyEpoch reads the store's key epoch (a check that started after
// the call began, shared with concurrent lookups).
func (s *Store) CurrentKeyEpoch(ctx context.Context) (int64, error) {
	m, err := s.Check(ctx)
	return m.Epoch, err
}

// check reads the current key epoch and, on SQLite, the change token.
func (s *Store) check(ctx context.Context) (Mark, error) {
	if s.engine == EnginePostgres {
		ctx, cancel := s.authRead(ctx)
		defer cancel()
		var m Mark
		if err := s.epochStmt.QueryRowContext(ctx).Scan(&m.Epoch, &m.Legacy); err != nil {
			return Mark{}, fmt.Errorf("read key epoch: %w", hung(ctx, err))
		}
		return m, nil
	}
	return s.watch.check(ctx)
}

// AuthReadTimeout bounds each PostgreSQL read that authentication makes
// (the key epoch, a key): a server that stops answering without closing
// its connections (a stopped process, a hung host) then costs a request a
// 500 after this long, rather than the request's whole bound; a healthy
// one answers these reads in milliseconds. Checks queued behind one that
// gave up fail with it (Store.Check), so a hung server costs no
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

// The key epoch numbers the changes; each is recorded against its account
// (migration 0020). keyEpochSQL's second column is Mark.Legacy: the epoch
// itself when the last change was made by a writer that records no
// account, else the last such change.
const (
	keyEpochSQL = `SELECT epoch, CASE WHEN per_account = epoch THEN legacy ELSE epoch END
		FROM key_epoch WHERE id = 1`
	bumpKeyEpochSQL = `UPDATE key_epoch SET epoch = epoch + 1,
		legacy = CASE WHEN per_account = epoch THEN legacy ELSE epoch END,
		per_account = epoch + 1
		WHERE id = 1 RETURNING epoch`
	accountKeyEpochSQL = `INSERT INTO account_key_epochs (account_id, epoch) VALUES ($1, $2)
		ON CONFLICT (account_id) DO UPDATE SET epoch = excluded.epoch`
	keyChangesSQL = `SELECT account_id, epoch FROM account_key_epochs WHERE epoch > $1`
)

// bumpKeyEpoch makes every instance drop the keys it holds of accountID;
// it runs in the transaction of each write that can change what a held key
// says: a key's revocation or rate limit, an account's active flag. Any
// new write of that kind must call it. The transaction must be run by
// inTx, which tells the EpochNotifier the new epoch once it commits.
//
// The database's key epoch moves too: it numbers the changes, and an
// instance of 1.2 (a rolling upgrade) drops every key it holds when it
// moves, as it always did (docs/production.md, Key epochs).
func bumpKeyEpoch(ctx context.Context, tx *Tx, accountID string) error {
	if err := tx.QueryRowContext(ctx, bumpKeyEpochSQL).Scan(&tx.epoch); err != nil {
		return fmt.Errorf("bump key epoch: %w", err)
	}
	if _, err := tx.ExecContext(ctx, accountKeyEpochSQL, accountID, tx.epoch); err != nil {
		return fmt.Errorf("bump account key epoch: %w", err)
	}
	tx.bumped = true
	return nil
}

// KeyChanges is what KeyChangesSince read: the accounts whose keys changed
// after its since, each with the key epoch of its last change.
type KeyChanges map[string]int64

// KeyChangesSince reads the accounts whose keys changed at a key epoch
// above since. A caller that checked (Check) and found Mark.Epoch above
// since then knows every account that changed up to Mark.Epoch, unless
// Mark.Legacy is above since: a change then names no account.
func (s *Store) KeyChangesSince(ctx context.Context, since int64) (KeyChanges, error) {
	ctx, cancel := s.authRead(ctx)
	defer cancel()
	rows, err := s.r.QueryContext(ctx, keyChangesSQL, since)
	if err != nil {
		return nil, fmt.Errorf("read key changes: %w", hung(ctx, err))
	}
	defer rows.Close()
	ch := KeyChanges{}
	for rows.Next() {
		var acct string
		var epoch int64
		if err := rows.Scan(&acct, &epoch); err != nil {
			return nil, fmt.Errorf("read key changes: %w", err)
		}
		ch[acct] = epoch
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read key changes: %w", hung(ctx, err))
	}
	return ch, nil
}

// sqliteWatch is the SQLite epoch check: one dedicated read-only connection
// whose PRAGMA data_version changes when any other connection commits.
// Its methods run one at a time (Store.Check serialises them).
//
// It uses the driver's own connection and statements (sql.Conn.Raw):
// through database/sql most of the pragma's cost was database/sql's
// bookkeeping and the driver's cancellation goroutine rather than SQLite's
// work. BenchmarkKeyAuthPath in internal/keys/keycache_test.go shows the
// check ("epoch check") against the read it saves ("read").
type sqliteWatch struct {
	db *sql.DB

	conn        *sql.Conn
	connNo      int64 // numbers conn, for ChangeToken
	dvStmt      driver.StmtQueryContext
	epochStmt   driver.StmtQueryContext
	row         []driver.Value
	second      int64 // readInt's second column
	dataVersion int64
	epochNow    int64
	legacyNow   int64
	known       bool // dataVersion and epochNow were read on conn
}

// check returns the key epoch and the change token: the connection's
// data_version, which moves with every commit by any other connection, and
// this connection never writes.
func (w *sqliteWatch) check(ctx context.Context) (Mark, error) {
	if w.conn == nil {
		if err := w.connect(ctx); err != nil {
			return Mark{}, err
		}
	}
	err := w.conn.Raw(func(any) error {
		dv, err := w.readInt(w.dvStmt, w.row[:1])
		if err != nil {
			return fmt.Errorf("read data_version: %w", err)
		}
		if w.known && dv == w.dataVersion {
			return nil
		}
		// Read after data_version: a commit between the two reads moves
		// data_version again, so the next check reads the epoch again.
		epoch, err := w.readInt(w.epochStmt, w.row)
		if err != nil {
			return fmt.Errorf("read key epoch: %w", err)
		}
		w.dataVersion, w.epochNow, w.legacyNow, w.known = dv, epoch, w.second, true
		return nil
	})
	if err != nil {
		w.reset()
		return Mark{}, err
	}
	return Mark{Epoch: w.epochNow, Legacy: w.legacyNow, Change: ChangeToken{Conn: w.connNo, DataVersion: w.dataVersion}, ChangeOK: true}, nil
}

// readInt runs a statement returning one row of integers, the first of
// which it returns; a second, when there is one, is left in second. It passes no cancellable
// context on purpose: with one, the driver starts a goroutine per statement
// to watch it, which would cost more than the statement. Neither statement
// waits on anything but busy_timeout.
func (w *sqliteWatch) readInt(st driver.StmtQueryContext, row []driver.Value) (int64, error) {
	rows, err := st.QueryContext(context.Background(), nil)
	if err != nil {
		return 0, err
	}
	err = rows.Next(row)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	v, ok := row[0].(int64)
	if !ok {
		return 0, fmt.Errorf("not an integer: %T", row[0])
	}
	if len(row) > 1 {
		if w.second, ok = row[1].(int64); !ok {
			return 0, fmt.Errorf("not an integer: %T", row[1])
		}
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
	w.row = make([]driver.Value, 2)
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

// EpochNotifier is told the key epoch after every commit that bumped it,
// before the write returns: it raises the epoch's mirror in Redis
// (ratelimit.Mirror), so that instances holding keys in memory learn of
// the change on their very next request (docs/production.md). It is the
// one place where every writer (serve's API and console, the operator
// commands) raises the mirror; none of them does it on its own.
type EpochNotifier interface {
	RaiseEpoch(ctx context.Context, epoch int64) error
}

// SetEpochNotifier makes every write that bumps the key epoch tell n after
// its commit. Call it before the store is used. On PostgreSQL it also
// makes the store Mirrored.
func (s *Store) SetEpochNotifier(n EpochNotifier) { s.checker.notifier = n }

// Mirrored reports that keys held in memory may be used without asking
// the store, provided the caller checks the epoch they are held under
// against the mirror (keys.Authenticator does, in the rate-limit
// decision): PostgreSQL with an EpochNotifier. On SQLite the store's own
// check (PRAGMA data_version) costs less than any round trip and stays.
func (s *Store) Mirrored() bool {
	return s.checker.notifier != nil && s.engine == EnginePostgres
}

// RaiseMirror tells the EpochNotifier epoch (a mirror found behind the
// store: Redis lost it or went back to an older copy).
func (s *Store) RaiseMirror(ctx context.Context, epoch int64) error {
	if s.checker.notifier == nil {
		return nil
	}
	return s.checker.notifier.RaiseEpoch(ctx, epoch)
}

// afterBump tells the notifier epoch, which a transaction that committed
// set (inTx). Its failure does not undo the commit: the report in ctx
// (WithEpochReport) receives it, and every instance's repair raises the
// mirror within a second (ratelimit.StaleBound).
func (s *Store) afterBump(ctx context.Context, epoch int64) {
	s.checker.noteSeen(epoch)
	if s.checker.notifier == nil {
		return
	}
	if err := s.checker.notifier.RaiseEpoch(ctx, epoch); err != nil {
		if r, _ := ctx.Value(epochReportKey{}).(*EpochReport); r != nil {
			r.set(err)
		}
	}
}

// EpochReport receives the failure to raise the mirror after a commit,
// for a writer that must say so (the console shows a warning).
type EpochReport struct {
	mu  sync.Mutex
	err error
}

type epochReportKey struct{}

// WithEpochReport returns ctx carrying a report that the writes made
// under it fill when they could not raise the mirror.
func WithEpochReport(ctx context.Context) (context.Context, *EpochReport) {
	r := &EpochReport{}
	return context.WithValue(ctx, epochReportKey{}, r), r
}

func (r *EpochReport) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Err is the last failure to raise the mirror, nil when none.
func (r *EpochReport) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// ListNotifier is told, after every commit that changed an account's
// agents, which account it was (ratelimit.Versions sets a new version).
type ListNotifier interface {
	AgentsChanged(ctx context.Context, accountID string) error
}

// SetListNotifier makes every write of agents tell n the account after its
// commit, which lets agents' list cache answer pages asked for under a
// version (AgentWrites). Call it before the store is used.
func (s *Store) SetListNotifier(n ListNotifier) { s.checker.lists = n }

// AgentWrites counts the commits through this store that changed the
// agents of accountID or of an account sharing its count (agentWriteShares),
// each counted once it committed; announced reports that a ListNotifier
// tells every other instance of them too.
func (s *Store) AgentWrites(accountID string) (n uint64, announced bool) {
	return s.checker.agentWrites[agentWriteShare(accountID)].Load(), s.checker.lists != nil
}

func agentWriteShare(accountID string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(accountID))
	return h.Sum32() % agentWriteShares
}

// agentsChanged counts a commit that changed the account's agents and
// tells the ListNotifier. The notifier's failure does not undo the
// commit; it logs it, and pages held elsewhere expire within
// agents.ListStaleBound.
func (s *Store) agentsChanged(ctx context.Context, accountID string) {
	s.checker.agentWrites[agentWriteShare(accountID)].Add(1)
	if s.checker.lists != nil {
		_ = s.checker.lists.AgentsChanged(ctx, accountID)
	}
}
