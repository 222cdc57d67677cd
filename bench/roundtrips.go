package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/ratelimit"
)

// roundTripPhase is how long the service is driven to count its round
// trips; statsSettle is how long PostgreSQL's backends are left idle before
// each reading, so that they have reported their counts (an idle backend
// reports what it holds within a second).
const (
	roundTripPhase = 2 * time.Second
	statsSettle    = 1500 * time.Millisecond
)

// roundTrips counts what a request costs behind the service: Redis script
// calls (EVALSHA, EVAL, FCALL and their read-only forms, from INFO
// commandstats) and PostgreSQL transactions on the service's database
// (pg_stat_database: xact_commit + xact_rollback; each of the service's
// statements outside a transaction is one, so it is its round trips to
// the database, give or take the readings' own).
type roundTrips struct {
	redis  *redis.Client
	pg     *pgx.Conn
	pgName string
}

// newRoundTrips connects to e's Redis and database; nil (and no error)
// for an engine without Redis.
func newRoundTrips(ctx context.Context, e engine) (*roundTrips, error) {
	if e.redis == "" {
		return nil, nil
	}
	opts, err := ratelimit.ClientOptions(e.redis)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return nil, fmt.Errorf("round trips: %w", err)
	}
	return &roundTrips{redis: redis.NewClient(opts), pg: conn, pgName: conn.Config().Database}, nil
}

func (r *roundTrips) close() {
	if r != nil {
		r.redis.Close()
		r.pg.Close(context.Background())
	}
}

// reading is one snapshot of the two counters.
type reading struct{ scripts, xacts int64 }

func (r *roundTrips) read(ctx context.Context) (reading, error) {
	info, err := r.redis.Info(ctx, "commandstats").Result()
	if err != nil {
		return reading{}, fmt.Errorf("redis INFO commandstats: %w", err)
	}
	var out reading
	out.scripts = scriptCalls(info)
	// A fresh transaction: pg_stat views are read once per transaction.
	err = r.pg.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, r.pgName).Scan(&out.xacts)
	if err != nil {
		return reading{}, fmt.Errorf("pg_stat_database: %w", err)
	}
	return out, nil
}

// scriptCalls sums the calls of the script commands in an INFO
// commandstats answer ("cmdstat_evalsha:calls=12,usec=…").
func scriptCalls(info string) int64 {
	var n int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		default:
			continue
		}
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, found := strings.CutPrefix(kv, "calls="); found {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	}
	return n
}

// perRequest drives the service with mk for roundTripPhase and returns
// its Redis script calls and PostgreSQL transactions per request, as the
// table's figure. Anything else using the same Redis or database meanwhile
// is counted too.
func (r *roundTrips) perRequest(ctx context.Context, client *http.Client, conns int, mk request) (string, error) {
	time.Sleep(statsSettle)
	before, err := r.read(ctx)
	if err != nil {
		return "", err
	}
	res, err := drive(ctx, client, conns, roundTripPhase, mk)
	if err != nil {
		return "", err
	}
	time.Sleep(statsSettle)
	after, err := r.read(ctx)
	if err != nil {
		return "", err
	}
	if res.n == 0 {
		return "no requests", nil
	}
	n := float64(res.n)
	return fmt.Sprintf("Redis script calls ÷ requests %.2f; PostgreSQL round trips (transactions) ÷ requests %.2f (%d requests)",
		float64(after.scripts-before.scripts)/n, float64(after.xacts-before.xacts-1)/n, res.n), nil
}
