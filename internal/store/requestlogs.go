package store

import (
	"cmp"
	"container/heap"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
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
		if err != nil {
			return fmt.Errorf("read request_logs: %w", err)
		}
		var logs []RequestLog
		for rows.Next() {
			var l RequestLog
			var at, us int64
			if err := rows.Scan(&l.ID, &l.AccountID, &l.KeyID, &at, &l.Method, &l.Route, &l.Path, &l.Status, &l.ErrorCode, &us, &l.Client); err != nil {
				rows.Close()
				return fmt.Errorf("read request_logs: %w", err)
			}
			l.At, l.Duration = fromMS(at), durationUS(us)
			last.acct, last.at, last.id = l.AccountID, at, l.ID
			logs = append(logs, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read request_logs: %w", err)
		}
		if err := insertLogBatches(ctx, tx, engine, packLogs(logs).batches); err != nil {
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

func durationUS(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// floorSec is the Unix second of Unix milliseconds ms.
func floorSec(ms int64) int64 {
	s := ms / 1000
	if ms%1000 < 0 {
		s--
	}
	return s
}

// batchKey is what the logs of one batch share.
type batchKey struct {
	accountID, keyID string
	sec              int64
}

type logBatch struct {
	batchKey
	*logEncoder
}

// LogBuffer holds request logs packed as the store keeps them, ready for
// WritePackedUsage: a recorder that buffers a second of requests holds
// them as bytes, which the garbage collector does not scan, rather than as
// structs of nine strings each (internal/usage). Not safe for concurrent
// use; the zero value is empty.
type LogBuffer struct {
	batches []*logBatch
	open    map[batchKey]*logBatch // the batches still taking logs
	last    *logBatch              // the one the last log went to, while open
	n       int
}

// Add packs l. Logs come in runs of one key and second: the map is looked
// up only at a run's start.
func (b *LogBuffer) Add(l *RequestLog) {
	ms := toMS(l.At)
	k := batchKey{accountID: l.AccountID, keyID: l.KeyID, sec: floorSec(ms)}
	bt := b.last
	if bt == nil || bt.batchKey != k {
		if bt = b.open[k]; bt == nil {
			if b.open == nil {
				b.open = map[batchKey]*logBatch{}
			}
			bt = &logBatch{batchKey: k, logEncoder: newLogEncoder()}
			b.open[k] = bt
			b.batches = append(b.batches, bt)
		}
		b.last = bt
	}
	bt.add(l, ms, k.sec)
	b.n++
	if bt.n == maxLogsPerBatch {
		delete(b.open, k)
		b.last = nil
	}
}

// Len is how many logs b holds.
func (b *LogBuffer) Len() int { return b.n }

// DropOldest drops the batch b started first and returns how many logs it
// held (0 when b is empty).
func (b *LogBuffer) DropOldest() int {
	if len(b.batches) == 0 {
		return 0
	}
	bt := b.batches[0]
	b.batches[0] = nil
	b.batches = b.batches[1:]
	if b.open[bt.batchKey] == bt {
		delete(b.open, bt.batchKey)
	}
	if b.last == bt {
		b.last = nil
	}
	b.n -= bt.n
	return bt.n
}

// Prepend puts older's logs before b's (a batch that failed to be written,
// put back); older's batches take no more logs.
func (b *LogBuffer) Prepend(older *LogBuffer) {
	b.batches = append(older.batches[:len(older.batches):len(older.batches)], b.batches...)
	b.n += older.n
}

// Logs unpacks b's logs, batch by batch, each in the order added.
func (b *LogBuffer) Logs() []RequestLog {
	out := make([]RequestLog, 0, b.n)
	for _, bt := range b.batches {
		out, _ = unpack(out, bt.blob, bt.sec, bt.accountID, bt.keyID) // packed here: readable
	}
	return out
}

// packLogs packs logs, in the order they come.
func packLogs(logs []RequestLog) *LogBuffer {
	var b LogBuffer
	for i := range logs {
		b.Add(&logs[i])
	}
	return &b
}

// unpack appends to out the logs of a batch of second sec, account and key.
func unpack(out []RequestLog, blob []byte, sec int64, accountID, keyID string) ([]RequestLog, error) {
	d := newLogDecoder(blob, sec)
	var p packedLog
	for d.next(&p) {
		out = append(out, p.log(accountID, keyID))
	}
	return out, d.err
}

// newestFirst sorts logs by (at, id), newest first, and keeps one of a log
// written twice.
func newestFirst(logs []RequestLog) []RequestLog {
	slices.SortFunc(logs, func(a, b RequestLog) int { return cmp.Or(b.At.Compare(a.At), cmp.Compare(b.ID, a.ID)) })
	return slices.CompactFunc(logs, func(a, b RequestLog) bool { return a.ID == b.ID && a.At.Equal(b.At) })
}

// insertLogBatches writes batches: on PostgreSQL in one statement of array
// parameters, whatever their number; on SQLite, in this process, through
// one prepared statement.
func insertLogBatches(ctx context.Context, tx *sql.Tx, engine string, batches []*logBatch) error {
	if len(batches) == 0 {
		return nil
	}
	if engine == EnginePostgres {
		n := len(batches)
		accts, keys, blobs := make([]string, n), make([]string, n), make([][]byte, n)
		secs, seqs, ns, classes := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		for i, b := range batches {
			accts[i], keys[i], blobs[i] = b.accountID, b.keyID, b.blob
			secs[i], seqs[i], ns[i], classes[i] = b.sec, rand.Int64(), int64(b.n), int64(b.classes)
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
		if _, err := stmt.ExecContext(ctx, b.accountID, b.sec, rand.Int64(), b.keyID, b.n, b.classes, b.blob); err != nil {
			return fmt.Errorf("insert request logs: %w", err)
		}
	}
	return nil
}

// RequestLogQuery selects a page of an account's request logs, newest first.
type RequestLogQuery struct {
	AccountID string
	KeyID     string // "" for every key
	Class     string // one of UsageClasses, or ""
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
func (s *Store) RequestLogPage(ctx context.Context, q RequestLogQuery) ([]RequestLog, Cursor, error) {
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

// logFilter is a query's test of one log, in milliseconds.
type logFilter struct {
	q        RequestLogQuery
	lo, hi   int64 // lo <= at < hi
	afterAt  int64
	hasAfter bool
}

func (f *logFilter) keep(p *packedLog) bool {
	q := &f.q
	switch {
	case p.at < f.lo || p.at >= f.hi,
		q.Status != 0 && p.status != q.Status,
		q.Class != "" && UsageClass(p.status) != q.Class,
		q.Route != "" && p.route != q.Route,
		q.RequestID != "" && string(p.id) != q.RequestID:
		return false
	}
	if f.hasAfter && (p.at > f.afterAt || p.at == f.afterAt && string(p.id) >= q.After.ID) {
		return false
	}
	return true
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
// second's through a top-N (logPage).
func (s *Store) requestLogPage(ctx context.Context, q RequestLogQuery, at time.Time) ([]RequestLog, Cursor, error) {
	if q.Status != 0 {
		q.Class = UsageClass(q.Status)
	}
	f, ok := newLogFilter(q, at)
	if !ok {
		return nil, Cursor{}, nil
	}
	pg := logPage{f: &f, second: newestOf{n: q.Limit + 1}}
	var from batchPos
	for per := firstRead; ; per = min(2*per, maxRead) {
		n, err := s.readBatches(ctx, batchQuery(&f, from, per), func(sec, seq int64, keyID string, blob []byte) (bool, error) {
			from = batchPos{sec: sec, seq: seq, set: true}
			return pg.take(sec, keyID, blob)
		})
		if err != nil {
			return nil, Cursor{}, err
		}
		if pg.full() || n < per {
			break
		}
	}
	return pg.result()
}

// newLogFilter is q's test of a log, limited to time at when it is not
// zero; false when no log can pass it.
func newLogFilter(q RequestLogQuery, at time.Time) (logFilter, bool) {
	f := logFilter{q: q, lo: minMS, hi: maxMS}
	if !q.From.IsZero() {
		f.lo = toMS(q.From)
	}
	if !q.To.IsZero() {
		f.hi = toMS(q.To)
	}
	if !at.IsZero() {
		f.lo, f.hi = max(f.lo, toMS(at)), min(f.hi, toMS(at)+1)
	}
	if !q.After.IsZero() {
		f.afterAt, f.hasAfter = toMS(q.After.CreatedAt), true
		f.hi = min(f.hi, f.afterAt+1)
	}
	return f, f.lo < f.hi
}

// batchPos is the last batch a page read, by primary key.
type batchPos struct {
	sec, seq int64
	set      bool
}

// batchQuery reads the next per batches after from that may hold logs f
// keeps: the key and class filters test the batches' columns.
func batchQuery(f *logFilter, from batchPos, per int) *builder {
	q := &f.q
	var b builder
	b.add(`SELECT sec, seq, key_id, logs FROM request_log_batches WHERE account_id = ` + b.arg(q.AccountID))
	b.add(` AND sec >= ` + b.arg(floorSec(f.lo)) + ` AND sec <= ` + b.arg(floorSec(f.hi-1)))
	if q.KeyID != "" {
		b.add(` AND key_id = ` + b.arg(q.KeyID))
	}
	if q.Class != "" {
		b.add(` AND (classes & ` + b.arg(classBit(q.Class)) + `) <> 0`)
	}
	if from.set {
		b.add(` AND (sec, seq) < (` + b.arg(from.sec) + `, ` + b.arg(from.seq) + `)`)
	}
	b.add(` ORDER BY sec DESC, seq DESC LIMIT ` + b.arg(per))
	return &b
}

// logPage gathers a page from batches read newest second first. Each
// second's matching logs go through a top-N (newestOf): a second may hold
// more of them than the page takes.
type logPage struct {
	f         *logFilter
	out       []RequestLog
	cur       int64 // the second whose logs second holds
	second    newestOf
	truncated bool // a second held more matching logs than the page took
	d         logDecoder
	p         packedLog
}

// full reports that the page holds more logs than it shows: the rest need
// not be read.
func (pg *logPage) full() bool { return len(pg.out) > pg.f.q.Limit }

// endSecond adds the current second's logs to the page.
func (pg *logPage) endSecond() {
	pg.truncated = pg.truncated || pg.second.dropped
	pg.out = append(pg.out, pg.second.sorted()...)
	pg.second = newestOf{n: pg.f.q.Limit + 1 - len(pg.out)}
}

// take unpacks one batch into the page; false once the page is full.
func (pg *logPage) take(sec int64, keyID string, blob []byte) (bool, error) {
	if sec != pg.cur {
		pg.endSecond()
		if pg.full() {
			return false, nil
		}
		pg.cur = sec
	}
	pg.d.reset(blob, sec)
	for pg.d.next(&pg.p) {
		if pg.f.keep(&pg.p) {
			pg.second.offer(&pg.p, pg.f.q.AccountID, keyID)
		}
	}
	return true, pg.d.err
}

// result is the page and the cursor of the next one.
func (pg *logPage) result() ([]RequestLog, Cursor, error) {
	pg.endSecond()
	out, limit := pg.out, pg.f.q.Limit
	if len(out) <= limit && !pg.truncated || len(out) == 0 {
		return out, Cursor{}, nil
	}
	// A page is short of q.Limit while there are more only when a log was
	// written twice (a lost acknowledgement) and both took a place.
	out = out[:min(len(out), limit)]
	last := out[len(out)-1]
	return out, Cursor{CreatedAt: last.At, ID: last.ID}, nil
}

// newestOf keeps the newest n logs it is offered, by (at, id): a page
// holds at most a page of the logs of one second, however many it has.
type newestOf struct {
	n       int
	h       logHeap
	dropped bool // a log offered was not kept
}

func (k *newestOf) offer(p *packedLog, accountID, keyID string) {
	if k.n <= 0 {
		k.dropped = true
		return
	}
	if len(k.h) == k.n {
		k.dropped = true
		root := &k.h[0]
		if at := toMS(root.At); p.at < at || p.at == at && string(p.id) <= root.ID {
			return
		}
		*root = p.log(accountID, keyID)
		heap.Fix(&k.h, 0)
		return
	}
	heap.Push(&k.h, p.log(accountID, keyID))
}

// sorted is what k kept, newest first, a log written twice once.
func (k *newestOf) sorted() []RequestLog { return newestFirst(k.h) }

// logHeap is a heap of logs, the oldest at its root.
type logHeap []RequestLog

func (h logHeap) Len() int { return len(h) }
func (h logHeap) Less(i, j int) bool {
	return cmp.Or(h[i].At.Compare(h[j].At), cmp.Compare(h[i].ID, h[j].ID)) < 0
}
func (h logHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *logHeap) Push(x any)   { *h = append(*h, x.(RequestLog)) }
func (h *logHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Bounds of a log's time when a query sets none.
const (
	minMS = -1 << 62
	maxMS = 1 << 62
)

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
// holding the most (fairShares). Whole seconds go by the primary key; the
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
		cutSec := floorSec(cut)
		if _, err := tx.ExecContext(ctx, `DELETE FROM request_log_batches WHERE account_id = $1 AND sec < $2`, acct, cutSec); err != nil {
			return fmt.Errorf("sweep request logs: %w", err)
		}
		if err := trimSecond(ctx, tx, engine, acct, "", cutSec, func(logs []RequestLog) []RequestLog {
			i := slices.IndexFunc(logs, func(l RequestLog) bool { return toMS(l.At) < cut })
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
// from the keys that hold the most (fairShares): a key flooding the logs,
// with refusals or otherwise, pushes out its own, never another key's.
func capAccount(ctx context.Context, tx *Tx, engine, acct string, perAccount int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT key_id, SUM(n) FROM request_log_batches WHERE account_id = $1 GROUP BY key_id`, acct)
	if err != nil {
		return fmt.Errorf("count request logs: %w", err)
	}
	held, err := collect(rows, func(r *sql.Rows) (keyCount, error) {
		var c keyCount
		return c, r.Scan(&c.keyID, &c.n)
	})
	if err != nil {
		return fmt.Errorf("count request logs: %w", err)
	}
	for i, keep := range fairShares(held, perAccount) {
		if keep < held[i].n {
			if err := capKey(ctx, tx, engine, acct, held[i].keyID, keep); err != nil {
				return err
			}
		}
	}
	return nil
}

type keyCount struct {
	keyID string
	n     int64
}

// fairShares is how many logs each key keeps (in held's order) when the
// keys together may keep at most limit: every key keeps its logs up to one
// level, the highest at which they fit, and the keys above it are cut to
// that level (the first of them, by key id, keep one more while the limit
// allows). So logs go from the key holding the most first.
func fairShares(held []keyCount, limit int64) []int64 {
	slices.SortFunc(held, func(a, b keyCount) int { return cmp.Compare(a.keyID, b.keyID) })
	kept := func(level int64) (n int64) {
		for _, h := range held {
			n += min(h.n, level)
		}
		return n
	}
	lo, hi := int64(0), limit // kept(lo) <= limit; the level is in [lo, hi]
	for lo < hi {
		if mid := (lo + hi + 1) / 2; kept(mid) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	slack := limit - kept(lo)
	out := make([]int64, len(held))
	for i, h := range held {
		out[i] = min(h.n, lo)
		if h.n > lo && slack > 0 {
			out[i]++
			slack--
		}
	}
	return out
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
	return trimSecond(ctx, tx, engine, acct, keyID, sec, func(logs []RequestLog) []RequestLog {
		return logs[:min(int64(len(logs)), keep)]
	})
}

// trimSecond unpacks the account's logs of second sec (of keyID alone
// unless it is ""), newest first, and when keep drops any, writes those it
// keeps in their place.
func trimSecond(ctx context.Context, tx *Tx, engine, acct, keyID string, sec int64, keep func([]RequestLog) []RequestLog) error {
	const ofKey = `account_id = $1 AND sec = $2 AND ($3 = '' OR key_id = $3)`
	rows, err := tx.QueryContext(ctx, `SELECT key_id, logs FROM request_log_batches WHERE `+ofKey, acct, sec, keyID)
	if err != nil {
		return fmt.Errorf("read request logs: %w", err)
	}
	var logs []RequestLog
	for rows.Next() {
		var keyID string
		var blob []byte
		if err := rows.Scan(&keyID, &blob); err != nil {
			rows.Close()
			return fmt.Errorf("read request logs: %w", err)
		}
		if logs, err = unpack(logs, blob, sec, acct, keyID); err != nil {
			rows.Close()
			return fmt.Errorf("request logs of %d: %w", sec, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read request logs: %w", err)
	}
	logs = newestFirst(logs)
	n := len(logs)
	if logs = keep(logs); len(logs) == n {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM request_log_batches WHERE `+ofKey, acct, sec, keyID); err != nil {
		return fmt.Errorf("trim request logs: %w", err)
	}
	return insertLogBatches(ctx, tx.Tx, engine, packLogs(logs).batches)
}
