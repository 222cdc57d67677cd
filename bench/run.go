package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func run(ctx context.Context, c config, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "agentapi-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "agentapi")
	fmt.Fprintln(out, "building agentapi…")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/agentapi").CombinedOutput(); err != nil {
		return fmt.Errorf("go build (run from the repository root): %v: %s", err, b)
	}
	fmt.Fprintf(out, "machine: %s/%s, %d CPUs, %s; %d rounds of %s a scenario, %d connections\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), c.rounds, c.duration, c.conns)
	sqlite := &engine{name: "SQLite", dsn: [2]string{filepath.Join(tmp, "small.db"), filepath.Join(tmp, "big.db")}}
	if err := benchEngine(ctx, c, bin, tmp, sqlite, out); err != nil {
		return fmt.Errorf("SQLite: %w", err)
	}
	if c.postgres == "" || c.redis == "" {
		return nil
	}
	pg, drop, err := postgresEngine(ctx, c)
	if err != nil {
		return err
	}
	defer drop()
	if err := benchEngine(ctx, c, bin, tmp, pg, out); err != nil {
		return fmt.Errorf("PostgreSQL + Redis: %w", err)
	}
	return nil
}

// engine is where the two stores live: dsn and redis hold the small
// store's and the one at scale's.
type engine struct {
	name  string
	dsn   [2]string
	db    [2]string // PostgreSQL: the databases' names
	redis [2]string
	admin *pgx.Conn     // PostgreSQL: reads which backends serve which database
	info  *redis.Client // Redis: reads its CPU
}

// postgresEngine creates two databases beside c.postgres's and empties two
// Redis databases, c.redis's and the next; drop removes the databases.
func postgresEngine(ctx context.Context, c config) (*engine, func(), error) {
	admin, err := pgx.Connect(ctx, c.postgres)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	e := &engine{name: "PostgreSQL + Redis", admin: admin}
	drop := func() {
		for _, n := range e.db {
			if n != "" {
				_, _ = admin.Exec(context.Background(), "DROP DATABASE "+n+" WITH (FORCE)")
			}
		}
		admin.Close(context.Background())
		if e.info != nil {
			e.info.Close()
		}
	}
	for i := range 2 {
		n := "agentapi_bench_" + strings.ToLower(rand.Text()[:10])
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+n); err != nil {
			drop()
			return nil, nil, err
		}
		e.db[i] = n
		u, _ := url.Parse(c.postgres)
		u.Path = "/" + n
		e.dsn[i] = u.String()
		if e.redis[i], err = emptyRedis(ctx, c.redis, i); err != nil {
			drop()
			return nil, nil, err
		}
	}
	opts, _ := redis.ParseURL(c.redis)
	e.info = redis.NewClient(opts)
	return e, drop, nil
}

// emptyRedis is raw's URL with its database number plus i, emptied: each
// store gets its own, since a store's key epoch is mirrored there.
func emptyRedis(ctx context.Context, raw string, i int) (string, error) {
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return "", err
	}
	opts.DB += i
	cl := redis.NewClient(opts)
	defer cl.Close()
	if err := cl.FlushDB(ctx).Err(); err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	u, _ := url.Parse(raw)
	u.Path = "/" + strconv.Itoa(opts.DB)
	return u.String(), nil
}

// scenario is one request measured, on the small store (0) or the one at
// scale (1); ref is the index of the small case that a case at scale is
// compared with (-1: none).
type scenario struct {
	name  string
	store int
	path  string
	as    int // who asks: one of seeded's
	ref   int
}

// scenarios are the measured requests: the deepest page's path is filled
// in once the walk has found it.
func scenarios(c config) []scenario {
	n := thousands
	const list = "/v1/ai-agents?limit=100"
	return []scenario{
		{"GET /v1/me, " + n(c.small.keys) + " keys in the store", 0, "/v1/me", asMe, -1},
		{"GET /v1/me, " + n(c.big.keys) + " keys in the store", 1, "/v1/me", asMe, 0},
		{"GET " + list + ", first page of " + n(c.small.agents) + " agents", 0, list, asLister, -1},
		{"GET " + list + ", first page of " + n(c.big.agents) + " agents", 1, list, asLister, 2},
		{"GET " + list + ", deepest page of " + n(c.big.agents) + " agents", 1, "", asLister, 2},
		{"GET /console/developers/logs, " + n(c.small.logs) + " logs", 0, "/console/developers/logs", asLogger, -1},
		{"GET /console/developers/logs, " + n(c.big.logs) + " logs", 1, "/console/developers/logs", asLogger, 5},
	}
}

func benchEngine(ctx context.Context, c config, bin, tmp string, e *engine, out io.Writer) error {
	var s [2]seeded
	var procs [2]*proc
	for i, z := range []sizes{c.small, c.big} {
		t0 := time.Now()
		var err error
		if s[i], err = seed(ctx, e.dsn[i], z); err != nil {
			return err
		}
		fmt.Fprintf(out, "[%s] seeded %+v in %.0f s\n", e.name, z, time.Since(t0).Seconds())
		args := []string{"serve", "--db", e.dsn[i], "--unauth-rate-limit", "100000000"}
		if e.redis[i] != "" {
			args = append(args, "--redis", e.redis[i])
		}
		if procs[i], err = startProc(ctx, filepath.Join(tmp, fmt.Sprintf("serve-%s-%d.log", strings.Fields(e.name)[0], i)), bin, args...); err != nil {
			return err
		}
		defer procs[i].stop()
	}
	// The floor (this program, -floor-bytes) answers as many bytes as serve's me.
	me, err := get(ctx, http.DefaultClient, target{procs[0].base + "/v1/me", s[0].as[asMe]})
	if err != nil {
		return err
	}
	floor, err := startProc(ctx, filepath.Join(tmp, "floor.log"), os.Args[0], "-floor-bytes", fmt.Sprint(len(me)))
	if err != nil {
		return err
	}
	defer floor.stop()
	scs := scenarios(c)
	t0 := time.Now()
	deepest, pages, err := walk(ctx, procs[1].base, s[1].as[asLister])
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	fmt.Fprintf(out, "[%s] walked %d pages in %.0f s; measuring…\n", e.name, pages, time.Since(t0).Seconds())
	scs[4].path = "/v1/ai-agents?limit=100&next=" + deepest

	probes := []probe{{target: target{url: floor.base + "/"}, meter: meter{pid: floor.pid}}}
	for _, sc := range scs {
		i := sc.store
		probes = append(probes, probe{
			target: target{url: procs[i].base + sc.path, header: s[i].as[sc.as]},
			meter:  meter{pid: procs[i].pid, admin: e.admin, db: e.db[i], redis: e.info},
		})
	}
	tallies, err := rounds(ctx, c, probes)
	if err != nil {
		return err
	}
	report(out, e, scs, tallies)
	return nil
}

// walk follows every page of limit=100 and returns the cursor of the
// deepest and the number of pages.
func walk(ctx context.Context, base string, lister http.Header) (string, int, error) {
	client := newClient(1)
	defer client.CloseIdleConnections()
	next, pages := "", 0
	for {
		t := target{base + "/v1/ai-agents?limit=100", lister}
		if next != "" {
			t.url += "&next=" + next
		}
		var page struct {
			Meta struct {
				Next *string `json:"next"`
			} `json:"meta"`
		}
		body, err := get(ctx, client, t)
		if err != nil {
			return "", pages, err
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return "", pages, err
		}
		pages++
		if page.Meta.Next == nil {
			return next, pages, nil
		}
		next = *page.Meta.Next
	}
}

// report prints an engine's table: CPU µs a request by process, the total
// against the floor's, and each scale case against its small case, with
// the spread of that ratio over the rounds.
func report(out io.Writer, e *engine, scs []scenario, t []tally) {
	floor := t[0].perReq().serve
	fmt.Fprintf(out, "\n%s: CPU µs a request by process; floor %s µs (%d requests)\n\n", e.name, us(floor), t[0].n)
	fmt.Fprintln(out, "| scenario | serve | PostgreSQL | Redis | total | × floor | vs small case (rounds' spread) | requests |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	for i, sc := range scs {
		p := t[i+1].perReq()
		pg, rd := "–", "–"
		if e.admin != nil {
			pg, rd = us(p.pg), us(p.redis)
		}
		vs := ""
		if sc.ref >= 0 {
			vs = versus(t[i+1], t[sc.ref+1])
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %.2f | %s | %d |\n", sc.name, us(p.serve), pg, rd, us(p.total()),
			float64(p.total())/float64(floor), vs, t[i+1].n)
	}
}

// versus is a's total CPU a request against b's, and the lowest and highest
// of that ratio in one round.
func versus(a, b tally) string {
	var ratios []float64
	for r := range min(len(a.rounds), len(b.rounds)) {
		ratios = append(ratios, a.rounds[r]/b.rounds[r]-1)
	}
	if len(ratios) == 0 {
		return "no rounds"
	}
	return fmt.Sprintf("%+.1f %% (%+.0f … %+.0f %%)", (float64(a.perReq().total())/float64(b.perReq().total())-1)*100,
		slices.Min(ratios)*100, slices.Max(ratios)*100)
}

// thousands is v with its thousands separated by commas.
func thousands(v int) string {
	s := strconv.Itoa(v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e3) }
