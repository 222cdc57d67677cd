package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
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
	fmt.Fprintf(out, "machine: %s/%s, %d CPUs, %s\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())

	t, cpu := &table{head: results}, &table{head: cpuCosts}
	engines := []engine{{name: "SQLite", dsn: filepath.Join(tmp, "bench.db")}}
	if c.postgres != "" && c.redis != "" {
		dsn, drop, err := freshPostgres(ctx, c.postgres)
		if err != nil {
			return err
		}
		defer drop()
		engines = append(engines, engine{name: "PostgreSQL + Redis", dsn: dsn, redis: c.redis})
	}
	for _, e := range engines {
		if err := benchEngine(ctx, c, bin, tmp, e, t, cpu, out); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	limiterFigures(t)
	fmt.Fprintln(out)
	t.print(out)
	fmt.Fprintln(out, "\nCPU time per request of the read scenarios (user + system, from /proc and getrusage):")
	fmt.Fprintln(out)
	cpu.print(out)
	return nil
}

type engine struct{ name, dsn, redis string }

// seeded is what the bench needs from the store.
type seeded struct {
	key     string // full-access key of the main account, ceiling high enough never to refuse
	deepKey string // key of the account holding c.agents agents
}

// engineRun is one engine's part of the bench: the seeded store, the
// service and the floor running against it, and the tables the figures go to.
type engineRun struct {
	c          config
	e          engine
	st         *store.Store
	s          seeded
	svc, floor *proc
	rt         *roundTrips // nil unless the engine has Redis
	adminAddr  string      // serve's admin listener, when profiling
	t, cpu     *table
	out        io.Writer
}

// readScenario is one GET measured against the floor.
type readScenario struct {
	name, path, key string
	conns           int
}

func benchEngine(ctx context.Context, c config, bin, tmp string, e engine, t, cpu *table, out io.Writer) error {
	fmt.Fprintf(out, "[%s] seeding %d agents…\n", e.name, c.agents)
	st, s, err := openSeeded(ctx, e.dsn, c.agents)
	if err != nil {
		return err
	}
	r := &engineRun{c: c, e: e, st: st, s: s, t: t, cpu: cpu, out: out}
	err = r.run(ctx, bin, tmp)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// openSeeded opens the engine's store and seeds it.
func openSeeded(ctx context.Context, dsn string, agents int) (*store.Store, seeded, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, seeded{}, err
	}
	s, err := seed(ctx, st, agents)
	if err == nil {
		// The seeding's write-ahead log (SQLite) is not the service's to
		// pay for: without this, the first scenario measured its checkpoint.
		err = st.Checkpoint(ctx)
	}
	if err != nil {
		st.Close()
		return nil, seeded{}, err
	}
	return st, s, nil
}

// run starts the processes, then measures the reads, and unless c.only
// narrows the run to some reads, the walk, the writes and the RSS.
func (r *engineRun) run(ctx context.Context, bin, tmp string) error {
	stop, err := r.start(ctx, bin, tmp)
	if err != nil {
		return err
	}
	defer stop()
	for _, sc := range r.scenarios() {
		if err := r.read(ctx, sc); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
	}
	for _, conns := range []int{r.c.conns, 4 * r.c.conns} {
		if err := r.recording(ctx, bin, tmp, conns); err != nil {
			return fmt.Errorf("recording: %w", err)
		}
	}
	if r.c.only != "" {
		return nil
	}
	if err := r.walk(ctx); err != nil {
		return err
	}
	if err := r.writes(ctx); err != nil {
		return err
	}
	if r.c.skipRSS || r.e.redis != "" {
		return nil
	}
	return r.activeKeysRSS(ctx)
}

// start runs serve, the floor (answering as many bytes as serve's /v1/me)
// and the round-trip counter; stop ends whichever of them started.
func (r *engineRun) start(ctx context.Context, bin, tmp string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	args, err := r.serveArgs()
	if err != nil {
		return nil, err
	}
	if r.svc, err = startProc(ctx, filepath.Join(tmp, "serve-"+r.engineWord()+".log"), bin, args...); err != nil {
		return nil, err
	}
	stops = append(stops, r.svc.stop)
	meBody, err := bodyOf(newClient(r.c.conns), r.svc.base+"/v1/me", r.s.key)
	if err != nil {
		return nil, err
	}
	if r.floor, err = startProc(ctx, filepath.Join(tmp, "floor.log"), os.Args[0], "-floor", "127.0.0.1:0", "-floor-bytes", fmt.Sprint(len(meBody))); err != nil {
		return nil, err
	}
	stops = append(stops, r.floor.stop)
	if r.rt, err = newRoundTrips(ctx, r.e); err != nil {
		return nil, err
	}
	stops = append(stops, r.rt.close)
	return stop, nil
}

// serveArgs is serve's command line, with an admin listener (whose address
// it keeps) when profiles are asked for.
func (r *engineRun) serveArgs() ([]string, error) {
	args := r.serveCommand()
	if r.c.profileDir == "" {
		return args, nil
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	r.adminAddr = addr
	return append(args, "--admin-addr", addr), nil
}

// serveCommand is every serve's command line on this engine: the
// service's and the recording scenario's alike.
func (r *engineRun) serveCommand(more ...string) []string {
	args := append([]string{"serve", "--db", r.e.dsn, "--unauth-rate-limit", "100000000"}, more...)
	if r.e.redis != "" {
		args = append(args, "--redis", r.e.redis)
	}
	return args
}

// driving is the configuration and client for a scenario at conns
// connections, measuring the servers behind serve when they are local.
func (r *engineRun) driving(conns int) (config, *http.Client) {
	cc := r.c
	cc.conns = conns
	if r.e.redis != "" {
		cc.back = localServers(r.e.dsn, r.e.redis)
	}
	return cc, newClient(conns)
}

// named is name with its number of connections when that is not the
// default's.
func (r *engineRun) named(name string, conns int) string {
	if conns != r.c.conns {
		name += fmt.Sprintf(", %d connections", conns)
	}
	return name
}

// engineWord is the engine's first word, for file names.
func (r *engineRun) engineWord() string { return strings.Fields(r.e.name)[0] }

// scenarios are the reads to measure, those c.only names when it is set.
// GET /me runs again at four times the connections: where a request waits
// on round trips (PostgreSQL, Redis), concurrency is what lets them be
// shared, and the figure shows how much.
func (r *engineRun) scenarios() []readScenario {
	c, s := r.c, r.s
	var out []readScenario
	for _, sc := range []readScenario{
		{"GET /v1/me", "/v1/me", s.key, c.conns},
		{"GET /v1/ai-agents?limit=30", "/v1/ai-agents?limit=30", s.deepKey, c.conns},
		{"GET /v1/ai-agents?limit=100", "/v1/ai-agents?limit=100", s.deepKey, c.conns},
		{"GET /v1/me", "/v1/me", s.key, 4 * c.conns},
	} {
		if c.only != "" && !strings.Contains(sc.name, c.only) {
			continue
		}
		sc.name = r.named(sc.name, sc.conns)
		out = append(out, sc)
	}
	return out
}

// profiler takes serve's profiles during sc, nil when none are asked for.
func (r *engineRun) profiler(sc readScenario) *profiler {
	if r.adminAddr == "" {
		return nil
	}
	return &profiler{base: "http://" + r.adminAddr, dir: r.c.profileDir,
		name: r.engineWord() + "-" + strings.NewReplacer("/", "_", " ", "_", "?", "_", "=", "_").Replace(sc.name),
		// The service half and the deferred work after it (settle).
		seconds: int((r.c.duration + deferredEvery + time.Second) / time.Second)}
}

// read measures sc against the floor in A/B rounds, then, with Redis, the
// round trips each request makes.
func (r *engineRun) read(ctx context.Context, sc readScenario) error {
	fmt.Fprintf(r.out, "[%s] %s…\n", r.e.name, sc.name)
	cc, cl := r.driving(sc.conns)
	a, b, err := abRounds(ctx, cc, cl, r.floor, r.svc, get(r.floor.base+"/", ""), get(r.svc.base+sc.path, sc.key), r.profiler(sc))
	cl.CloseIdleConnections()
	if err != nil {
		return err
	}
	r.t.add(r.e.name, sc.name, fmt.Sprintf("%.0f req/s", b.rps()), ms(b.pct(.5)), ms(b.pct(.99)),
		fmt.Sprintf("%.2f (floor %.0f req/s)", b.rps()/a.rps(), a.rps()))
	fs, fg := a.cpuPerReq()
	ss, sg := b.cpuPerReq()
	r.cpu.add(r.e.name, sc.name, us(ss), us(fs), us(sg), us(fg), cc.back.perReq(b))
	if r.rt == nil {
		return nil
	}
	fig, err := r.rt.perRequest(ctx, cl, sc.conns, get(r.svc.base+sc.path, sc.key))
	cl.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("round trips: %w", err)
	}
	r.t.add(r.e.name, sc.name+": round trips per request", "", "", "", fig)
	return nil
}

// recording measures what usage recording costs GET /v1/me: two more serve
// processes on the same store, one with --usage-recording=true and one
// with false, measured against the floor in the same rounds (interleaved),
// so the drop in the ratio is read within one run. Apart, in two runs,
// the machine's drift between them was as large as the drop.
func (r *engineRun) recording(ctx context.Context, bin, tmp string, conns int) error {
	name := r.named("GET /v1/me, recording on and off", conns)
	if r.c.only != "" && !strings.Contains(name, r.c.only) {
		return nil
	}
	fmt.Fprintf(r.out, "[%s] %s…\n", r.e.name, name)
	var ps []*proc
	defer func() {
		for _, p := range ps {
			p.stop()
		}
	}()
	for _, on := range []string{"true", "false"} {
		p, err := startProc(ctx, filepath.Join(tmp, "serve-"+r.engineWord()+"-recording-"+on+".log"), bin,
			r.serveCommand("--usage-recording="+on)...)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	cc, cl := r.driving(conns)
	defer cl.CloseIdleConnections()
	a, bs, err := interleaved(ctx, cc, cl, r.floor, get(r.floor.base+"/", ""),
		ps, []request{get(ps[0].base+"/v1/me", r.s.key), get(ps[1].base+"/v1/me", r.s.key)}, nil)
	if err != nil {
		return err
	}
	on, off := bs[0].rps()/a.rps(), bs[1].rps()/a.rps()
	r.t.add(r.e.name, name, fmt.Sprintf("%.0f / %.0f req/s", bs[0].rps(), bs[1].rps()), ms(bs[0].pct(.5))+" / "+ms(bs[1].pct(.5)),
		ms(bs[0].pct(.99))+" / "+ms(bs[1].pct(.99)), fmt.Sprintf("on %.2f, off %.2f: drop %.2f (floor %.0f req/s)", on, off, off-on, a.rps()))
	fs, fg := a.cpuPerReq()
	for i, side := range []string{"on", "off"} {
		ss, sg := bs[i].cpuPerReq()
		r.cpu.add(r.e.name, name+": "+side, us(ss), us(fs), us(sg), us(fg), cc.back.perReq(bs[i]))
	}
	return nil
}

// walk pages through every agent, then times the first page against the
// deepest.
func (r *engineRun) walk(ctx context.Context) error {
	fmt.Fprintf(r.out, "[%s] walking every page of %d agents…\n", r.e.name, r.c.agents)
	client := newClient(r.c.conns)
	first, last, pages, err := walk(ctx, client, r.svc.base, r.s.deepKey)
	if err != nil {
		return err
	}
	f, l, err := firstVsDeepest(ctx, client, r.svc.base, r.s.deepKey, last)
	if err != nil {
		return err
	}
	r.t.add(r.e.name, fmt.Sprintf("walk %d pages of 100 (%s)", pages, first), "", ms(f.pct(.5))+" first", ms(l.pct(.5))+" deepest",
		fmt.Sprintf("deepest/first p50 %.2f", float64(l.pct(.5))/float64(f.pct(.5))))
	return nil
}

// writes creates agents from c.writers connections at once.
func (r *engineRun) writes(ctx context.Context) error {
	fmt.Fprintf(r.out, "[%s] POST /v1/ai-agents with %d writers…\n", r.e.name, r.c.writers)
	var seq atomic.Int64
	post := func(w, i int) (*http.Request, error) {
		body := fmt.Sprintf(`{"name":"bench %d-%d-%d"}`, w, i, seq.Add(1))
		req, err := http.NewRequest("POST", r.svc.base+"/v1/ai-agents", strings.NewReader(body))
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+r.s.key)
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}
	wr, err := drive(ctx, newClient(r.c.writers), r.c.writers, time.Duration(r.c.rounds)*r.c.duration, post)
	if err != nil {
		return err
	}
	busy := strings.Count(readFile(r.svc.log), "SQLITE_BUSY")
	r.t.add(r.e.name, fmt.Sprintf("POST /v1/ai-agents, %d writers", r.c.writers), fmt.Sprintf("%.0f req/s", wr.rps()),
		ms(wr.pct(.5)), ms(wr.pct(.99)), fmt.Sprintf("p99/p50 %.1f; 5xx %d; SQLITE_BUSY %d; statuses %v",
			float64(wr.pct(.99))/float64(wr.pct(.5)), count5xx(wr.statuses), busy, wr.statuses))
	return nil
}

// count5xx is how many responses had a 5xx status.
func count5xx(statuses map[int]int) int {
	n := 0
	for code, k := range statuses {
		if code >= 500 {
			n += k
		}
	}
	return n
}

// activeKeysRSS is serve's RSS once c.keys keys were used in the last minute.
func (r *engineRun) activeKeysRSS(ctx context.Context) error {
	fmt.Fprintf(r.out, "[%s] making %d keys active…\n", r.e.name, r.c.keys)
	rss, err := rssWithActiveKeys(ctx, r.st, r.svc, r.c.keys)
	if err != nil {
		return err
	}
	r.t.add(r.e.name, fmt.Sprintf("serve RSS, %d keys active in the last minute", r.c.keys), "", "", "", fmt.Sprintf("%.1f MiB", float64(rss)/(1<<20)))
	return nil
}

func seed(ctx context.Context, st *store.Store, agents int) (seeded, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	svc := keys.New(st, nil)
	mk := func(name string) (string, error) {
		a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: name, Active: true, CreatedAt: now}
		if err := st.CreateAccount(ctx, a); err != nil {
			return "", err
		}
		u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: strings.ToLower(strings.ReplaceAll(name, " ", "-")) + "-" + a.ID[5:15] + "@bench.test",
			Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
		if err := st.CreateUser(ctx, u); err != nil {
			return "", err
		}
		cr, err := svc.Create(ctx, keys.Actor{User: &u}, keys.CreateParams{
			AccountID: a.ID, Name: "bench", Scopes: domain.Scopes, RateLimit: domain.MaxRateLimitPerMinute,
		})
		return cr.Credential, err
	}
	var s seeded
	var err error
	if s.key, err = mk("Bench main"); err != nil {
		return s, err
	}
	if s.deepKey, err = mk("Bench deep"); err != nil {
		return s, err
	}
	k, _, err := st.KeyByPrefix(ctx, strings.Split(s.deepKey, "_")[2])
	if err != nil {
		return s, err
	}
	batch := make([]domain.Agent, 0, 10_000)
	base := now.Add(-time.Duration(agents) * time.Millisecond)
	for i := range agents {
		at := base.Add(time.Duration(i) * time.Millisecond)
		batch = append(batch, domain.Agent{ID: domain.NewID(domain.PrefixAgent, at), AccountID: k.AccountID,
			Name: fmt.Sprintf("agent %07d", i), Enabled: true, CreatedAt: at, UpdatedAt: at})
		if len(batch) == cap(batch) || i == agents-1 {
			if err := st.ImportAgents(ctx, batch); err != nil {
				return s, err
			}
			batch = batch[:0]
		}
	}
	return s, nil
}

// walk follows every page with limit=100 and returns the first page's
// timing label, the deepest page's cursor and the number of pages.
func walk(ctx context.Context, client *http.Client, base, key string) (string, string, int, error) {
	next, pages := "", 0
	start := time.Now()
	for {
		url := base + "/v1/ai-agents?limit=100"
		if next != "" {
			url += "&next=" + next
		}
		b, err := bodyOf(client, url, key)
		if err != nil {
			return "", "", pages, err
		}
		pages++
		var page struct {
			Meta struct {
				Next    *string `json:"next"`
				HasMore bool    `json:"has_more"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return "", "", pages, err
		}
		if !page.Meta.HasMore {
			// next is the cursor that fetched this, the deepest page.
			return fmt.Sprintf("%.1f s", time.Since(start).Seconds()), next, pages, nil
		}
		next = *page.Meta.Next
	}
}

// firstVsDeepest times page 1 against the deepest page, interleaved.
func firstVsDeepest(ctx context.Context, client *http.Client, base, key, deepest string) (result, result, error) {
	var f, l result
	for range 300 {
		for i, url := range []string{base + "/v1/ai-agents?limit=100", base + "/v1/ai-agents?limit=100&next=" + deepest} {
			t0 := time.Now()
			if _, err := bodyOf(client, url, key); err != nil {
				return f, l, err
			}
			if i == 0 {
				f.lat = append(f.lat, time.Since(t0))
			} else {
				l.lat = append(l.lat, time.Since(t0))
			}
		}
	}
	f.sort()
	l.sort()
	return f, l, nil
}

func rssWithActiveKeys(ctx context.Context, st *store.Store, svc *proc, n int) (int64, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Bench keys", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, a); err != nil {
		return 0, err
	}
	u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: "keys-" + a.ID[5:15] + "@bench.test",
		Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
	if err := st.CreateUser(ctx, u); err != nil {
		return 0, err
	}
	ks := keys.New(st, nil)
	creds := make([]string, n)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				cr, err := ks.Create(ctx, keys.Actor{User: &u}, keys.CreateParams{AccountID: a.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
				if err != nil {
					firstErr.Store(err)
					continue
				}
				creds[i] = cr.Credential
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	client := newClient(16)
	var idx atomic.Int64
	r, err := drive(ctx, client, 16, 10*time.Minute, func(int, int) (*http.Request, error) {
		i := idx.Add(1) - 1
		if i >= int64(n) {
			return nil, errDone
		}
		return get(svc.base+"/v1/me", creds[i])(0, 0)
	})
	if err != nil && err != errDone {
		return 0, err
	}
	if bad := non2xx(r.statuses); bad != "" {
		return 0, fmt.Errorf("activating keys: %s", bad)
	}
	runtime.GC()
	return svc.rss()
}

var errDone = fmt.Errorf("done")

// limiterFigures measures the in-process limiter alone.
func limiterFigures(t *table) {
	m := ratelimit.NewMemory(nil)
	defer m.Close()
	keysN := 10_000
	names := make([]string, keysN)
	for i := range names {
		names[i] = fmt.Sprintf("key_%08d", i)
	}
	var ctr atomic.Int64
	res := testing.Benchmark(func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := int(ctr.Add(7919))
			for pb.Next() {
				_, _ = m.Allow(context.Background(), names[i%keysN], 1_000_000)
				i++
			}
		})
	})
	t.add("in process", "rate-limit check, parallel, 10k keys", fmt.Sprintf("%d ns/op", res.NsPerOp()), "", "",
		fmt.Sprintf("%d allocs/op", res.AllocsPerOp()))

	m2 := ratelimit.NewMemory(nil)
	defer m2.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const active = 100_000
	for i := range active {
		for range 3 {
			_, _ = m2.Allow(context.Background(), fmt.Sprintf("key_%08d", i), 1_000_000)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.add("in process", "limiter memory, 100k active keys (ceiling 1,000,000)", "", "", "",
		fmt.Sprintf("%.0f bytes/key", float64(after.HeapAlloc-before.HeapAlloc)/active))
}

func bodyOf(client *http.Client, url, key string) ([]byte, error) {
	req, _ := get(url, key)(0, 0)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b, err
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// freshPostgres creates an empty database next to the one in url.
func freshPostgres(ctx context.Context, url string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	name := "agentapi_bench_" + strings.ToLower(rand.Text()[:10])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	cfg, _ := pgx.ParseConfig(url)
	dsn := strings.Replace(url, "/"+cfg.Database, "/"+name, 1)
	return dsn, func() {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
		conn.Close(context.Background())
	}, nil
}

// proc is a child process serving HTTP.
type proc struct {
	cmd  *exec.Cmd
	base string
	log  string
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// profiler takes serve's profiles through its admin listener.
type profiler struct {
	base, dir, name string
	seconds         int
	done            bool
}

// during runs fn while a CPU profile is taken, then saves the allocation
// profile (allocations since start, sampled) next to it.
func (p *profiler) during(fn func() error) error {
	if p == nil || p.done {
		return fn()
	}
	p.done = true
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	fetch := func(path, file string) error {
		resp, err := http.Get(p.base + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		f, err := os.Create(filepath.Join(p.dir, file))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", p.seconds), p.name+".cpu.prof") }()
	err := fn()
	if perr := <-errc; err == nil {
		err = perr
	}
	if err == nil {
		err = fetch("/debug/pprof/allocs", p.name+".allocs.prof")
	}
	return err
}

func startProc(ctx context.Context, logPath, bin string, args ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		if a == "127.0.0.1:0" {
			args[i] = addr
		}
	}
	if args[0] == "serve" {
		args = append(args, "--addr", addr)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, base: "http://" + addr, log: logPath}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not start; log: %s", bin, readFile(logPath))
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

// cpu is the user and system CPU time the process has used so far (0 when
// it cannot be read: the figures are then missing, not wrong).
func (p *proc) cpu() time.Duration { return pidCPU(p.cmd.Process.Pid) }

// pidCPU is the user and system CPU time process pid has used so far, from
// /proc/<pid>/stat (0 when it cannot be read).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// servers measures the CPU of the servers behind serve, PostgreSQL and
// Redis, when their URLs point at this machine: the CPU time of every
// process of that name (postgres, redis-server), so that the whole cost of
// a request is on the table, not only serve's. Anything else they serve
// meanwhile is counted too. Each process is measured against its own
// earlier reading: one that starts meanwhile (an autovacuum worker)
// counts whole, and one that exits takes its time in the interval with it
// (serve's pool keeps its connections, so under load none of its backends
// does).
type servers struct{ names []string }

// procCPU is one process's reading: which of servers.names it is, and the
// CPU time it has used so far.
type procCPU struct {
	name int
	cpu  time.Duration
}

// localServers returns the servers to measure, nil when neither is local.
func localServers(postgresURL, redisURL string) *servers {
	s := &servers{}
	if isLoopback(postgresURL) {
		s.names = append(s.names, "postgres")
	}
	if isLoopback(redisURL) {
		s.names = append(s.names, "redis-server")
	}
	if len(s.names) == 0 {
		return nil
	}
	return s
}

func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return false
	}
	h := u.Hostname()
	if h == "" || h == "localhost" { // no host: the client's default, this machine
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// perReq formats r's CPU per request of each server ("–" when none is
// measured).
func (s *servers) perReq(r result) string {
	if s == nil {
		return "–"
	}
	labels := map[string]string{"postgres": "PostgreSQL", "redis-server": "Redis"}
	var parts []string
	for i, d := range r.backPerReq() {
		parts = append(parts, labels[s.names[i]]+" "+us(d))
	}
	return strings.Join(parts, ", ")
}

// snapshot reads the CPU time used so far by each process of s's names
// (nil when s is).
func (s *servers) snapshot() map[int]procCPU {
	if s == nil {
		return nil
	}
	out := map[int]procCPU{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		if i := slices.Index(s.names, strings.TrimSpace(string(comm))); i >= 0 {
			out[pid] = procCPU{name: i, cpu: pidCPU(pid)}
		}
	}
	return out
}

// since is the CPU time each of s's names used between the snapshot
// before and now, in the order of s.names (nil when s is). A process whose
// reading went down is a new process under a reused pid: it counts whole.
func (s *servers) since(before map[int]procCPU) []time.Duration {
	if s == nil {
		return nil
	}
	out := make([]time.Duration, len(s.names))
	for pid, now := range s.snapshot() {
		d := now.cpu
		if b, ok := before[pid]; ok && b.name == now.name && b.cpu <= now.cpu {
			d -= b.cpu
		}
		out[now.name] += d
	}
	return out
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// selfCPU is the user and system CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (p *proc) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), "%d", &kb)
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}
