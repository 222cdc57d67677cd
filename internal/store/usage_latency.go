package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// Latency histograms and AI agents' counts (migration 0021): written with
// the counts (WritePackedUsage), the histograms into their hour at once,
// the agents' counts per minute and rolled up as the counts are (rollUp);
// read by the charts and the overview's busiest agents.

// latencyRow is a key's histogram of one hour.
type latencyRow struct {
	accountID, keyID string
	hour             int64 // Unix milliseconds
	hist             []int64
}

// latencyRows sums counts' histograms per key and hour (a key's classes
// and minutes share its hour's), in that order: every instance takes the
// rows' locks in one order, as the counts' (WritePackedUsage).
func latencyRows(counts []UsageCount) []latencyRow {
	type at struct {
		key  string
		hour int64
	}
	sum := map[at]*latencyRow{}
	for _, c := range counts {
		if c.Latency == nil {
			continue
		}
		k := at{c.KeyID, toMS(c.Minute.Truncate(time.Hour))}
		r := sum[k]
		if r == nil {
			r = &latencyRow{accountID: c.AccountID, keyID: c.KeyID, hour: k.hour, hist: make([]int64, requestlog.LatencyBins)}
			sum[k] = r
		}
		for bin, n := range c.Latency[:min(len(c.Latency), requestlog.LatencyBins)] {
			r.hist[bin] += int64(n)
		}
	}
	out := make([]latencyRow, 0, len(sum))
	for _, r := range sum {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b latencyRow) int {
		return cmp.Or(strings.Compare(a.keyID, b.keyID), cmp.Compare(a.hour, b.hour))
	})
	return out
}

// addLatency adds each row's histogram to its key's hour: the row is made
// if missing, then read locked (on PostgreSQL; SQLite's writer holds the
// database), added to and written back, so instances flushing the same
// hour at once each add theirs.
func addLatency(ctx context.Context, tx *Tx, d dialect, rows []latencyRow) error {
	if len(rows) == 0 {
		return nil
	}
	var stmts [3]*sql.Stmt
	for i, q := range []string{
		`INSERT INTO usage_latency_hour (key_id, hour, account_id, hist) VALUES ($1, $2, $3, '') ON CONFLICT (key_id, hour) DO NOTHING`,
		`SELECT hist FROM usage_latency_hour WHERE key_id = $1 AND hour = $2` + d.forUpdate,
		`UPDATE usage_latency_hour SET hist = $3 WHERE key_id = $1 AND hour = $2`,
	} {
		st, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare latency: %w", err)
		}
		defer st.Close()
		stmts[i] = st
	}
	var buf []byte
	for _, r := range rows {
		var stored string
		if _, err := stmts[0].ExecContext(ctx, r.keyID, r.hour, r.accountID); err != nil {
			return fmt.Errorf("add latency: %w", err)
		}
		if err := stmts[1].QueryRowContext(ctx, r.keyID, r.hour).Scan(&stored); err != nil {
			return fmt.Errorf("read latency: %w", err)
		}
		if err := requestlog.AddHist(r.hist, stored); err != nil {
			return err
		}
		buf = requestlog.AppendHist(buf[:0], r.hist)
		if _, err := stmts[2].ExecContext(ctx, r.keyID, r.hour, string(buf)); err != nil {
			return fmt.Errorf("write latency: %w", err)
		}
	}
	return nil
}

func addAgentCounts(ctx context.Context, tx *Tx, counts []UsageCount) error {
	if len(counts) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO usage_agent_minute (agent_id, minute, class, account_id, count) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (agent_id, minute, class) DO UPDATE SET count = usage_agent_minute.count + excluded.count`)
	if err != nil {
		return fmt.Errorf("prepare agent usage: %w", err)
	}
	defer stmt.Close()
	for _, c := range counts {
		if _, err := stmt.ExecContext(ctx, c.AgentID, toMS(c.Minute.Truncate(time.Minute)), c.Class, c.AccountID, c.Count); err != nil {
			return fmt.Errorf("add agent usage: %w", err)
		}
	}
	return nil
}

// rollUpMore rolls the agents' minutes before cut into their hours, and
// sweeps their hours and the histograms' before gone, as rollUp does the
// counts.
func rollUpMore(ctx context.Context, tx *Tx, cut, gone int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO usage_agent_hour (agent_id, hour, class, account_id, count)
		SELECT agent_id, (minute / $2) * $2, class, MIN(account_id), SUM(count) FROM usage_agent_minute WHERE minute < $1
		GROUP BY agent_id, (minute / $2) * $2, class
		ON CONFLICT (agent_id, hour, class) DO UPDATE SET count = usage_agent_hour.count + excluded.count`, cut, time.Hour.Milliseconds()); err != nil {
		return fmt.Errorf("roll agent usage up: %w", err)
	}
	for _, d := range []struct {
		q      string
		before int64
	}{
		{`DELETE FROM usage_agent_minute WHERE minute < $1`, cut},
		{`DELETE FROM usage_agent_hour WHERE hour < $1`, gone},
		{`DELETE FROM usage_latency_hour WHERE hour < $1`, gone},
	} {
		if _, err := tx.ExecContext(ctx, d.q, d.before); err != nil {
			return fmt.Errorf("sweep agent usage and latency: %w", err)
		}
	}
	return nil
}

// LatencyBucket is how many requests of a bucket starting at Start took a
// latency in bin Bin (requestlog.LatencyBin).
type LatencyBucket struct {
	Start time.Time
	Bin   int
	Count int64
}

// KeyLatency returns a key's latency histogram in [from, to), summed per
// bucket of width (a whole number of hours: the histograms are kept per
// hour).
func (s *Store) KeyLatency(ctx context.Context, keyID string, from, to time.Time, width time.Duration) ([]LatencyBucket, error) {
	return s.latency(ctx, "key_id", keyID, from, to, width)
}

// AccountLatency is KeyLatency for all of an account's keys together.
func (s *Store) AccountLatency(ctx context.Context, accountID string, from, to time.Time, width time.Duration) ([]LatencyBucket, error) {
	return s.latency(ctx, "account_id", accountID, from, to, width)
}

// latency reads the histograms whose column col (key_id or account_id,
// both indexed with the time) is id.
func (s *Store) latency(ctx context.Context, col, id string, from, to time.Time, width time.Duration) ([]LatencyBucket, error) {
	if !storable(id) {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT hour, hist FROM usage_latency_hour WHERE `+col+` = $1 AND hour >= $2 AND hour < $3`,
		id, toMS(from), toMS(to))
	sum := map[int64][]int64{}
	w := width.Milliseconds()
	if _, err := collect("latency", rows, err, func(r *sql.Rows) (struct{}, error) {
		var hour int64
		var hist string
		if err := r.Scan(&hour, &hist); err != nil {
			return struct{}{}, err
		}
		b := hour / w * w
		if sum[b] == nil {
			sum[b] = make([]int64, requestlog.LatencyBins)
		}
		return struct{}{}, requestlog.AddHist(sum[b], hist)
	}); err != nil {
		return nil, err
	}
	var out []LatencyBucket
	for _, b := range slices.Sorted(maps.Keys(sum)) {
		for bin, n := range sum[b] {
			if n > 0 {
				out = append(out, LatencyBucket{Start: fromMS(b), Bin: bin, Count: n})
			}
		}
	}
	return out, nil
}

// AgentRequests is how many requests an AI agent's routes had.
type AgentRequests struct {
	AgentID string
	Count   int64
}

// BusiestAgents returns the account's n AI agents with the most requests
// in [from, to) (to the minute within the minute grain's 48 hours, to the
// hour before), the most first.
func (s *Store) BusiestAgents(ctx context.Context, accountID string, from, to time.Time, n int) ([]AgentRequests, error) {
	if !storable(accountID) {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT agent_id, SUM(n) AS total FROM (
			SELECT agent_id, count AS n FROM usage_agent_minute WHERE account_id = $1 AND minute >= $2 AND minute < $3
			UNION ALL
			SELECT agent_id, count AS n FROM usage_agent_hour WHERE account_id = $1 AND hour >= $2 AND hour < $3
		) u GROUP BY agent_id ORDER BY total DESC, agent_id LIMIT $4`, accountID, toMS(from), toMS(to), n)
	return collect("busiest agents", rows, err, func(r *sql.Rows) (a AgentRequests, err error) {
		err = r.Scan(&a.AgentID, &a.Count)
		return
	})
}

// AgentUsage returns the requests to an AI agent's routes in [from, to),
// summed per bucket of width by class, as KeyUsage returns a key's; only
// the account's agent's.
func (s *Store) AgentUsage(ctx context.Context, accountID, agentID string, from, to time.Time, width time.Duration) ([]UsageBucket, error) {
	if !storable(accountID) || !storable(agentID) {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT b, class, SUM(n) FROM (
			SELECT (minute / $5) * $5 AS b, class, count AS n FROM usage_agent_minute WHERE agent_id = $2 AND account_id = $1 AND minute >= $3 AND minute < $4
			UNION ALL
			SELECT (hour / $5) * $5 AS b, class, count AS n FROM usage_agent_hour WHERE agent_id = $2 AND account_id = $1 AND hour >= $3 AND hour < $4
		) u GROUP BY b, class ORDER BY b, class`, accountID, agentID, toMS(from), toMS(to), width.Milliseconds())
	return collect("agent usage", rows, err, scanUsageBucket)
}
