package keys_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// fieldsOf is the fields err names, or nil.
func fieldsOf(err error) []string {
	var de *domain.Error
	if !errors.As(err, &de) {
		return nil
	}
	var out []string
	for _, f := range de.Fields {
		out = append(out, f.Field)
	}
	return out
}

// setPolicy sets the account's policy as its Owner.
func (w *world) setPolicy(t *testing.T, p domain.KeyPolicy) {
	t.Helper()
	owner := w.users["owner@acme.test"]
	if _, err := w.svc.SetPolicy(context.Background(), keys.Actor{User: &owner}, w.account.ID, p); err != nil {
		t.Fatal(err)
	}
}

// TestCreateFollowsKeyPolicy: under a 90-day maximum with allowed
// addresses required, a new key without an expiry, with one beyond 90 days
// or without addresses is refused on the field at fault (both at once when
// both are), and one within is made; a key made before the policy is not
// touched by it.
func TestCreateFollowsKeyPolicy(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	before, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "old", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	w.setPolicy(t, domain.KeyPolicy{MaxKeyLifetimeDays: 90, RequireAllowedIPs: true})
	addrs, err := domain.ParseAllowList("203.0.113.0/24")
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *time.Time { e := w.now.Add(d); return &e }
	for _, tc := range []struct {
		name    string
		expires *time.Time
		allowed domain.AllowList
		want    []string
	}{
		{"no expiry", nil, addrs, []string{"expires_at"}},
		{"beyond", at(91 * 24 * time.Hour), addrs, []string{"expires_at"}},
		{"no addresses", at(30 * 24 * time.Hour), nil, []string{"allowed_ips"}},
		{"both", nil, nil, []string{"expires_at", "allowed_ips"}},
		{"within", at(90 * 24 * time.Hour), addrs, nil},
	} {
		_, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: tc.name,
			Scopes: []domain.Scope{domain.ScopeAgentsRead}, ExpiresAt: tc.expires, AllowedIPs: tc.allowed})
		if got := fieldsOf(err); !slices.Equal(got, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v (fields %v), want fields %v", tc.name, err, got, tc.want)
		}
		if tc.want != nil && domain.ErrorCode(err) == domain.CodeServerError {
			t.Errorf("%s: %v is not a contract error", tc.name, err)
		}
	}
	if k, err := w.svc.Get(ctx, w.account.ID, before.Key.ID); err != nil || k.ExpiresAt != nil || k.RevokedAt != nil {
		t.Fatalf("the key made before the policy: %+v %v", k, err)
	}
}

// TestRotateFollowsKeyPolicy: a rotation makes a new key, so it meets the
// policy: a key without an expiry or with a longer lifetime is replaced by
// one expiring at the maximum, one within keeps its lifetime, and a key
// without allowed addresses where they are required is not rotated (and
// nothing is made).
func TestRotateFollowsKeyPolicy(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	addrs, _ := domain.ParseAllowList("203.0.113.7")
	mk := func(name string, expires *time.Time, allowed domain.AllowList) domain.APIKey {
		c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: name,
			Scopes: []domain.Scope{domain.ScopeAgentsRead}, ExpiresAt: expires, AllowedIPs: allowed})
		if err != nil {
			t.Fatal(err)
		}
		return c.Key
	}
	year := w.now.Add(365 * 24 * time.Hour)
	month := w.now.Add(30 * 24 * time.Hour)
	never, long, short := mk("never", nil, addrs), mk("long", &year, addrs), mk("short", &month, addrs)
	open := mk("open", &month, nil)
	w.setPolicy(t, domain.KeyPolicy{MaxKeyLifetimeDays: 90, RequireAllowedIPs: true})
	w.now = w.now.Add(time.Hour)
	maxAt := w.now.Add(90 * 24 * time.Hour)
	for _, tc := range []struct {
		key  domain.APIKey
		want time.Time
	}{{never, maxAt}, {long, maxAt}, {short, w.now.Add(30 * 24 * time.Hour)}} {
		nu, err := w.svc.Rotate(ctx, actor, w.account.ID, tc.key.ID, nil)
		if err != nil {
			t.Fatalf("rotate %s: %v", tc.key.Name, err)
		}
		if nu.Key.ExpiresAt == nil || !nu.Key.ExpiresAt.Equal(tc.want) {
			t.Errorf("rotate %s: new key expires %v, want %v", tc.key.Name, nu.Key.ExpiresAt, tc.want)
		}
	}
	n, _ := w.svc.List(ctx, w.account.ID)
	_, err := w.svc.Rotate(ctx, actor, w.account.ID, open.ID, nil)
	if got := fieldsOf(err); !slices.Equal(got, []string{"allowed_ips"}) {
		t.Fatalf("rotate a key without addresses: %v (fields %v)", err, got)
	}
	if m, _ := w.svc.List(ctx, w.account.ID); len(m) != len(n) {
		t.Fatalf("a refused rotation made a key: %d keys, were %d", len(m), len(n))
	}
}

// TestSetPolicyOwnersOnly: Admins, Members and users of another account
// cannot change the policy; a lifetime outside 1–730 days is refused on
// its field; an Owner's change is audited once and saving it again writes
// nothing.
func TestSetPolicyOwnersOnly(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	p := domain.KeyPolicy{MaxKeyLifetimeDays: 30}
	for _, email := range []string{"admin@acme.test", "agent@acme.test", "owner@other.test"} {
		u := w.users[email]
		if _, err := w.svc.SetPolicy(ctx, keys.Actor{User: &u}, w.account.ID, p); domain.ErrorCode(err) != domain.CodeAccessDenied {
			t.Errorf("%s: %v, want access_denied", email, err)
		}
	}
	if _, err := w.svc.SetPolicy(ctx, keys.Actor{Support: true}, w.account.ID, p); domain.ErrorCode(err) != domain.CodeAccessDenied {
		t.Errorf("support: %v, want access_denied", err)
	}
	owner := w.users["owner@acme.test"]
	for _, days := range []int{-1, 731} {
		_, err := w.svc.SetPolicy(ctx, keys.Actor{User: &owner}, w.account.ID, domain.KeyPolicy{MaxKeyLifetimeDays: days})
		if got := fieldsOf(err); !slices.Equal(got, []string{"max_key_lifetime_days"}) {
			t.Errorf("%d days: %v", days, err)
		}
	}
	for range 2 {
		got, err := w.svc.SetPolicy(ctx, keys.Actor{User: &owner}, w.account.ID, p)
		if err != nil || got.MaxKeyLifetimeDays != 30 {
			t.Fatalf("owner: %+v %v", got, err)
		}
	}
	evs, err := w.st.ListAuditEvents(ctx, w.account.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Action != domain.AuditKeyPolicyUpdated || evs[0].ActorID != owner.ID ||
		evs[0].Detail != "maximum key lifetime none → 30 days" {
		t.Fatalf("audit %+v", evs)
	}
}
