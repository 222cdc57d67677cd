package keys_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

type world struct {
	st      *store.Store
	svc     *keys.Service
	now     time.Time
	account domain.Account
	other   domain.Account
	users   map[string]domain.User
}

func setup(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{st: storetest.Open(t, "sqlite"), now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), users: map[string]domain.User{}}
	w.svc = keys.New(w.st, func() time.Time { return w.now })
	mk := func(name string) domain.Account {
		a := domain.Account{ID: domain.NewID(domain.PrefixAccount, w.now), Name: name, Active: true, CreatedAt: w.now}
		if err := w.st.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	w.account, w.other = mk("Acme"), mk("Other")
	for email, spec := range map[string]struct {
		acct   string
		role   domain.Role
		active bool
	}{
		"owner@acme.test": {w.account.ID, domain.RoleOwner, true}, "admin@acme.test": {w.account.ID, domain.RoleAdmin, true},
		"agent@acme.test": {w.account.ID, domain.RoleAgent, true}, "gone@acme.test": {w.account.ID, domain.RoleAdmin, false},
		"owner@other.test": {w.other.ID, domain.RoleOwner, true},
	} {
		u := domain.User{ID: domain.NewID(domain.PrefixUser, w.now), AccountID: spec.acct, Email: email, Role: spec.role,
			PasswordHash: "-", Active: spec.active, CreatedAt: w.now}
		if err := w.st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		w.users[email] = u
	}
	return w
}

func TestManagerRoleRule(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	for _, email := range []string{"owner@acme.test", "admin@acme.test", "OWNER@acme.test"} {
		if _, err := w.svc.Manager(ctx, w.account.ID, email); err != nil {
			t.Errorf("%s refused: %v", email, err)
		}
	}
	for _, email := range []string{"agent@acme.test", "gone@acme.test", "owner@other.test", "nobody@acme.test"} {
		if _, err := w.svc.Manager(ctx, w.account.ID, email); !domain.IsCode(err, domain.CodeAccessDenied) {
			t.Errorf("%s: %v, want access_denied", email, err)
		}
	}
	if _, err := w.svc.Manager(ctx, "acct_nope", "owner@acme.test"); !domain.IsCode(err, domain.CodeNotFound) {
		t.Errorf("unknown account: %v", err)
	}
}

func TestCreateValidates(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	past := w.now.Add(-time.Second)
	base := keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}}
	for name, mod := range map[string]func(*keys.CreateParams){
		"no name":       func(p *keys.CreateParams) { p.Name = "  " },
		"no scopes":     func(p *keys.CreateParams) { p.Scopes = nil },
		"bad scope":     func(p *keys.CreateParams) { p.Scopes = []domain.Scope{"root"} },
		"past expiry":   func(p *keys.CreateParams) { p.ExpiresAt = &past },
		"unknown agent": func(p *keys.CreateParams) { p.AgentIDs = []string{"agt_nope"} },
		"zero-ish rate": func(p *keys.CreateParams) { p.RateLimit = -1 },
		"bad env":       func(p *keys.CreateParams) { p.Env = "prod" },
		"other account": func(p *keys.CreateParams) { p.AccountID = w.other.ID },
		"name not text": func(p *keys.CreateParams) { p.Name = "bad\xffname" },
		"desc not text": func(p *keys.CreateParams) { p.Description = "x\xffy" },
		"desc with NUL": func(p *keys.CreateParams) { p.Description = "x\x00y" },
		"desc with ESC": func(p *keys.CreateParams) { p.Description = "x\x1b[31my" },
		"blank agent":   func(p *keys.CreateParams) { p.AgentIDs = []string{"", ""} },
	} {
		p := base
		mod(&p)
		if _, err := w.svc.Create(ctx, keys.Actor{User: &owner}, p); err == nil {
			t.Errorf("%s: created", name)
		}
	}
	multiline := base
	multiline.Name, multiline.Description = "multi", "line one\nline two\ttabbed"
	if _, err := w.svc.Create(ctx, keys.Actor{User: &owner}, multiline); err != nil {
		t.Fatalf("description with line breaks and tabs: %v", err)
	}
	c, err := w.svc.Create(ctx, keys.Actor{User: &owner}, base)
	if err != nil {
		t.Fatal(err)
	}
	if c.Key.RateLimitPerMinute != domain.DefaultRateLimitPerMinute || c.Key.Env != domain.EnvLive || c.Key.CreatedBy != owner.ID {
		t.Fatalf("defaults: %+v", c.Key)
	}
	if !credential.Equal(c.Key.Hash, c.Credential) {
		t.Fatal("stored hash does not match the credential")
	}
	stored, _ := w.st.GetKey(ctx, w.account.ID, c.Key.ID)
	if string(stored.Hash) == c.Credential || len(stored.Hash) != 32 {
		t.Fatal("the store does not hold exactly the SHA-256")
	}
}

func TestRotateAndRevoke(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, w.now), AccountID: w.account.ID, Name: "a", Enabled: true, CreatedAt: w.now, UpdatedAt: w.now}
	if err := w.st.CreateAgent(ctx, ag); err != nil {
		t.Fatal(err)
	}
	exp := w.now.Add(30 * 24 * time.Hour)
	old, err := w.svc.Create(ctx, keys.Actor{User: &owner}, keys.CreateParams{
		AccountID: w.account.ID, Name: "prod", Scopes: []domain.Scope{domain.ScopeAgentsRead, domain.ScopeAgentsQuery},
		AgentIDs: []string{ag.ID}, ExpiresAt: &exp, RateLimit: 42, Env: domain.EnvTest,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.now = w.now.Add(24 * time.Hour)
	nu, err := w.svc.Rotate(ctx, keys.Actor{User: &owner}, w.account.ID, old.Key.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := nu.Key
	if k.ID == old.Key.ID || nu.Credential == old.Credential || k.RotatedFrom != old.Key.ID ||
		len(k.Scopes) != 2 || len(k.AgentIDs) != 1 || k.AgentIDs[0] != ag.ID || k.RateLimitPerMinute != 42 || k.Env != domain.EnvTest ||
		k.ExpiresAt == nil || !k.ExpiresAt.Equal(w.now.Add(30*24*time.Hour)) {
		t.Fatalf("rotated key %+v", k)
	}
	// The old key stays active until revoked.
	if o, _ := w.svc.Get(ctx, w.account.ID, old.Key.ID); o.Status(w.now) != domain.KeyActive {
		t.Fatal("rotation revoked the old key")
	}
	agent := w.users["owner@other.test"]
	if err := w.svc.Revoke(ctx, keys.Actor{User: &agent}, w.account.ID, old.Key.ID); !domain.IsCode(err, domain.CodeAccessDenied) {
		t.Fatalf("revoke by another account's owner: %v", err)
	}
	if err := w.svc.Revoke(ctx, keys.Actor{User: &owner}, w.other.ID, old.Key.ID); err == nil {
		t.Fatal("revoked through another account")
	}
	w.now = w.now.Add(time.Hour)
	for range 2 { // revoking twice is fine, and records one event
		if err := w.svc.Revoke(ctx, keys.Actor{User: &owner}, w.account.ID, old.Key.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.svc.Rotate(ctx, keys.Actor{User: &owner}, w.account.ID, old.Key.ID, nil); !domain.IsCode(err, domain.CodeImmutableState) {
		t.Fatalf("rotating a revoked key: %v", err)
	}
	events, _ := w.st.ListAuditEvents(ctx, w.account.ID, 10)
	var actions []string
	for _, e := range events {
		actions = append(actions, string(e.Action)+" by "+e.Actor)
	}
	// The rotation is in both keys' histories: one event each.
	want := []string{"revoked by owner@acme.test", "rotated by owner@acme.test", "rotated by owner@acme.test", "created by owner@acme.test"}
	if len(actions) != len(want) {
		t.Fatalf("audit trail %v", actions)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("audit trail %v, want %v", actions, want)
		}
	}
}

func TestSetRateLimit(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	c, _ := w.svc.Create(ctx, keys.Actor{User: &owner}, keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	for _, n := range []int{0, -5, domain.MaxRateLimitPerMinute + 1} {
		if err := w.svc.SetRateLimit(ctx, c.Key.ID, n); !domain.IsCode(err, domain.CodeInvalidValue) {
			t.Errorf("SetRateLimit(%d): %v", n, err)
		}
	}
	if err := w.svc.SetRateLimit(ctx, "key_nope", 5); !domain.IsCode(err, domain.CodeNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if err := w.svc.SetRateLimit(ctx, c.Key.ID, 7); err != nil {
		t.Fatal(err)
	}
	if k, _ := w.svc.Get(ctx, w.account.ID, c.Key.ID); k.RateLimitPerMinute != 7 {
		t.Fatalf("rate %d", k.RateLimitPerMinute)
	}
}

func TestToucherKeepsNewestAndRetries(t *testing.T) {
	var calls []map[string]time.Time
	fail := true
	tc := keys.NewToucher(func(_ context.Context, m map[string]time.Time) error {
		calls = append(calls, m)
		if fail {
			return context.DeadlineExceeded
		}
		return nil
	}, nil, time.Second)
	t0 := time.Unix(100, 0)
	tc.Touch("a", t0)
	tc.Touch("a", t0.Add(-time.Second)) // older: ignored
	tc.Touch("b", t0)
	if err := tc.Flush(context.Background()); err == nil {
		t.Fatal("flush succeeded")
	}
	tc.Touch("a", t0.Add(time.Second)) // newer, while the failed batch is back
	if tc.Pending() != 2 {
		t.Fatalf("pending %d after a failed flush", tc.Pending())
	}
	fail = false
	if err := tc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := calls[len(calls)-1]
	if !last["a"].Equal(t0.Add(time.Second)) || !last["b"].Equal(t0) || tc.Pending() != 0 {
		t.Fatalf("flushed %v", last)
	}
}

// TestRotateAKeyFromBeforeTheTextRules: a key stored before names and
// descriptions had to be text (bytes that are not UTF-8, control
// characters) can still be rotated; the new key's text is cleaned.
func TestRotateAKeyFromBeforeTheTextRules(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	cred, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}
	h := credential.Hash(cred.Text)
	old := domain.APIKey{
		ID: domain.NewID(domain.PrefixKey, w.now), AccountID: w.account.ID, Name: "legacy\xffname",
		Description: "bell\x07 and esc\x1b[31m\nsecond line", Prefix: cred.Prefix, Env: domain.EnvLive, Hash: h[:],
		Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 60, CreatedAt: w.now, CreatedBy: owner.ID,
	}
	if err := w.st.CreateKey(ctx, old); err != nil {
		t.Fatal(err)
	}
	c, err := w.svc.Rotate(ctx, keys.Actor{User: &owner}, w.account.ID, old.ID, nil)
	if err != nil {
		t.Fatalf("rotating a key from before the text rules: %v", err)
	}
	if c.Key.Name != "legacy\uFFFDname (rotated 2026-11-22)" || c.Key.Description != "bell and esc[31m\nsecond line" {
		t.Fatalf("rotated key: name %q, description %q", c.Key.Name, c.Key.Description)
	}
}
