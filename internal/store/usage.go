package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// Usage and request logs (migration 0009): what internal/usage buffers and
// writes in batches, the sweep that keeps them within their retention, and
// the console's reads.

// clusterRequestLogs is migration 0010: every log wrote a row and five
// index entries (0009), about 14 µs of CPU a log on SQLite, in the
// service's own process (BenchmarkWriteUsage/sqlite). There request_logs
// becomes a WITHOUT ROWID table stored in the Logs page's order, (account_id,
// at, id), and nothing else: a retried log is skipped by that key (INSERT OR
// IGNORE); every filter of the page reads the account's logs newest first
// and keeps the matching ones, and the search by request id looks the log
// up by that key, from the time the id carries (RequestLogPage). A filter
// matching none of an account's 100,000 logs (key and status 500,
// BenchmarkLogsPage) reads them all, 16 ms against 4.5 ms through 0009's
// class index. An index on the request id, random, cost
// more than all the rest: its inserts land on random pages, each commit
// wrote them to the WAL, and the bench's SQLite GET /v1/me with recording
// on spent 46.7 µs of serve CPU a request with it, 34.2 without (27.5
// with recording off: bench/RESULTS.md). On PostgreSQL, which writes in
// its own process, the heap stays; only the indexes on the class, the
// route and the time alone go (the sweep goes account by account).
//
// One file of SQL cannot say both engines' DDL, hence code.
func clusterRequestLogs(ctx context.Context, tx *sql.Tx, engine string) error {
	script := clusterRequestLogsSQLite
	if engine == EnginePostgres {
		script = clusterRequestLogsPostgres
	}
	_, err := tx.ExecContext(ctx, script)
	return err
}

const clusterRequestLogsSQLite = `CREATE TABLE request_logs_0010 (
	id          TEXT NOT NULL, -- the request id (X-Request-Id)
	account_id  TEXT NOT NULL,
	key_id      TEXT NOT NULL,
	at          BIGINT NOT NULL,
	method      TEXT NOT NULL,
	route       TEXT NOT NULL,
	path        TEXT NOT NULL,
	status      INTEGER NOT NULL,
	class       TEXT NOT NULL, -- 2xx, 4xx, 429 or 5xx
	error_code  TEXT NOT NULL,
	duration_us BIGINT NOT NULL,
	client      TEXT NOT NULL,
	PRIMARY KEY (account_id, at, id)
) WITHOUT ROWID;
INSERT INTO request_logs_0010 (id, account_id, key_id, at, method, route, path, status, class, error_code, duration_us, client)
	SELECT id, account_id, key_id, at, method, route, path, status, class, error_code, duration_us, client FROM request_logs
	ORDER BY account_id, at, id;
DROP TABLE request_logs;
ALTER TABLE request_logs_0010 RENAME TO request_logs;`

const clusterRequestLogsPostgres = `DROP INDEX request_logs_class;
DROP INDEX request_logs_route;
DROP INDEX request_logs_at;`

// Retention (docs/console.md).
const (
	LogRetention    = 7 * 24 * time.Hour
	LogsPerAccount  = 100_000
	MinuteGrainKept = 48 * time.Hour
	HourGrainKept   = 90 * 24 * time.Hour
)

// UsageCount is how many requests of one class a key made in one minute;
// or, when AgentID is set (and KeyID is not), how many were made to that AI
// agent's routes (migration 0021, usage_agent_minute).
type UsageCount struct {
	AccountID string
	KeyID     string
	AgentID   string
	Minute    time.Time // truncated to the minute
	Class     string
	Count     int64
	// Latency, when set, counts the key's requests by latency bin
	// (requestlog.LatencyBin); it is added to usage_latency_minute.
	Latency []uint32
}

// WriteUsage stores logs and counts as WritePackedUsage does.
func (s *Store) WriteUsage(ctx context.Context, logs []requestlog.Log, counts []UsageCount) error {
	return s.WritePackedUsage(ctx, requestlog.Pack(logs), counts)
}

// WritePackedUsage stores a batch, in one transaction: the logs, packed
// (requestlogs.go), and the counts, each added to what is stored. A batch
// that failed stored nothing, so it can be retried whole without counting
// twice.
func (s *Store) WritePackedUsage(ctx context.Context, logs *requestlog.Buffer, counts []UsageCount) error {
	if logs.Len() == 0 && len(counts) == 0 {
		return nil
	}
	// One order for every instance, so that two flushing at once cannot
	// deadlock on PostgreSQL's row locks.
	var keyCounts, agentCounts []UsageCount
	for _, c := range counts {
		if c.AgentID != "" {
			agentCounts = append(agentCounts, c)
		} else {
			keyCounts = append(keyCounts, c)
		}
	}
	byKey := func(a, b UsageCount) int {
		return strings.Compare(a.KeyID+a.AgentID+"\x00"+a.Class, b.KeyID+b.AgentID+"\x00"+b.Class)*2 + a.Minute.Compare(b.Minute)
	}
	slices.SortFunc(keyCounts, byKey)
	slices.SortFunc(agentCounts, byKey)
	latency := latencyRows(keyCounts)
	var learnt flushLearnt
	err := s.inTx(ctx, func(tx *Tx) error {
		if err := insertLogBatches(ctx, tx.Tx, s.engine, logs.Batches()); err != nil {
			return err
		}
		if err := addCounts(ctx, tx, keyCounts); err != nil {
			return err
		}
		if err := addLatency(ctx, tx, s.d, latency); err != nil {
			return err
		}
		if err := addAgentCounts(ctx, tx, agentCounts); err != nil {
			return err
		}
		// Key anomalies are noticed here, from the batch itself, and
		// commit with it (anomalies.go).
		var err error
		learnt, err = s.detectAnomalies(ctx, tx, logs, keyCounts)
		return err
	})
	if err == nil {
		s.spikes.keep(learnt.spikes)
		s.nets.keep(learnt.nets)
	}
	return err
}

func addCounts(ctx context.Context, tx *Tx, counts []UsageCount) error {
	if len(counts) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO usage_minute (key_id, minute, class, account_id, count) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (key_id, minute, class) DO UPDATE SET count = usage_minute.count + excluded.count`)
	if err != nil {
		return fmt.Errorf("prepare usage: %w", err)
	}
	defer stmt.Close()
	for _, c := range counts {
		if _, err := stmt.ExecContext(ctx, c.KeyID, toMS(c.Minute.Truncate(time.Minute)), c.Class, c.AccountID, c.Count); err != nil {
			return fmt.Errorf("add usage: %w", err)
		}
	}
	return nil
}

// SweepUsage enforces retention as of now: logs older than LogRetention go,
// and so does every log of an account beyond its newest LogsPerAccount;
// minute counts older than MinuteGrainKept are added to their hour and
// removed; hour counts older than HourGrainKept go. Instances may sweep at
// the same time: on PostgreSQL a transaction-scoped advisory lock makes
// them take turns, so a minute is never rolled up twice.
func (s *Store) SweepUsage(ctx context.Context, now time.Time) error {
	return s.sweepUsage(ctx, now, LogsPerAccount)
}

func (s *Store) sweepUsage(ctx context.Context, now time.Time, perAccount int) error {
	return s.inTx(ctx, func(tx *Tx) error {
		if s.engine == EnginePostgres {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, usageSweepLock); err != nil {
				return fmt.Errorf("take sweep lock: %w", err)
			}
		}
		if err := sweepLogs(ctx, tx, s.engine, toMS(now.Add(-LogRetention)), perAccount); err != nil {
			return err
		}
		if err := rollUp(ctx, tx, now); err != nil {
			return err
		}
		return pruneAnomalyState(ctx, tx, now)
	})
}

// usageSweepLock is the sweep's advisory lock key ("usage" in ASCII).
const usageSweepLock int64 = 0x7573616765

func rollUp(ctx context.Context, tx *Tx, now time.Time) error {
	cut := toMS(now.Add(-MinuteGrainKept).Truncate(time.Hour))
	hour := time.Hour.Milliseconds()
	if _, err := tx.ExecContext(ctx, `INSERT INTO usage_hour (key_id, hour, class, account_id, count)
		SELECT key_id, (minute / $2) * $2, class, MIN(account_id), SUM(count) FROM usage_minute WHERE minute < $1
		GROUP BY key_id, (minute / $2) * $2, class
		ON CONFLICT (key_id, hour, class) DO UPDATE SET count = usage_hour.count + excluded.count`, cut, hour); err != nil {
		return fmt.Errorf("roll usage up: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM usage_minute WHERE minute < $1`, cut); err != nil {
		return fmt.Errorf("sweep usage minutes: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM usage_hour WHERE hour < $1`, toMS(now.Add(-HourGrainKept))); err != nil {
		return fmt.Errorf("sweep usage hours: %w", err)
	}
	return rollUpMore(ctx, tx, cut, toMS(now.Add(-HourGrainKept))) // usage_latency.go
}

// UsageBucket is a key's count of one class in the bucket starting at Start.
type UsageBucket struct {
	Start time.Time
	Class string
	Count int64
}

// KeyUsage returns a key's counts in [from, to), summed per bucket of width
// (a whole number of minutes; buckets start at multiples of width since the
// Unix epoch, so an hour or a UTC day). Minute and hour grain are both read:
// a bucket older than 48 hours comes from the hours.
func (s *Store) KeyUsage(ctx context.Context, keyID string, from, to time.Time, width time.Duration) ([]UsageBucket, error) {
	if !storable(keyID) {
		return nil, nil
	}
	w := width.Milliseconds()
	rows, err := s.queryRead(ctx, `SELECT b, class, SUM(n) FROM (
			SELECT (minute / $4) * $4 AS b, class, count AS n FROM usage_minute WHERE key_id = $1 AND minute >= $2 AND minute < $3
			UNION ALL
			SELECT (hour / $4) * $4 AS b, class, count AS n FROM usage_hour WHERE key_id = $1 AND hour >= $2 AND hour < $3
		) u GROUP BY b, class ORDER BY b, class`, keyID, toMS(from), toMS(to), w)
	return collect("key usage", rows, err, scanUsageBucket)
}

func scanUsageBucket(r *sql.Rows) (b UsageBucket, err error) {
	var ms int64
	err = r.Scan(&ms, &b.Class, &b.Count)
	b.Start = fromMS(ms)
	return
}

// AccountKeyRequests returns, per key of the account, its requests since
// since (which should be within the minute grain's 48 hours).
func (s *Store) AccountKeyRequests(ctx context.Context, accountID string, since time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	if !storable(accountID) {
		return out, nil
	}
	rows, err := s.queryRead(ctx, `SELECT key_id, SUM(count) FROM usage_minute WHERE account_id = $1 AND minute >= $2 GROUP BY key_id`,
		accountID, toMS(since.Truncate(time.Minute)))
	_, err = collect("account usage", rows, err, func(r *sql.Rows) (id string, err error) {
		var n int64
		err = r.Scan(&id, &n)
		out[id] = n
		return
	})
	return out, err
}
