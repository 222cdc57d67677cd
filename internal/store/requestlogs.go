package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
)

// Request logs are stored in batches (migration 0012, batchRequestLogs): a
// row of request_log_batches holds up to maxLogsPerBatch logs of one
// account and key whose times fall in one second, as a blob (logbatch.go).
// A row a log cost 4.2–5.8 µs of CPU a log in the service's own process on
// SQLite (BenchmarkWriteUsage/serve/sqlite): a B-tree insert and twelve
// binds each, most of recording's cost to GET /v1/me (bench/RESULTS.md).
// A batch costs one insert for hundreds of logs: about 1 µs a log, most of
// it packing. On SQLite the table is WITHOUT ROWID, its small columns
// before the blob, so a scan that tests key_id and classes reads no blob:
// as a rowid table, whose primary key index sent every row to the table, a
// filter matching none of 100,000 logs took 65 ms (BenchmarkLogsPage
// key-and-500), and 23 ms as it is.
//
// Reading keeps the Logs page's order, (at, id) newest first: every log of
// second s is newer than every log of second s-1, so a page reads the
// account's batches second by second, newest first (the primary key
// (account_id, sec, seq)), sorts each second's matching logs, and stops
// once it has a page. The key and class filters skip batches by their
// columns; the rest are tested on each log as it is unpacked.
//
// A batch is written in one transaction with the counts; a batch whose
// commit failed after it was saved (a lost acknowledgement) may be written
// again: the reader drops a log it meets twice in one second.

// logBatchDDL is request_log_batches on each engine; only the blob's type
// differs.
const logBatchDDL = `CREATE TABLE request_log_batches (
	account_id TEXT NOT NULL,
	sec        BIGINT NOT NULL, -- the second its logs fall in (Unix seconds)
	seq        BIGINT NOT NULL, -- random: tells apart the batches of one second
	key_id     TEXT NOT NULL,
	n          INTEGER NOT NULL, -- logs held
	classes    INTEGER NOT NULL, -- the bit of each class held: 1 2xx, 2 4xx, 4 429, 8 5xx
	logs       %s NOT NULL, -- the logs, packed (logbatch.go)
	PRIMARY KEY (account_id, sec, seq)
)%s`

// batchRequestLogs is migration 0012: request_logs' rows become batches,
// and the table goes. The rows are read in (account_id, at, id) order a
// chunk at a time, so memory stays bounded whatever the table holds.
func batchRequestLogs(ctx context.Context, tx *sql.Tx, engine string) error {
	blob, table := "BLOB", " WITHOUT ROWID"
	if engine == EnginePostgres {
		blob, table = "BYTEA", ""
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(logBatchDDL, blob, table)); err != nil {
		return fmt.Errorf("create request_log_batches: %w", err)
	}
	chunk := logMigrationChunk
	var last struct {
		acct, id string
		at       int64
	}
	for first := true; ; first = false {
		q := `SELECT id, account_id, key_id, at, method, route, path, status, error_code, duration_us, client FROM request_logs`
		args := []any{}
		if !first {
			q += ` WHERE (account_id, at, id) > ($1, $2, $3)`
			args = append(args, last.acct, last.at, last.id)
		}
		rows, err := tx.QueryContext(ctx, q+fmt.Sprintf(` ORDER BY account_id, at, id LIMIT %d`, chunk), args...)
		logs, err := collect("read request_logs", rows, err, func(r *sql.Rows) (l requestlog.Log, err error) {
			var at, us int64
			err = r.Scan(&l.ID, &l.AccountID, &l.KeyID, &at, &l.Method, &l.Route, &l.Path, &l.Status, &l.ErrorCode, &us, &l.Client)
			l.At, l.Duration = fromMS(at), time.Duration(us)*time.Microsecond
			last.acct, last.at, last.id = l.AccountID, at, l.ID
			return l, err
		})
		if err != nil {
			return err
		}
		if err := insertLogBatches(ctx, tx, engine, requestlog.Pack(logs).Batches()); err != nil {
			return err
		}
		if len(logs) < chunk {
			break
		}
	}
	_, err := tx.ExecContext(ctx, `DROP TABLE request_logs`)
	return err
}

// logMigrationChunk is how many rows of request_logs migration 0012 reads
// at a time.
var logMigrationChunk = 5000

// insertLogBatches writes batches: on PostgreSQL in one statement of array
// parameters, whatever their number; on SQLite, in this process, through
// one prepared statement.
func insertLogBatches(ctx context.Context, tx *sql.Tx, engine string, batches []requestlog.Batch) error {
	if len(batches) == 0 {
		return nil
	}
	if engine == EnginePostgres {
		n := len(batches)
		accts, keys, blobs := make([]string, n), make([]string, n), make([][]byte, n)
		secs, seqs, ns, classes := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		for i, b := range batches {
			accts[i], keys[i], blobs[i] = b.AccountID, b.KeyID, b.Blob
			secs[i], seqs[i], ns[i], classes[i] = b.Sec, rand.Int64(), int64(b.N), int64(b.Classes)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO request_log_batches (account_id, sec, seq, key_id, n, classes, logs)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::int[], $6::int[], $7::bytea[])`,
			accts, secs, seqs, keys, ns, classes, blobs); err != nil {
			return fmt.Errorf("insert request logs: %w", err)
		}
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO request_log_batches (account_id, sec, seq, key_id, n, classes, logs) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare request logs: %w", err)
	}
	defer stmt.Close()
	for _, b := range batches {
		if _, err := stmt.ExecContext(ctx, b.AccountID, b.Sec, rand.Int64(), b.KeyID, b.N, b.Classes, b.Blob); err != nil {
			return fmt.Errorf("insert request logs: %w", err)
		}
	}
	return nil
}

// RequestLogQuery selects a page of an account's request logs, newest first.
type RequestLogQuery struct {
	AccountID string
	KeyID     string // "" for every key
	Class     string // one of requestlog.Classes, or ""
	Status    int    // an exact status, or 0
	Route     string // an exact route pattern, or ""
	RequestID string // the one request with this id, or ""
	From, To  time.Time
	After     Cursor
	Limit     int
}

// RequestLogPage returns up to q.Limit logs and the cursor of the next page.
// The search by request id first reads the one second the id carries
// (domain.RequestIDTime), which is its log's; an id that carries none, or
// another (an older release's ids were random), is then looked for among
// all the account's logs.
func (s *Store) RequestLogPage(ctx context.Context, q RequestLogQuery) ([]requestlog.Log, Cursor, error) {
	if !storable(q.AccountID, q.KeyID, q.Class, q.Route, q.RequestID) || q.Limit <= 0 {
		return nil, Cursor{}, nil
	}
	if at, ok := domain.RequestIDTime(q.RequestID); ok {
		if logs, next, err := s.requestLogPage(ctx, q, at); err != nil || len(logs) > 0 {
			return logs, next, err
		}
	}
	return s.requestLogPage(ctx, q, time.Time{})
}

// A page's first query reads firstRead batches; a page reads on only when
// they held too few matching logs, each query twice as many as the last, up
// to maxRead, so that a filter matching few logs takes a few queries, not
// thousands.
const (
	firstRead = 32
	maxRead   = 1024
)

// requestLogPage reads the page q asks for, among the logs of time at
// only when at is not zero: batches newest first, a few more each query
// (batchQuery), each log tested by the filter (newLogFilter) and each
// second's through a top-N (requestlog.Page).
func (s *Store) requestLogPage(ctx context.Context, q RequestLogQuery, at time.Time) ([]requestlog.Log, Cursor, error) {
	if q.Status != 0 {
		q.Class = requestlog.ClassOf(q.Status)
	}
	f, ok := newLogFilter(q, at)
	if !ok {
		return nil, Cursor{}, nil
	}
	pg := requestlog.NewPage(&f)
	var from batchPos
	for per := firstRead; ; per = min(2*per, maxRead) {
		n, err := s.readBatches(ctx, batchQuery(&f, from, per), func(sec, seq int64, keyID string, blob []byte) (bool, error) {
			from = batchPos{sec: sec, seq: seq, set: true}
			return pg.Take(sec, keyID, blob)
		})
		if err != nil {
			return nil, Cursor{}, err
		}
		if pg.Full() || n < per {
			break
		}
	}
	logs, more := pg.Result()
	if !more {
		return logs, Cursor{}, nil
	}
	last := logs[len(logs)-1]
	return logs, Cursor{CreatedAt: last.At, ID: last.ID}, nil
}

// newLogFilter is q's test of a log, limited to time at when it is not
// zero; false when no log can pass it.
func newLogFilter(q RequestLogQuery, at time.Time) (requestlog.Filter, bool) {
	f := requestlog.Filter{AccountID: q.AccountID, KeyID: q.KeyID, Class: q.Class, Route: q.Route, RequestID: q.RequestID,
		Status: q.Status, Lo: requestlog.MinMS, Hi: requestlog.MaxMS, Limit: q.Limit}
	if !q.From.IsZero() {
		f.Lo = toMS(q.From)
	}
	if !q.To.IsZero() {
		f.Hi = toMS(q.To)
	}
	if !at.IsZero() {
		f.Lo, f.Hi = max(f.Lo, toMS(at)), min(f.Hi, toMS(at)+1)
	}
	if !q.After.IsZero() {
		f.AfterAt, f.AfterID, f.HasAfter = toMS(q.After.CreatedAt), q.After.ID, true
		f.Hi = min(f.Hi, f.AfterAt+1)
	}
	return f, f.Lo < f.Hi
}

// batchPos is the last batch a page read, by primary key.
type batchPos struct {
	sec, seq int64
	set      bool
}

// batchQuery reads the next per batches after from that may hold logs f
// keeps: the key and class filters test the batches' columns.
func batchQuery(f *requestlog.Filter, from batchPos, per int) *builder {
	var b builder
	b.add(`SELECT sec, seq, key_id, logs FROM request_log_batches WHERE account_id = ` + b.arg(f.AccountID))
	b.add(` AND sec >= ` + b.arg(requestlog.FloorSec(f.Lo)) + ` AND sec <= ` + b.arg(requestlog.FloorSec(f.Hi-1)))
	if f.KeyID != "" {
		b.add(` AND key_id = ` + b.arg(f.KeyID))
	}
	if f.Class != "" {
		b.add(` AND (classes & ` + b.arg(requestlog.ClassBit(f.Class)) + `) <> 0`)
	}
	if from.set {
		b.add(` AND (sec, seq) < (` + b.arg(from.sec) + `, ` + b.arg(from.seq) + `)`)
	}
	b.add(` ORDER BY sec DESC, seq DESC LIMIT ` + b.arg(per))
	return &b
}

// readBatches runs b and hands each row to fn until fn returns false; n is
// the rows read.
func (s *Store) readBatches(ctx context.Context, b *builder, fn func(sec, seq int64, keyID string, blob []byte) (bool, error)) (n int, err error) {
	rows, err := s.queryRead(ctx, b.b.String(), b.args...)
	if err != nil {
		return 0, fmt.Errorf("request log page: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sec, seq int64
		var keyID string
		var blob []byte
		if err := rows.Scan(&sec, &seq, &keyID, &blob); err != nil {
			return n, fmt.Errorf("scan request logs: %w", err)
		}
		n++
		more, err := fn(sec, seq, keyID, blob)
		if err != nil {
			return n, fmt.Errorf("request logs of %d: %w", sec, err)
		}
		if !more {
			return n, nil
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("request log page: %w", err)
	}
	return n, nil
}

// sweepLogs removes, account by account, the logs older than cut and, of
// an account holding more than perAccount, the oldest logs of the keys
// holding the most (requestlog.FairShares). Whole seconds go by the primary key; the
// one second a bound falls within is unpacked and written again with the
// logs it keeps (trimSecond).
func sweepLogs(ctx context.Context, tx *Tx, engine string, cut int64, perAccount int) error {
	for acct, first := "", true; ; first = false {
		// The next account: a seek in the primary key, not a scan.
		var next sql.NullString
		q := `SELECT MIN(account_id) FROM request_log_batches WHERE account_id > $1`
		if first {
			q = `SELECT MIN(account_id) FROM request_log_batches WHERE account_id >= $1`
		}
		if err := tx.QueryRowContext(ctx, q, acct).Scan(&next); err != nil {
			return fmt.Errorf("find account of request logs: %w", err)
		}
		if !next.Valid {
			return nil
		}
		acct = next.String
		cutSec := requestlog.FloorSec(cut)
		if _, err := tx.ExecContext(ctx, `DELETE FROM request_log_batches WHERE account_id = $1 AND sec < $2`, acct, cutSec); err != nil {
			return fmt.Errorf("sweep request logs: %w", err)
		}
		if err := trimSecond(ctx, tx, engine, acct, "", cutSec, func(logs []requestlog.Log) []requestlog.Log {
			i := slices.IndexFunc(logs, func(l requestlog.Log) bool { return toMS(l.At) < cut })
			if i < 0 {
				return logs
			}
			return logs[:i]
		}); err != nil {
			return err
		}
		if err := capAccount(ctx, tx, engine, acct, int64(perAccount)); err != nil {
			return err
		}
	}
}

// capAccount keeps at most perAccount of the account's logs, taking them
// from the keys that hold the most (requestlog.FairShares): a key flooding the logs,
// with refusals or otherwise, pushes out its own, never another key's.
func capAccount(ctx context.Context, tx *Tx, engine, acct string, perAccount int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT key_id, SUM(n) FROM request_log_batches WHERE account_id = $1 GROUP BY key_id ORDER BY key_id`, acct)
	var keyIDs []string
	held, err := collect("count request logs", rows, err, func(r *sql.Rows) (n int64, err error) {
		var keyID string
		err = r.Scan(&keyID, &n)
		keyIDs = append(keyIDs, keyID)
		return n, err
	})
	if err != nil {
		return err
	}
	for i, keep := range requestlog.FairShares(held, perAccount) {
		if keep < held[i] {
			if err := capKey(ctx, tx, engine, acct, keyIDs[i], keep); err != nil {
				return err
			}
		}
	}
	return nil
}

// capKey keeps the key's newest keep logs of the account.
func capKey(ctx context.Context, tx *Tx, engine, acct, keyID string, keep int64) error {
	// The newest second at which the key's logs, counted from the newest,
	// reach keep; within it keep only those that fit.
	var sec, total, inSec int64
	err := tx.QueryRowContext(ctx, `SELECT sec, total, n FROM (
			SELECT sec, SUM(n) AS n, SUM(SUM(n)) OVER (ORDER BY sec DESC) AS total
			FROM request_log_batches WHERE account_id = $1 AND key_id = $2 GROUP BY sec
		) t WHERE total >= $3 ORDER BY sec DESC LIMIT 1`, acct, keyID, keep).Scan(&sec, &total, &inSec)
	if err != nil {
		return fmt.Errorf("find oldest kept log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM request_log_batches WHERE account_id = $1 AND key_id = $2 AND sec < $3`, acct, keyID, sec); err != nil {
		return fmt.Errorf("cap request logs: %w", err)
	}
	keep -= total - inSec
	return trimSecond(ctx, tx, engine, acct, keyID, sec, func(logs []requestlog.Log) []requestlog.Log {
		return logs[:min(int64(len(logs)), keep)]
	})
}

// trimSecond unpacks the account's logs of second sec (of keyID alone
// unless it is ""), newest first, and when keep drops any, writes those it
// keeps in their place.
func trimSecond(ctx context.Context, tx *Tx, engine, acct, keyID string, sec int64, keep func([]requestlog.Log) []requestlog.Log) error {
	const ofKey = `account_id = $1 AND sec = $2 AND ($3 = '' OR key_id = $3)`
	rows, err := tx.QueryContext(ctx, `SELECT key_id, logs FROM request_log_batches WHERE `+ofKey, acct, sec, keyID)
	var logs []requestlog.Log
	_, err = collect("read request logs", rows, err, func(r *sql.Rows) (struct{}, error) {
		var keyID string
		var blob []byte
		if err := r.Scan(&keyID, &blob); err != nil {
			return struct{}{}, err
		}
		var err error
		if logs, err = requestlog.Unpack(logs, blob, sec, acct, keyID); err != nil {
			return struct{}{}, fmt.Errorf("request logs of %d: %w", sec, err)
		}
		return struct{}{}, nil
	})
	if err != nil {
		return err
	}
	logs = requestlog.NewestFirst(logs)
	n := len(logs)
	if logs = keep(logs); len(logs) == n {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM request_log_batches WHERE `+ofKey, acct, sec, keyID); err != nil {
		return fmt.Errorf("trim request logs: %w", err)
	}
	return insertLogBatches(ctx, tx.Tx, engine, requestlog.Pack(logs).Batches())
}
