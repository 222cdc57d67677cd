package fresh

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/agentapi/agentapi/internal/store"
)

// Mark is what one check learned: the key epoch, the highest epoch raised
// by a writer that records no account (Legacy: an instance of 1.2 during
// a rolling upgrade, whose change names no account), and, on SQLite, a
// token that changes whenever anything commits to the database (ChangeOK
// is false where there is none).
type Mark struct {
	Epoch    int64
	Legacy   int64
	Change   ChangeToken
	ChangeOK bool
}

// ChangeToken is a SQLite data_version together with the number of the
// watch's connection it was read on (data_version is per connection).
type ChangeToken struct{ Conn, DataVersion int64 }

// The check that reads the key epoch must be cheap:
//
//   - SQLite: PRAGMA data_version on one dedicated connection, which changes
//     exactly when another connection (of this process or any other) has
//     committed; only then is the key epoch read. Most requests thus cost
//     one pragma, no table read.
//   - PostgreSQL: one indexed read of the key epoch, a single round trip.
//     There is no cheaper signal that is also immediate: LISTEN/NOTIFY
//     arrives after the commit, so a request at another instance could
//     beat it.
//
// Concurrent callers share checks: a caller waits for a check that started
// after it arrived, and does not start one of its own if such a check has
// already completed. Under load this turns many checks into few; it is
// also what lets SQLite's one connection serve one check at a time.
type checker struct {
	// sem admits one check at a time; seq numbers the checks started,
	// doneSeq and doneMark (guarded by sem) are those of the last check
	// that succeeded. hungGen counts the checks that gave up on a store
	// that did not answer within store.AuthReadTimeout, hungErr (guarded
	// by sem) is the last one's error.
	sem      chan struct{}
	seq      atomic.Uint64
	doneSeq  uint64
	doneMark Mark
	hungGen  atomic.Uint64
	hungErr  error
	count    atomic.Uint64
}

// Check returns what a check that started after this call began found,
// running one when no such check has completed.
func (t *Tracker) Check(ctx context.Context) (Mark, error) {
	c := &t.checks
	ticket, gen := c.seq.Load(), c.hungGen.Load()
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
	// behind it waiting AuthReadTimeout in turn.
	if c.hungGen.Load() > gen {
		return Mark{}, c.hungErr
	}
	n := c.seq.Add(1)
	c.count.Add(1)
	m, err := t.read(ctx)
	if err != nil {
		// Any other failure is not shared: callers waiting on this check
		// run their own rather than inherit what may be this caller's
		// cancellation.
		if errors.Is(err, store.ErrStoreHung) {
			c.hungErr = err
			c.hungGen.Add(1)
		}
		return Mark{}, fmt.Errorf("key epoch: %w", err)
	}
	c.doneSeq, c.doneMark = n, m
	t.noteSeen(m.Epoch)
	return m, nil
}

// Checks counts the checks run since the tracker was made (shared by
// concurrent callers).
func (t *Tracker) Checks() uint64 { return t.checks.count.Load() }

// readEpoch reads the key epoch: the SQLite watch, or one read of the
// store.
func (t *Tracker) readEpoch(ctx context.Context) (Mark, error) {
	if t.watch == nil {
		epoch, legacy, err := t.st.ReadKeyEpoch(ctx)
		return Mark{Epoch: epoch, Legacy: legacy}, err
	}
	return t.watch.check(ctx)
}

// sqliteWatch is the SQLite check: one dedicated read-only connection
// (store.WatchConn) whose PRAGMA data_version changes when any other
// connection commits. Its methods run one at a time (Check serialises
// them).
//
// It uses the driver's own connection and statements (sql.Conn.Raw):
// through database/sql most of the pragma's cost was database/sql's
// bookkeeping and the driver's cancellation goroutine rather than SQLite's
// work. BenchmarkKeyAuthPath in internal/keys shows the check ("epoch
// check") against the read it saves ("read").
type sqliteWatch struct {
	st *store.Store

	conn        *sql.Conn
	connNo      int64 // numbers conn, for ChangeToken
	dvStmt      driver.StmtQueryContext
	epochStmt   driver.StmtQueryContext
	row         []driver.Value
	dataVersion int64
	mark        Mark
	known       bool // dataVersion and mark were read on conn
}

// check returns the key epoch and the change token: the connection's
// data_version, which moves with every commit by any other connection, and
// this connection never writes.
func (w *sqliteWatch) check(ctx context.Context) (Mark, error) {
	if w.st.Closed() {
		w.reset()
		return Mark{}, store.ErrClosed
	}
	if w.conn == nil {
		if err := w.connect(ctx); err != nil {
			return Mark{}, err
		}
	}
	err := w.conn.Raw(func(any) error {
		if err := w.read(w.dvStmt); err != nil {
			return fmt.Errorf("read data_version: %w", err)
		}
		dv := w.row[0].(int64)
		if w.known && dv == w.dataVersion {
			return nil
		}
		// Read after data_version: a commit between the two reads moves
		// data_version again, so the next check reads the epoch again.
		if err := w.read(w.epochStmt); err != nil {
			return fmt.Errorf("read key epoch: %w", err)
		}
		w.dataVersion, w.known = dv, true
		w.mark = Mark{Epoch: w.row[0].(int64), Legacy: w.row[1].(int64), ChangeOK: true}
		return nil
	})
	if err != nil {
		w.reset()
		return Mark{}, err
	}
	m := w.mark
	m.Change = ChangeToken{Conn: w.connNo, DataVersion: w.dataVersion}
	return m, nil
}

// read runs a statement returning one row of integers into w.row. It
// passes no cancellable context on purpose: with one, the driver starts a
// goroutine per statement to watch it, which would cost more than the
// statement. Neither statement waits on anything but busy_timeout.
func (w *sqliteWatch) read(st driver.StmtQueryContext) error {
	rows, err := st.QueryContext(context.Background(), nil)
	if err != nil {
		return err
	}
	n := len(rows.Columns())
	err = rows.Next(w.row[:n])
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, v := range w.row[:n] {
		if _, ok := v.(int64); !ok {
			return fmt.Errorf("not an integer: %T", v)
		}
	}
	return nil
}

func (w *sqliteWatch) connect(ctx context.Context) error {
	conn, err := w.st.WatchConn(ctx)
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
		if ep, err = prep(store.KeyEpochQuery); err != nil {
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

// reset drops the connection after an error (or when the tracker closes);
// data_version is per connection, so the next one starts from an unknown
// value.
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
	_ = w.conn.Close()
	w.conn, w.dvStmt, w.epochStmt, w.known = nil, nil, nil, false
}
