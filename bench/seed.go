package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// sizes is how much a store holds: keys in all, agents in the listed
// account, request logs in the logged account.
type sizes struct{ keys, agents, logs int }

// seeded is what the scenarios need from a store: who asks, by their
// request headers. Three accounts: one asks GET /me, one lists its agents,
// and the third, whose logs no measured request adds to, reads its logs
// in the console.
type seeded struct{ as [3]http.Header }

const (
	asMe = iota
	asLister
	asLogger
)

// seed fills the store at dsn to z: the accounts, users and keys through
// the store as the service makes them, then the bulk (keys, agents) with
// one INSERT … SELECT over a series each, and the logs in batches.
func seed(ctx context.Context, dsn string, z sizes) (seeded, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return seeded{}, err
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var s seeded
	var accts [3]account
	for i, name := range []string{"Bench me", "Bench list", "Bench logs"} {
		if accts[i], err = newAccount(ctx, st, name, now); err != nil {
			return s, err
		}
	}
	me, list, logged := accts[asMe], accts[asLister], accts[asLogger]
	cookie, err := newSession(ctx, st, logged.user, now)
	if err != nil {
		return s, err
	}
	s.as = [3]http.Header{{"Authorization": {"Bearer " + me.key.Credential}}, {"Authorization": {"Bearer " + list.key.Credential}}, {"Cookie": {cookie}}}
	if err := bulk(ctx, dsn, me.key.Key.ID, list.user.AccountID, z, now); err != nil {
		return s, err
	}
	if err := writeLogs(ctx, st, logged, z.logs, now); err != nil {
		return s, err
	}
	// The seeding's write-ahead log (SQLite) is not the service's to pay for.
	return s, st.Checkpoint(ctx)
}

// account is an account with its owner and a full-access key.
type account struct {
	user domain.User
	key  keys.Created
}

func newAccount(ctx context.Context, st *store.Store, name string, now time.Time) (account, error) {
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: name, Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, a); err != nil {
		return account{}, err
	}
	u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: strings.ToLower(a.ID) + "@bench.test",
		Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
	if err := st.CreateUser(ctx, u); err != nil {
		return account{}, err
	}
	k, err := keys.New(st, nil).Create(ctx, keys.Actor{User: &u}, keys.CreateParams{
		AccountID: a.ID, Name: "bench", Scopes: domain.Scopes, RateLimit: domain.MaxRateLimitPerMinute,
	})
	return account{user: u, key: k}, err
}

// newSession signs u in to the console, as the sign-in form does, and
// returns the session's cookie.
func newSession(ctx context.Context, st *store.Store, u domain.User, now time.Time) (string, error) {
	token := rand.Text() + rand.Text()
	h := sha256.Sum256([]byte(token))
	err := st.CreateSession(ctx, domain.Session{TokenHash: h[:], UserID: u.ID, CSRF: rand.Text(), CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)})
	return "agentapi_session=" + token, err
}

// bulk adds z.keys-1 keys beside keyID (copies of it under other ids and
// prefixes), and z.agents agents to account, one created a millisecond
// after the other, each in one statement.
func bulk(ctx context.Context, dsn, keyID, account string, z sizes, now time.Time) error {
	db, e, err := openRaw(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	cols := "account_id, name, description, env, hash, scopes, rate_limit_per_minute, last_used_at, expires_at, created_at, created_by, revoked_at, revoked_by, rotated_from, allowed_ips"
	_, err = db.ExecContext(ctx, e.series(z.keys-1)+`INSERT INTO api_keys (id, prefix, `+cols+`)
		SELECT 'key_' || `+e.pad+`, 'bench' || i, `+cols+` FROM n, api_keys WHERE api_keys.id = $1`, keyID)
	if err != nil {
		return fmt.Errorf("seed keys: %w", err)
	}
	_, err = db.ExecContext(ctx, e.series(z.agents)+`INSERT INTO agents (id, account_id, name, name_key, instructions, enabled, created_at, updated_at)
		SELECT 'agt_' || `+e.pad+`, CAST($1 AS TEXT), 'agent ' || `+e.pad+`, 'agent ' || `+e.pad+`, '', true, CAST($2 AS BIGINT) + i, CAST($2 AS BIGINT) + i FROM n`,
		account, now.Add(-time.Duration(z.agents)*time.Millisecond).UnixMilli())
	if err != nil {
		return fmt.Errorf("seed agents: %w", err)
	}
	if e.analyze != "" {
		_, err = db.ExecContext(ctx, e.analyze)
	}
	return err
}

// dialect is what bulk's SQL says differently on each engine: a series of
// integers n(i) from 1, i zero-padded to an id's 26 digits, and the
// statement that updates the planner's statistics.
type dialect struct {
	series  func(n int) string
	pad     string
	analyze string
}

var (
	sqliteDialect = dialect{
		series: func(n int) string {
			return fmt.Sprintf("WITH RECURSIVE n(i) AS (SELECT 1 WHERE %[1]d > 0 UNION ALL SELECT i + 1 FROM n WHERE i < %[1]d) ", n)
		},
		pad: "printf('%026d', i)",
	}
	postgresDialect = dialect{
		series: func(n int) string { return fmt.Sprintf("WITH n(i) AS (SELECT generate_series(1, %d)) ", n) },
		pad:    "lpad(i::text, 26, '0')",
		// Fresh statistics, and no autovacuum of the new rows during the
		// measures.
		analyze: "VACUUM ANALYZE",
	}
)

// openRaw opens dsn with the store's driver, for the bulk statements.
func openRaw(dsn string) (*sql.DB, dialect, error) {
	if store.IsPostgres(dsn) {
		db, err := sql.Open("pgx", dsn)
		return db, postgresDialect, err
	}
	db, err := sql.Open("sqlite", dsn+"?_pragma=busy_timeout(10000)")
	return db, sqliteDialect, err
}

// writeLogs stores n request logs of a's key, the newest now, 100 ms apart,
// in batches as the usage recorder writes them.
func writeLogs(ctx context.Context, st *store.Store, a account, n int, now time.Time) error {
	batch := make([]requestlog.Log, 0, 10_000)
	for i := range n {
		at := now.Add(-time.Duration(n-i) * 100 * time.Millisecond)
		batch = append(batch, requestlog.Log{ID: domain.NewRequestID(at), AccountID: a.user.AccountID, KeyID: a.key.Key.ID,
			At: at, Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: 200, Duration: time.Millisecond, Client: "127.0.0.1"})
		if len(batch) == cap(batch) || i == n-1 {
			if err := st.WriteUsage(ctx, batch, nil); err != nil {
				return fmt.Errorf("seed logs: %w", err)
			}
			batch = batch[:0]
		}
	}
	return nil
}
