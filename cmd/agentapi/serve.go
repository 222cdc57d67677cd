package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/egress"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/metrics"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/store"
	usagerec "github.com/agentapi/agentapi/internal/usage"
	"github.com/agentapi/agentapi/internal/webhooks"
)

// Server timeouts (docs/configuration.md). Write covers a question's 30 s
// model time-out with room. maxHeaderBytes bounds what a connection that
// holds an unfinished header costs (defaultMaxConns): at 64 KiB, about
// 1 MiB of RSS each; a browser's or an SDK's headers are a few KiB.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 16 << 10
	shutdownTimeout   = 30 * time.Second
)

// newHTTPServer is the API listener's server: every timeout set and headers
// bounded, so a slow or silent client cannot hold a connection.
func newHTTPServer(ctx context.Context, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           closeConnIf(h, func(r *http.Request) bool { return len(r.TransferEncoding) > 0 }),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

// closeConnIf closes the connection after answering a request for which
// when holds.
//
// newHTTPServer closes it after a body that came chunked. A request with
// both Content-Length and chunked Transfer-Encoding may be an attempt to
// smuggle a second request past a proxy that reads the other length, and
// RFC 9112 (6.3) has the server close the connection after answering it;
// but Go's server removes the Content-Length before any handler sees the
// request, so such a request cannot be told from a plain chunked one, and
// both are closed. Clients of a JSON API send Content-Length; a chunked
// body costs a reconnect.
func closeConnIf(h http.Handler, when func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if when(r) {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

type serveConfig struct {
	addr, db, redisURL string
	unauthLimit        int
	model              *llm.Client // nil: no --llm-url
	adminAddr          string
	gcHeadroomMiB      int
	maxConns           int
	maxConnsPerAddr    int
	clients            *clientaddr.Resolver
	secretScanningKeys string
	usage              bool // record requests for the console's usage and logs
	webhookAllow       []netip.Prefix
	mail               *mailConfig // nil: no --smtp-url, no email is sent
	// questions in progress, on the instance and per account; MiB of bodies read at once
	maxModelCalls, maxModelCallsPerAccount, maxBodyMemoryMiB int
}

func serve(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("serve")
	var c serveConfig
	fs.StringVar(&c.addr, "addr", cmp.Or(e.getenv("AGENTAPI_ADDR"), "127.0.0.1:8080"), "listen address (env AGENTAPI_ADDR)")
	fs.StringVar(&c.redisURL, "redis", e.getenv("AGENTAPI_REDIS_URL"), "redis:// URL sharing rate-limit state between instances (env AGENTAPI_REDIS_URL)")
	llmURL := fs.String("llm-url", e.getenv("AGENTAPI_LLM_URL"), "base URL of an OpenAI-compatible Chat Completions API (env AGENTAPI_LLM_URL)")
	llmModel := fs.String("llm-model", e.getenv("AGENTAPI_LLM_MODEL"), "model name for --llm-url (env AGENTAPI_LLM_MODEL)")
	trusted := fs.String("trusted-proxies", e.getenv("AGENTAPI_TRUSTED_PROXIES"), "comma-separated IP addresses and CIDR prefixes of the proxies in front (load balancers): for a connection from one of them, the client address is read from X-Forwarded-For (env AGENTAPI_TRUSTED_PROXIES; none when empty)")
	fs.StringVar(&c.adminAddr, "admin-addr", e.getenv("AGENTAPI_ADMIN_ADDR"), "listen address of the admin listener: /metrics and /debug/pprof/ (env AGENTAPI_ADMIN_ADDR; off when empty)")
	fs.StringVar(&c.secretScanningKeys, "secret-scanning-keys", e.getenv("AGENTAPI_SECRET_SCANNING_KEYS"), "file of GitHub's secret-scanning public keys (its public_keys JSON); turns on POST /secret-scanning/github, where leaked keys reported by GitHub are revoked; re-read when it changes (env AGENTAPI_SECRET_SCANNING_KEYS; off when empty)")
	webhookAllow := fs.String("webhook-allow", e.getenv("AGENTAPI_WEBHOOK_ALLOW"), "comma-separated CIDR prefixes and addresses that webhook deliveries may reach although internal (loopback, private), and over http:// (self-hosted receivers, tests; env AGENTAPI_WEBHOOK_ALLOW; none when empty)")
	// --smtp-url's variable is read after parsing, not as the flag's
	// default: serve -h prints defaults, and this one holds a password.
	smtpURL := fs.String("smtp-url", "", "SMTP server for notice emails to Owners and Admins: smtp://[user:password@]host[:port] (STARTTLS when offered; a password never goes unencrypted except to this machine) or smtps://… (TLS); env AGENTAPI_SMTP_URL; off when empty")
	smtpFrom := fs.String("smtp-from", e.getenv("AGENTAPI_SMTP_FROM"), "sender address of notice emails, such as notices@example.com; required with --smtp-url (env AGENTAPI_SMTP_FROM)")
	publicURL := fs.String("public-url", e.getenv("AGENTAPI_PUBLIC_URL"), "the console's base URL as users reach it, such as https://agentapi.example.com, for links in notice emails (env AGENTAPI_PUBLIC_URL; without it, emails say where in the console instead)")
	fs.BoolVar(&c.usage, "usage-recording", e.getenv("AGENTAPI_USAGE_RECORDING") != "off", "record every /v1 request that identified a key, for the console's usage charts and Logs page (env AGENTAPI_USAGE_RECORDING=off turns it off)")
	const positive = "a positive whole number"
	for _, f := range []struct {
		dst            *int
		name, env, use string
		def, least     int
		must           string
	}{
		{&c.unauthLimit, "unauth-rate-limit", "AGENTAPI_UNAUTH_RATE_LIMIT", "requests a minute per client address that identify no key (env AGENTAPI_UNAUTH_RATE_LIMIT)", api.DefaultUnauthRateLimit, 1, positive},
		{&c.gcHeadroomMiB, "gc-headroom-mib", "AGENTAPI_GC_HEADROOM_MIB", "MiB the heap may grow above the live heap before a collection, while the live heap is smaller than that; 0 leaves the runtime's default, and so does an operator's GOGC (env AGENTAPI_GC_HEADROOM_MIB)", defaultGCHeadroomMiB, 0, "a whole number of MiB (0 turns it off)"},
		{&c.maxConns, "max-conns", "AGENTAPI_MAX_CONNS", "connections held open at once; past it, one is closed for a new one (the one stalled longest in its first request's headers, or the one idle longest), or new ones wait until one closes (env AGENTAPI_MAX_CONNS)", defaultMaxConns, 1, positive},
		{&c.maxConnsPerAddr, "max-conns-per-addr", "AGENTAPI_MAX_CONNS_PER_ADDR", "connections one client address (IPv6: its /64) may hold open; trusted proxies are not counted (env AGENTAPI_MAX_CONNS_PER_ADDR)", defaultMaxConnsPerAddr, 1, positive},
		{&c.maxModelCalls, "max-model-calls", "AGENTAPI_MAX_MODEL_CALLS", "questions in progress on this instance; past it a question gets 503 (env AGENTAPI_MAX_MODEL_CALLS)", api.DefaultMaxModelCalls, 1, positive},
		{&c.maxModelCallsPerAccount, "max-model-calls-per-account", "AGENTAPI_MAX_MODEL_CALLS_PER_ACCOUNT", "questions in progress per account; past it a question gets 429 (env AGENTAPI_MAX_MODEL_CALLS_PER_ACCOUNT)", api.DefaultMaxModelCallsPerAccount, 1, positive},
		{&c.maxBodyMemoryMiB, "max-body-memory", "AGENTAPI_MAX_BODY_MEMORY", "MiB of request bodies read and decoded at once; past it a request waits up to 2 s, then gets 503 (env AGENTAPI_MAX_BODY_MEMORY)", api.DefaultMaxBodyMemory >> 20, 1, positive},
	} {
		def, err := envInt(e, f.env, f.def, f.least, f.must)
		if err != nil {
			return err
		}
		fs.IntVar(f.dst, f.name, def, f.use)
	}
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if c.maxConns < 1 || c.maxConnsPerAddr < 1 || c.maxModelCalls < 1 || c.maxModelCallsPerAccount < 1 || c.maxBodyMemoryMiB < 1 {
		return fmt.Errorf("%w: --max-conns, --max-conns-per-addr, --max-model-calls, --max-model-calls-per-account and --max-body-memory must be positive", errUsage)
	}
	if c.gcHeadroomMiB < 0 {
		return fmt.Errorf("%w: --gc-headroom-mib must not be negative", errUsage)
	}
	c.db = *db
	var err error
	if c.clients, err = clientaddr.Parse(*trusted); err != nil {
		return fmt.Errorf("%w: --trusted-proxies: %v", errUsage, err)
	}
	if c.unauthLimit < 1 {
		return fmt.Errorf("%w: --unauth-rate-limit must be positive", errUsage)
	}
	if c.webhookAllow, err = parsePrefixes(*webhookAllow); err != nil {
		return fmt.Errorf("%w: --webhook-allow: %v", errUsage, err)
	}
	if *smtpURL == "" {
		*smtpURL = e.getenv("AGENTAPI_SMTP_URL")
	}
	if c.mail, err = parseMail(*smtpURL, *smtpFrom, *publicURL); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *llmURL != "" {
		c.model, err = llm.New(llm.Config{BaseURL: *llmURL, Model: *llmModel, APIKey: e.getenv("AGENTAPI_LLM_API_KEY")})
		if err != nil {
			return fmt.Errorf("%w: %s", errUsage, oneLine(err))
		}
	}
	return runServer(ctx, e, c)
}

// envInt is the integer environment variable name, def when unset; a value
// below least, or not a whole number, is a usage error saying what it must be.
func envInt(e env, name string, def, least int, must string) (int, error) {
	v := e.getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("%w: %s must be %s", errUsage, name, must)
	}
	return n, nil
}

func runServer(ctx context.Context, e env, c serveConfig) error {
	// The log is buffered (logbuf.go); the deferred Close is the last
	// thing runServer does, on every return and on a panic unwinding it,
	// so the lines before a graceful stop or a fatal error all reach
	// stderr, ahead of run's own error line.
	logOut := newLineBuffer(e.stderr, logBufferSize, logFlushEvery)
	defer logOut.Close()
	log := slog.New(api.JSONLog(logOut))
	m := metrics.New()
	if c.gcHeadroomMiB > 0 && e.getenv("GOGC") == "" {
		defer startGCHeadroom(uint64(c.gcHeadroomMiB) << 20)()
	}

	var scanKeys *secretscan.Keys // nil: POST /secret-scanning/github is off
	if c.secretScanningKeys != "" {
		var err error
		if scanKeys, err = secretscan.LoadKeys(c.secretScanningKeys, log); err != nil {
			return fmt.Errorf("%w: --secret-scanning-keys: %s", errUsage, oneLine(err))
		}
		log.Info("secret scanning: reports accepted at /secret-scanning/github", "path", c.secretScanningKeys, "keys", scanKeys.Count())
		defer reloadOnHangup(scanKeys)()
	}
	limiter, closeLimiter, err := openLimiter(c, log, m)
	if err != nil {
		return err
	}
	defer closeLimiter()

	st, err := openStore(ctx, c.db)
	if err != nil {
		return err
	}
	defer st.Close()
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	tracker, err := openTracker(ctx, loopCtx, st, limiter, log)
	if err != nil {
		return err
	}
	defer tracker.Close()
	if c.redisURL == "" && st.Engine() == store.EnginePostgres { // instances share a database, not Redis
		log.Warn("rate limits are per instance: serve on PostgreSQL without --redis lets each instance admit a key's full ceiling; set --redis (AGENTAPI_REDIS_URL) to share them")
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Closes it on an error below; after a stop it is closed already.
	defer ln.Close()
	// The first user's sign-in link names the listener's address.
	base := "http://" + ln.Addr().String()
	if err := bootstrap(ctx, e, log, st, base, c.db); err != nil {
		return err
	}
	cursorKey, err := st.Secret(ctx, "cursor")
	if err != nil {
		return fmt.Errorf("cursor secret: %w", err)
	}

	toucher := keys.NewToucher(st.TouchKeys, log, time.Second)
	go toucher.Run(loopCtx)
	// The usage recorder (internal/usage): its dropped count is a
	// metric; nothing per key is.
	var recorder *usagerec.Recorder
	var usageRec api.UsageRecorder // nil, not a nil *Recorder, when off
	if c.usage {
		recorder = usagerec.New(st, log, usagerec.Options{})
		usageRec = recorder
		counter(m, "agentapi_usage_dropped_total", "Request logs and counted requests dropped because the usage buffer was full (the store away for long).",
			func() float64 { return float64(recorder.Dropped()) })
		go recorder.Run(loopCtx)
	}
	sweepTicks := time.NewTicker(idemSweepEvery)
	defer sweepTicks.Stop()
	go runIdemSweeper(loopCtx, sweepTicks.C, st.SweepIdempotencyKeys, log)
	eventTicks := time.NewTicker(idemSweepEvery)
	defer eventTicks.Stop()
	go runIdemSweeper(loopCtx, eventTicks.C, sweepEvents(st), log)
	expiryTicks := time.NewTicker(expirySweepEvery)
	defer expiryTicks.Stop()
	go runIdemSweeper(loopCtx, expiryTicks.C, st.SweepKeyExpiry, log)
	deliveries := webhooks.NewWorker(st, egress.New(egress.Config{Allow: c.webhookAllow,
		UserAgent: "agentapi-webhooks/" + versionOf(version, buildInfo())}), nil, log, webhooks.WorkerConfig{})
	delivering := make(chan struct{})
	go func() { defer close(delivering); deliveries.Run(loopCtx) }()
	mailing := startMail(loopCtx, st, c.mail, log)

	// The console shares the API's listener, store and limiter: its
	// sessions live in the store and its sign-in throttle in the limiter,
	// so it works across instances like the API does. Its forms and the
	// API's bodies share one budget of memory (--max-body-memory).
	bodies := bodybudget.New(int64(c.maxBodyMemoryMiB)<<20, 0)
	hooks := webhooks.New(st, nil, c.webhookAllow)
	cons := console.New(console.Config{Store: st, Keys: keys.New(st, nil), Limiter: limiter, Log: log, ClientAddr: c.clients,
		Bodies: bodies, Webhooks: hooks, MailEnabled: c.mail != nil})
	var background sync.WaitGroup // writes requests leave behind (api.Config.Background)
	authn, err := keys.NewAuthenticator(keys.AuthConfig{Store: st, Fresh: tracker, Limiter: limiter, Log: log, Metrics: m, Background: &background})
	if err != nil {
		return err
	}
	lists := agents.NewListCache()
	counter(m, "agentapi_key_cache_hits_total", "Key lookups answered from memory.", func() float64 { return float64(authn.CacheStats().Hits) })
	counter(m, "agentapi_key_cache_misses_total", "Key lookups that read the key from the store.", func() float64 { return float64(authn.CacheStats().Misses) })
	counter(m, "agentapi_key_epoch_checks_total", "Key epoch checks run (shared by concurrent lookups).", func() float64 { return float64(authn.CacheStats().Checks) })
	counter(m, "agentapi_list_cache_hits_total", "Agent list pages answered from memory (SQLite).", func() float64 { return float64(lists.Stats().Hits) })
	counter(m, "agentapi_list_cache_misses_total", "Agent list pages read from the store (SQLite).", func() float64 { return float64(lists.Stats().Misses) })
	handler, err := api.New(api.Config{
		Store: st, Limiter: limiter, UnauthLimiter: limiter, UnauthRateLimit: c.unauthLimit,
		Toucher: toucher, Log: log, CursorKey: cursorKey, LLM: c.model, Metrics: m, Console: cons,
		Background: &background, ClientAddr: c.clients,
		SecretScanningKeys: scanKeys, Usage: usageRec, Fresh: tracker, Authenticator: authn, ListCache: lists,
		MaxModelCalls: c.maxModelCalls, MaxModelCallsPerAccount: c.maxModelCallsPerAccount, Bodies: bodies,
		Webhooks: hooks,
	})
	if err != nil {
		return err
	}
	admin, err := startAdmin(c.adminAddr, m, log)
	if err != nil {
		return err
	}
	in := &instance{log: log, admin: admin, stopLoops: stopLoops, background: &background, toucher: toucher, recorder: recorder,
		delivering: delivering, mailing: mailing}
	// Once a stop has begun, each answer closes its connection.
	in.srv = newHTTPServer(ctx, closeConnIf(handler, func(*http.Request) bool { return in.draining.Load() }), log)
	in.ln = limitConns(ln, c.maxConns, c.maxConnsPerAddr, c.clients, log)
	in.srv.ConnState = in.ln.connState
	served := make(chan error, 1)
	go func() { served <- in.srv.Serve(in.ln) }()
	log.Info("listening", "addr", in.ln.Addr().String(), "api", base+"/v1", "console", base+"/console/",
		"store", st.Engine(), "redis", c.redisURL != "", "llm", c.model != nil)
	// Startup lines go out at once: whoever starts serve waits for them.
	_ = logOut.Flush()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return in.stop()
}

// openLimiter is the rate limiter: in process, or on Redis (with the
// in-process one as its fallback) when --redis is set. closeAll closes
// what it opened, the last opened first.
func openLimiter(c serveConfig, log *slog.Logger, m *metrics.Metrics) (limiter ratelimit.Limiter, closeAll func(), err error) {
	mem := ratelimit.NewMemory(nil)
	if c.redisURL == "" {
		return mem, func() { mem.Close() }, nil
	}
	// The limiter's options: RESP2 unless the URL asks, and every
	// round trip bounded by the limiter's own 250 ms, so a Redis that
	// stops answering is given up that soon, not after go-redis's 5 s.
	// A redis+cluster:// URL gives a cluster client (docs/production.md,
	// Redis Cluster).
	rc, err := ratelimit.NewClient(c.redisURL)
	if err != nil {
		mem.Close()
		return nil, nil, fmt.Errorf("%w: --redis is not a redis:// or redis+cluster:// URL", errUsage)
	}
	// The client's own messages (a failed dial, a bad connection) go to
	// the JSON log at debug level, below what serve prints (info), not
	// as plain text to stderr: the limiter logs an outage once, at
	// warn, with its cause.
	redis.SetLogger(redisLog{log})
	rl := ratelimit.NewRedis(rc, mem, log)
	counter(m, "agentapi_ratelimit_fallback_total", "Rate-limit decisions made in process because Redis was unavailable.",
		func() float64 { return float64(rl.Fallbacks()) })
	return rl, func() {
		rl.Close()
		rc.Close()
		mem.Close()
	}, nil
}

// openTracker is the tracker that keeps what this instance holds fresh
// (internal/fresh). With a Redis limiter its mirror and list versions
// live on the limiter's Redis (one server or a cluster): every write of
// this process raises them after its commit, each request's decision
// checks held keys against them (docs/production.md), and the store
// records that its instances do so. Its repair runs until loops ends.
func openTracker(ctx, loops context.Context, st *store.Store, limiter ratelimit.Limiter, log *slog.Logger) (*fresh.Tracker, error) {
	rl, ok := limiter.(*ratelimit.Redis)
	if !ok {
		return fresh.New(st, fresh.Options{Log: log}), nil
	}
	t, err := fresh.Open(ctx, st, rl.Client(), log)
	if err != nil {
		return nil, err
	}
	// Operator commands on this store now need --redis (openForKeys).
	if err := st.MarkKeyEpochMirrored(ctx); err != nil {
		return nil, err
	}
	go t.Repair(loops)
	return t, nil
}

// startAdmin serves operators only, on --admin-addr (nil when none is
// set): metrics and profiles, on a listener of their own that is never
// exposed with the API.
func startAdmin(addr string, m *metrics.Metrics, log *slog.Logger) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	aln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen (admin): %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	// net/http/pprof registers its handlers on the default mux, which
	// nothing else in the program uses.
	mux.Handle("/debug/pprof/", http.DefaultServeMux)
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
	go func() { _ = admin.Serve(aln) }()
	log.Info("admin listening", "addr", aln.Addr().String())
	return admin, nil
}

// instance is what a serving runServer stops on a graceful stop.
type instance struct {
	log        *slog.Logger
	ln         *connLimit
	draining   atomic.Bool
	srv        *http.Server
	admin      *http.Server // nil: no admin listener
	stopLoops  context.CancelFunc
	background *sync.WaitGroup
	toucher    *keys.Toucher
	recorder   *usagerec.Recorder // nil: usage not recorded
	// delivering closes when the webhook worker has stopped: its attempts
	// in flight recorded (each bounded by its 15 s time-out).
	delivering <-chan struct{}
	// mailing closes when the mail worker has stopped (at once without
	// --smtp-url).
	mailing <-chan struct{}
}

// stop stops accepting, lets in-flight requests finish, then writes what
// the write-behind holds, so a graceful stop loses nothing. Between the
// two, requests that arrive on connections already open are still
// answered, each with Connection: close, for up to drainGrace: closing
// an idle keep-alive connection at once would drop a request its client
// had just sent on it, unanswered.
func (in *instance) stop() error {
	in.log.Info("shutting down")
	in.draining.Store(true)
	_ = in.ln.Close()
	in.ln.wait(drainGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutErr := in.srv.Shutdown(shutCtx)
	if in.admin != nil {
		_ = in.admin.Shutdown(shutCtx)
	}
	in.stopLoops()
	in.background.Wait() // each is bounded by its own time-out
	select {
	case <-in.delivering:
	case <-shutCtx.Done(): // an attempt cut short leaves its lease to run out: another instance makes it
	}
	select {
	case <-in.mailing:
	case <-shutCtx.Done(): // likewise for a mail: it is sent again after its lease (at least once)
	}
	if err := in.toucher.Flush(shutCtx); err != nil {
		return fmt.Errorf("flush last_used_at: %w", err)
	}
	if in.recorder != nil {
		if err := in.recorder.Flush(shutCtx); err != nil {
			return fmt.Errorf("flush usage: %w", err)
		}
	}
	if shutErr != nil && !errors.Is(shutErr, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", shutErr)
	}
	in.log.Info("stopped")
	return nil
}

// bootstrap makes a fresh database usable (accounts.Service.Bootstrap):
// on the very first start on SQLite it creates an account and its Owner
// with a one-time password, and prints what to do next. Only the
// password's hash is stored. PostgreSQL is production's: there it creates
// nothing and logs how to create an account with the CLI.
func bootstrap(ctx context.Context, e env, log *slog.Logger, st *store.Store, base, db string) error {
	first, created, err := accounts.New(st, accounts.Hash, nil).Bootstrap(ctx)
	if first.NoAccount {
		log.Warn(`the database has no account yet: create one with "agentapi account create --name NAME", ` +
			`then its Owner with "agentapi user create --account ID --email EMAIL --role owner" (password on standard input)`)
	}
	if err != nil || !created {
		return err
	}
	fmt.Fprintf(e.stdout, `
agentapi: first start on an empty database; created account %s and its Owner.

  Console:   %s/console/
  Email:     %s
  Password:  %s
             (shown only now; you choose your own at first sign-in)

  Create an API key (or use the console, Settings → Developers), in another terminal here:
%s    export AGENTAPI_KEY=$(%s key create%s --account %s --as %s --name "First key" --preset full-access)

  Then:
    curl -H "Authorization: Bearer $AGENTAPI_KEY" %s/v1/me

`, first.Account.ID, base, first.Owner.Email, first.Password, urlLine(base), selfCommand(), dbArg(db), first.Account.ID, first.Owner.Email, base)
	return nil
}

// urlLine is the banner's line that points the api commands at this
// listener, which they would otherwise look for at the default address
// (docs/client.md, API CLI); none when it is the default.
func urlLine(base string) string {
	if base+"/v1" == defaultAPIURL {
		return ""
	}
	return "    export AGENTAPI_URL=" + shellQuote(base+"/v1") + "\n"
}

// selfCommand is how the banner's commands start: as the README runs
// them (go run, whose executable lives in a go-build directory), or as
// this executable was started.
func selfCommand() string {
	if strings.Contains(os.Args[0], "go-build") {
		return "go run ./cmd/agentapi"
	}
	return shellQuote(os.Args[0])
}

// dbArg is the banner's --db: none for the default, never a database
// password.
func dbArg(db string) string {
	if db == defaultDB {
		return ""
	}
	if u, err := url.Parse(db); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return ` --db "$AGENTAPI_DB"`
		}
	}
	return " --db " + shellQuote(db)
}

func shellQuote(s string) string {
	for _, r := range s {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "'" + s + "'"
		}
	}
	return s
}

// counter registers the counter name, read from f at each scrape.
func counter(m *metrics.Metrics, name, help string, f func() float64) {
	m.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// redisLog is go-redis's logger: its lines become debug records of the
// service's JSON log instead of plain text on stderr.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// drainGrace bounds how long a stop keeps answering requests on the
// connections already open, after it stopped accepting new ones.
const drainGrace = time.Second

// parsePrefixes reads a comma-separated list of CIDR prefixes and single
// addresses (a /32 or /128).
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or CIDR prefix (such as 10.0.0.0/8 or 127.0.0.1)", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func buildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// reloadOnHangup re-reads the secret-scanning keys file on every SIGHUP
// until the stop it returns is called (docs/secret-scanning.md). serve
// without a keys file leaves SIGHUP as it is.
func reloadOnHangup(ks *secretscan.Keys) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				ks.Reload()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
