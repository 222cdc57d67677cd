package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// TestKeyPolicyForm: an Owner sets the policy with the form (audited,
// evented once; saving it again writes nothing), a bad lifetime is shown on
// its field; an Admin reads it without a form and cannot post it; a
// Member gets 404 for the page.
func TestKeyPolicyForm(t *testing.T) {
	f := newFixture(t)
	acct, owner := f.account("Acme")
	admin := f.user(acct, "admin@acme.example", domain.RoleAdmin)
	member := f.user(acct, "member@acme.example", domain.RoleAgent)
	ob := f.signedIn(owner)

	p := ob.post("/console/developers/policy", "/console/developers/policy", url.Values{"max_key_lifetime_days": {"731"}})
	wantStatus(t, "lifetime 731", p, http.StatusUnprocessableEntity)
	wantHolds(t, "lifetime 731", p.body, []string{`id="max-lifetime-error"`, `value="731"`}, nil)

	form := url.Values{"max_key_lifetime_days": {"90"}, "require_allowed_ips": {"on"}}
	for range 2 {
		wantRedirect(t, "save", ob.post("/console/developers/policy", "/console/developers/policy", form), "/console/developers/policy?done=policy")
	}
	pol, err := f.keys.Policy(context.Background(), acct.ID)
	if err != nil || pol.MaxKeyLifetimeDays != 90 || !pol.RequireAllowedIPs {
		t.Fatalf("policy %+v %v", pol, err)
	}
	evs, err := f.st.ListEvents(context.Background(), store.EventQuery{AccountID: acct.ID, Types: []string{"key_policy.updated"}, Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].Actor == nil || evs[0].Actor.ID != owner.ID {
		t.Fatalf("events %+v %v", evs, err)
	}
	audit := ob.get("/console/developers/audit")
	wantHolds(t, "audit trail", audit.body, []string{"key policy updated", "maximum key lifetime none → 90 days; allowed addresses optional → required"}, nil)

	ab := f.signedIn(admin)
	ap := ab.get("/console/developers/policy")
	wantStatus(t, "admin reads the policy", ap, http.StatusOK)
	wantHolds(t, "admin's policy page", ap.body, []string{`id="policy-readonly"`, "90 days", "Required"}, []string{`id="policy-form"`})
	csrf := csrfOf(t, ab.get("/console/developers"))
	wantStatus(t, "admin posts the policy", ab.do(http.MethodPost, "/console/developers/policy",
		url.Values{"csrf": {csrf}, "max_key_lifetime_days": {""}}), http.StatusNotFound)
	if pol, _ := f.keys.Policy(context.Background(), acct.ID); pol.MaxKeyLifetimeDays != 90 {
		t.Fatalf("an Admin changed the policy: %+v", pol)
	}
	mb := f.signedIn(member)
	for _, path := range []string{"/console/developers/policy", "/console/developers/health"} {
		wantStatus(t, "member "+path, mb.get(path), http.StatusNotFound)
	}
}

// TestNewKeyFormFollowsPolicy: under a 30-day maximum with addresses
// required, the create form says so and offers no expiry beyond 30 days
// (nor Never); a key posted without an expiry is refused on the expiry
// field, one without addresses on the addresses field, and one within is
// made.
func TestNewKeyFormFollowsPolicy(t *testing.T) {
	f := newFixture(t)
	acct, owner := f.account("Acme")
	if _, err := f.keys.SetPolicy(context.Background(), keys.Actor{User: &owner}, acct.ID,
		domain.KeyPolicy{MaxKeyLifetimeDays: 30, RequireAllowedIPs: true}); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	nk := b.get("/console/developers/keys/new")
	wantHolds(t, "new key form", nk.body,
		[]string{`id="key-policy-note"`, "new keys must expire within 30 days and name allowed IP addresses", `<option value="30" selected>`},
		[]string{`value="never"`, `value="90"`, `value="365"`})
	base := url.Values{"name": {"k"}, "preset": {"aiagent-read"}, "env": {"live"}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	p := b.post("/console/developers/keys/new", "/console/developers/keys", with("expiry", "never", "allowed_ips", "203.0.113.0/24"))
	wantStatus(t, "no expiry", p, http.StatusUnprocessableEntity)
	wantHolds(t, "no expiry", p.body, []string{`id="expiry-error"`, "needs an expiry within 30 days (the account&#39;s key policy)"}, nil)
	p = b.post("/console/developers/keys/new", "/console/developers/keys", with("expiry", "custom", "expires_at",
		f.clock.Now().Add(40*24*time.Hour).Format("2006-01-02T15:04"), "allowed_ips", "203.0.113.0/24"))
	wantStatus(t, "beyond", p, http.StatusUnprocessableEntity)
	wantHolds(t, "beyond", p.body, []string{`id="expires_at-error"`, "must expire within 30 days"}, nil)
	p = b.post("/console/developers/keys/new", "/console/developers/keys", with("expiry", "30"))
	wantStatus(t, "no addresses", p, http.StatusUnprocessableEntity)
	wantHolds(t, "no addresses", p.body, []string{`id="allowed-ips-error"`, "needs allowed addresses"}, nil)
	_, cred := b.created("/console/developers/keys/new", "/console/developers/keys", with("expiry", "30", "allowed_ips", "203.0.113.0/24"))
	if !strings.HasPrefix(cred, "agk_live_") {
		t.Fatalf("credential %q", cred)
	}
}

// TestKeyHealthPage: each active key is flagged for what it lacks, with
// what to do linked; a key with an expiry, narrow scopes and addresses,
// used lately, is healthy; revoked keys are left out.
func TestKeyHealthPage(t *testing.T) {
	f := newFixture(t)
	acct, owner := f.account("Acme")
	ctx := context.Background()
	actor := keys.Actor{User: &owner}
	full, _ := domain.PresetByID("full-access")
	risky, err := f.keys.Create(ctx, actor, keys.CreateParams{AccountID: acct.ID, Name: "Risky", Scopes: full.Scopes})
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ := domain.ParseAllowList("203.0.113.0/24")
	end := f.clock.Now().Add(200 * 24 * time.Hour)
	good, err := f.keys.Create(ctx, actor, keys.CreateParams{AccountID: acct.ID, Name: "Good", Scopes: []domain.Scope{domain.ScopeAgentsRead},
		AllowedIPs: addrs, ExpiresAt: &end})
	if err != nil {
		t.Fatal(err)
	}
	gone := f.key(acct, owner, "Gone")
	if err := f.keys.Revoke(ctx, actor, acct.ID, gone.Key.ID); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * 24 * time.Hour)
	if err := f.st.TouchKeys(ctx, map[string]time.Time{good.Key.ID: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	wantHolds(t, "developers", b.get("/console/developers").body, []string{`href="/console/developers/health"`}, nil)
	p := b.get("/console/developers/health")
	wantStatus(t, "health", p, http.StatusOK)
	riskyRow := regexpFind(`(?s)(<tr data-key-id="`+risky.Key.ID+`">.*?</tr>)`, p.body)
	wantHolds(t, "risky row", riskyRow, []string{`data-flag="no-expiry"`, `data-flag="full-access"`, `data-flag="any-address"`,
		`data-flag="never-used"`, "Narrow the scopes", "/console/developers/keys/" + risky.Key.ID + "/edit",
		"/console/developers/keys/" + risky.Key.ID + "/revoke"}, []string{`data-flag="unused"`})
	goodRow := regexpFind(`(?s)(<tr data-key-id="`+good.Key.ID+`">.*?</tr>)`, p.body)
	wantHolds(t, "good row", goodRow, []string{"healthy"}, []string{"data-flag="})
	wantHolds(t, "health", p.body, []string{"1 of 2 on this page need attention"}, []string{gone.Key.ID})
	// 91 days on, the good key is unused.
	f.clock.Advance(91 * 24 * time.Hour)
	p = f.signedIn(owner).get("/console/developers/health") // the session ran out meanwhile
	goodRow = regexpFind(`(?s)(<tr data-key-id="`+good.Key.ID+`">.*?</tr>)`, p.body)
	wantHolds(t, "good row later", goodRow, []string{`data-flag="unused"`, "Unused for 91 days"}, nil)
}

// TestRotateFormStatesPolicy: under a 30-day maximum, the rotate form of a
// key that never expires says the new key expires within 30 days, and the
// rotation makes it so; with addresses required, a key without them is
// refused with what to do, on the form.
func TestRotateFormStatesPolicy(t *testing.T) {
	f := newFixture(t)
	acct, owner := f.account("Acme")
	k := f.key(acct, owner, "Forever")
	set := func(p domain.KeyPolicy) {
		if _, err := f.keys.SetPolicy(context.Background(), keys.Actor{User: &owner}, acct.ID, p); err != nil {
			t.Fatal(err)
		}
	}
	set(domain.KeyPolicy{MaxKeyLifetimeDays: 30})
	b := f.signedIn(owner)
	path := "/console/developers/keys/" + k.Key.ID + "/rotate"
	wantHolds(t, "rotate form", b.get(path).body, []string{`id="rotate-policy-note"`, "expires within 30 days"}, nil)
	set(domain.KeyPolicy{MaxKeyLifetimeDays: 30, RequireAllowedIPs: true})
	p := b.post(path, path, url.Values{"old_expires": {"manual"}})
	wantStatus(t, "rotate without addresses", p, http.StatusUnprocessableEntity)
	wantHolds(t, "rotate without addresses", p.body, []string{"add its addresses (Edit), then rotate it"}, nil)
	set(domain.KeyPolicy{MaxKeyLifetimeDays: 30})
	b.created(path, path, url.Values{"old_expires": {"manual"}})
	ks, err := f.keys.List(context.Background(), acct.ID)
	if err != nil || len(ks) != 2 || ks[1].ExpiresAt == nil || ks[1].ExpiresAt.Sub(f.clock.Now()) > 30*24*time.Hour {
		t.Fatalf("keys after the rotation: %+v %v", ks, err)
	}
}
