package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Latency histograms and AI agents' counts (migration 0021): written with
// the counts (WritePackedUsage), the histograms into their hour at once,
// the agents' counts per minute and rolled up as the counts are (rollUp);
// read by the charts and the overview's busiest agents.

// latencyRow is a key's requests in one latency bin in one hour.
type latencyRow struct {
	accountID, keyID string
	hour             int64 // Unix milliseconds
	bin              int
	count            int64
}

// latencyRows sums counts' histograms per key, hour and bin (a key's
// classes and minutes share its hour's histogram), in that order: every
// instance takes the rows' locks in one order, as the counts'
// (WritePackedUsage).
func latencyRows(counts []UsageCount) []latencyRow {
	type at struct {
		key  string
		hour int64
		bin  int
	}
	sum := map[at]*latencyRow{}
	for _, c := range counts {
		m := toMS(c.Minute.Truncate(time.Hour))
		for bin, n := range c.Latency {
			if n == 0 {
				continue
			}
			k := at{c.KeyID, m, bin}
			if r := sum[k]; r != nil {
				r.count += int64(n)
			} else {
				sum[k] = &latencyRow{accountID: c.AccountID, keyID: c.KeyID, hour: m, bin: bin, count: int64(n)}
			}
		}
	}
	out := make([]latencyRow, 0, len(sum))
	for _, r := range sum {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b latencyRow) int {
		return cmp.Or(strings.Compare(a.keyID, b.keyID), cmp.Compare(a.hour, b.hour), cmp.Compare(a.bin, b.bin))
	})
	return out
}

func addLatency(ctx context.Context, tx *Tx, rows []latencyRow) error {
	if len(rows) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO usage_latency_hour (key_id, hour, bin, account_id, count) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (key_id, hour, bin) DO UPDATE SET count = usage_latency_hour.count + excluded.count`)
	if err != nil {
		return fmt.Errorf("prepare latency: %w", err)
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, r.keyID, r.hour, r.bin, r.accountID, r.count); err != nil {
			return fmt.Errorf("add latency: %w", err)
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
	rows, err := s.queryRead(ctx, `SELECT (hour / $4) * $4 AS b, bin, SUM(count) FROM usage_latency_hour
		WHERE `+col+` = $1 AND hour >= $2 AND hour < $3 GROUP BY b, bin ORDER BY b, bin`, id, toMS(from), toMS(to), width.Milliseconds())
	return collect("latency", rows, err, func(r *sql.Rows) (b LatencyBucket, err error) {
		var ms int64
		err = r.Scan(&ms, &b.Bin, &b.Count)
		b.Start = fromMS(ms)
		return
	})
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
