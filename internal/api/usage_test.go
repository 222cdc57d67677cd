package api

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/usage"
)

// Every request that identified a key is recorded — with its route, status
// and error code, a 429 included — and nothing of a body, a query string or
// a header: a credential sent in the query string and a secret in a body
// are found nowhere in the store. A request that identified no key is not
// recorded.
func TestUsageRecordsNoSecret(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		var rec *usage.Recorder
		f := newFixture(t, engine, func(c *Config) {
			rec = usage.New(c.Store, nil, usage.Options{})
			c.Usage = rec
		})
		ctx := context.Background()
		k := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 4 }, allAgentScopes...)
		const bodySecret, querySecret, headerSecret = "body-secret-7f3a", "query-secret-91c2", "header-secret-5d0e"
		f.do(req{method: "GET", path: "/v1/me?token=" + k.Credential, key: k.Credential}).wantStatus(t, 403)
		f.do(req{method: "GET", path: "/v1/me?note=" + querySecret, key: k.Credential, headers: []string{"User-Agent: " + headerSecret}}).wantStatus(t, 400)
		f.send("POST", "/v1/ai-agents", k.Credential, `{"name":"`+bodySecret+`"}`).wantStatus(t, 201)
		f.get("/v1/nothing-here", k.Credential).wantStatus(t, 404)
		f.get("/v1/me", k.Credential).wantStatus(t, 200)
		f.get("/v1/me", k.Credential).wantStatus(t, 429)
		f.get("/v1/me", "").wantStatus(t, 401)
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		logs, _, err := f.st.RequestLogPage(ctx, store.RequestLogQuery{AccountID: f.account.ID, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range logs {
			got = append(got, fmt.Sprintf("%s %s %s %d %s", l.Method, l.Route, l.Path, l.Status, l.ErrorCode))
			if l.KeyID != k.Key.ID || !strings.HasPrefix(l.ID, "req_") || l.Client == "" || l.Duration <= 0 {
				t.Errorf("log %+v", l)
			}
		}
		// Requests in one millisecond are in request id order: compare sets.
		slices.Sort(got)
		want := []string{
			"GET / /v1/nothing-here 404 not_found", // the route as the metrics name it
			"GET /v1 (refused before routing) /v1/me 429 rate_limit_exceeded",
			"GET GET /v1/me /v1/me 200 ",
			"GET GET /v1/me /v1/me 400 invalid_field",
			"POST POST /v1/ai-agents /v1/ai-agents 201 ",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("recorded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		per, err := f.st.AccountKeyRequests(ctx, f.account.ID, f.clock.Now().Add(-time.Hour))
		if err != nil || per[k.Key.ID] != 5 {
			t.Errorf("counted %v, %v; want 5", per, err)
		}
		dump := fmt.Sprintf("%+v %v", logs, per)
		for _, secret := range []string{k.Credential, k.Credential[len(k.Credential)-38:], bodySecret, querySecret, headerSecret, "token="} {
			if strings.Contains(dump, secret) {
				t.Errorf("%q reached the store", secret)
			}
		}
	})
}

// A key identified and refused all the same — revoked, expired, of a
// deactivated account — is recorded for its account as the 401 it was
// answered; a known prefix with a wrong secret (a test key's text presented
// as live is one), an unknown prefix and a malformed credential identify
// nobody and are not recorded.
func TestUsageRecordsRefusedKeys(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		var rec *usage.Recorder
		f := newFixture(t, engine, func(c *Config) {
			rec = usage.New(c.Store, nil, usage.Options{})
			c.Usage = rec
		})
		ctx := context.Background()
		good := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		revoked := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		if err := f.keys.Revoke(ctx, keys.Actor{User: &f.owner}, f.account.ID, revoked.Key.ID); err != nil {
			t.Fatal(err)
		}
		exp := f.clock.Now().Add(time.Minute)
		expiring := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.ExpiresAt = &exp }, allAgentScopes...)
		testEnv := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.Env = domain.EnvTest }, allAgentScopes...)
		other, otherOwner := f.newAccount("Other")
		deactivated := f.keyIn(other, otherOwner, nil, allAgentScopes...)
		if err := f.st.SetAccountActive(ctx, other.ID, false); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
		forged, _ := credential.Generate(domain.EnvLive)
		wrongSecret := rechecksum(t, strings.Replace(forged.Text, forged.Prefix, good.Key.Prefix, 1))
		envSwapped := rechecksum(t, strings.Replace(testEnv.Credential, "agk_test_", "agk_live_", 1))
		unknown, _ := credential.Generate(domain.EnvLive)
		for _, c := range []string{revoked.Credential, expiring.Credential, envSwapped, deactivated.Credential,
			wrongSecret, unknown.Text, good.Credential[:20]} {
			f.get("/v1/me", c).wantError(t, 401, domain.CodeInvalidCredentials)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		got := usageRefusedRecorded(t, f, f.account.ID, other.ID)
		want := map[string]string{}
		for _, k := range []keys.Created{revoked, expiring} {
			want[k.Key.ID] = f.account.ID + " GET /v1/me 401 invalid_credentials"
		}
		want[deactivated.Key.ID] = other.ID + " GET /v1/me 401 invalid_credentials"
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("recorded %v\nwant %v", got, want)
		}
		per, err := f.st.AccountKeyRequests(ctx, f.account.ID, f.clock.Now().Add(-time.Hour))
		if err != nil || len(per) != 2 || per[revoked.Key.ID] != 1 || per[expiring.Key.ID] != 1 {
			t.Errorf("counted %v, %v; want one each for the revoked and expired keys", per, err)
		}
	})
}

// usageRefusedRecorded reads the request log of each account and returns,
// per key id, "account method path status error_code".
func usageRefusedRecorded(t *testing.T, f *fixture, accounts ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, acct := range accounts {
		logs, _, err := f.st.RequestLogPage(context.Background(), store.RequestLogQuery{AccountID: acct, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			got[l.KeyID] = fmt.Sprintf("%s %s %s %d %s", acct, l.Method, l.Path, l.Status, l.ErrorCode)
		}
	}
	return got
}
