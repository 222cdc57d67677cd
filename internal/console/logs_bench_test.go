package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// benchLogRows is the retention's ceiling of request logs per account.
const benchLogRows = store.LogsPerAccount

// seedLogs writes n request logs over the last six days for keyIDs, in
// the statuses' usual proportions (1 in 100 a 500, 2 in 100 a 429, 5 a
// 400, 12 a 404) and over three routes; it returns one request id.
func seedLogs(tb testing.TB, st *store.Store, accountID string, keyIDs []string, now time.Time, n int) string {
	tb.Helper()
	statuses := [100]int{}
	for i := range statuses {
		switch {
		case i < 1:
			statuses[i] = 500
		case i < 3:
			statuses[i] = 429
		case i < 8:
			statuses[i] = 400
		case i < 20:
			statuses[i] = 404
		default:
			statuses[i] = 200
		}
	}
	routes := []string{"GET /v1/me", "GET /v1/ai-agents", "POST /v1/ai-agents"}
	step := 6 * 24 * time.Hour / time.Duration(n)
	batch := make([]requestlog.Log, 0, 5000)
	var id string
	for i := range n {
		at := now.Add(-time.Duration(n-i) * step)
		id = domain.NewRequestID(at)
		status := statuses[(i*37)%100]
		code := map[int]string{400: "invalid_field", 404: "not_found", 429: "rate_limit_exceeded", 500: "server_error"}[status]
		route := routes[i%3]
		batch = append(batch, requestlog.Log{ID: id, AccountID: accountID, KeyID: keyIDs[i%len(keyIDs)], At: at,
			Method: route[:strings.IndexByte(route, ' ')], Route: route, Path: route[strings.IndexByte(route, ' ')+1:],
			Status: status, ErrorCode: code, Duration: time.Duration(i%5000) * time.Microsecond, Client: "192.0.2.7"})
		if len(batch) == cap(batch) || i == n-1 {
			if err := st.WriteUsage(context.Background(), batch, nil); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return id
}

// BenchmarkLogsPage measures the Logs page of an account holding 100,000
// request logs (the retention's ceiling) on SQLite, over a loopback
// connection: the first page, the next, and each filter and the search.
func BenchmarkLogsPage(b *testing.B) {
	st := storetest.Open(b, store.EngineSQLite)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Acme", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, a); err != nil {
		b.Fatal(err)
	}
	owner := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: "owner@acme.example",
		Role: domain.RoleOwner, PasswordHash: testHash(), Active: true, CreatedAt: now}
	if err := st.CreateUser(ctx, owner); err != nil {
		b.Fatal(err)
	}
	ks := keys.New(st, nil)
	var keyIDs []string
	for i := range 20 {
		k, err := ks.Create(ctx, domainActor(owner), keysParams(a.ID, fmt.Sprintf("key %02d", i), nil))
		if err != nil {
			b.Fatal(err)
		}
		keyIDs = append(keyIDs, k.Key.ID)
	}
	lastID := seedLogs(b, st, a.ID, keyIDs, now, benchLogRows)
	lim := ratelimit.NewMemory(time.Now)
	b.Cleanup(lim.Close)
	srv := httptest.NewServer(console.New(console.Config{Store: st, Keys: ks, Limiter: lim}))
	b.Cleanup(srv.Close)
	get := signedInGetter(b, srv.URL, owner.Email)
	first := get("/console/developers/logs")
	if n := strings.Count(first, ` data-request-id="`); n != 50 {
		b.Fatalf("the first page shows %d requests, want 50", n)
	}
	next := strings.ReplaceAll(nextPageRE.FindStringSubmatch(first)[1], "&amp;", "&")
	hour := now.Add(-72 * time.Hour).Format("2006-01-02T15:04")
	for _, pg := range []struct{ name, path string }{
		{"first", "/console/developers/logs"},
		{"next", next},
		{"key", "/console/developers/logs?key=" + keyIDs[7]},
		{"class-5xx", "/console/developers/logs?status=5xx"},
		{"status-404", "/console/developers/logs?status=404"},
		{"route", "/console/developers/logs?route=" + url.QueryEscape("POST /v1/ai-agents")},
		{"time-range", "/console/developers/logs?from=" + hour + "&to=" + now.Add(-71*time.Hour).Format("2006-01-02T15:04")},
		{"key-and-500", "/console/developers/logs?key=" + keyIDs[3] + "&status=500"},
		{"request-id", "/console/developers/logs?id=" + lastID},
	} {
		b.Run(pg.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				get(pg.path)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// signedInGetter signs email in at base and returns a GET that fails the
// benchmark on anything but a 200.
func signedInGetter(b *testing.B, base, email string) func(string) string {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) string {
		resp, err := client.Get(base + path)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(body)
	}
	csrf := csrfRE.FindStringSubmatch(get("/console/signin"))
	resp, err := client.PostForm(base+"/console/signin", url.Values{"csrf": {csrf[1]}, "email": {email}, "password": {testPassword}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign in: %v %v", err, resp)
	}
	resp.Body.Close()
	return get
}
