package keys_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// Rotating a rotated key replaces the "(rotated DATE)" suffix, and never
// makes a second key of the same name, even twice on one day.
func TestRotatedNamesStayUnique(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	k, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "Billing sync (rotated)", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Billing sync (rotated 2026-11-22)",
		"Billing sync (rotated 2026-11-22, 2)",
		"Billing sync (rotated 2026-11-22, 3)",
	}
	names := map[string]bool{k.Key.Name: true}
	cur := k.Key
	for i, name := range want {
		nu, err := w.svc.Rotate(ctx, actor, w.account.ID, cur.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if nu.Key.Name != name {
			t.Fatalf("rotation %d: name %q, want %q", i+1, nu.Key.Name, name)
		}
		if names[nu.Key.Name] {
			t.Fatalf("rotation %d made a second key named %q", i+1, nu.Key.Name)
		}
		names[nu.Key.Name] = true
		cur = nu.Key
	}
	w.now = w.now.Add(24 * time.Hour)
	nu, err := w.svc.Rotate(ctx, actor, w.account.ID, cur.ID, nil)
	if err != nil || nu.Key.Name != "Billing sync (rotated 2026-11-23)" {
		t.Fatalf("next day: %q %v", nu.Key.Name, err)
	}
	// A name at the length limit keeps the suffix whole.
	long := strings.Repeat("x", keys.MaxNameLength)
	k2, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: long, Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	nu, err = w.svc.Rotate(ctx, actor, w.account.ID, k2.Key.ID, nil)
	if err != nil || !strings.HasSuffix(nu.Key.Name, "x (rotated 2026-11-23)") || len([]rune(nu.Key.Name)) != keys.MaxNameLength {
		t.Fatalf("long name: %q %v", nu.Key.Name, err)
	}
}

// Rotate's choice of when the old key stops working sets its expires_at,
// in the old key's history; it never extends an expiry that comes sooner.
func TestRotateSchedulesOldKeyExpiry(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	mk := func(name string, expires *time.Time) domain.APIKey {
		c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: name, Scopes: []domain.Scope{domain.ScopeAgentsRead}, ExpiresAt: expires})
		if err != nil {
			t.Fatal(err)
		}
		return c.Key
	}
	dur := func(d time.Duration) *time.Duration { return &d }
	soon := w.now.Add(30 * time.Minute)
	for _, tc := range []struct {
		name    string
		expires *time.Time
		in      *time.Duration
		want    *time.Time
		status  domain.KeyStatus
	}{
		{"by hand", nil, nil, nil, domain.KeyActive},
		{"now", nil, dur(0), ptr(w.now), domain.KeyExpired},
		{"in a day", nil, dur(24 * time.Hour), ptr(w.now.Add(24 * time.Hour)), domain.KeyActive},
		{"sooner already", &soon, dur(7 * 24 * time.Hour), &soon, domain.KeyActive},
	} {
		old := mk(tc.name, tc.expires)
		if _, err := w.svc.Rotate(ctx, actor, w.account.ID, old.ID, tc.in); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := w.svc.Get(ctx, w.account.ID, old.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got.ExpiresAt == nil) != (tc.want == nil) || (got.ExpiresAt != nil && !got.ExpiresAt.Equal(*tc.want)) {
			t.Fatalf("%s: old key expires %v, want %v", tc.name, got.ExpiresAt, tc.want)
		}
		if got.Status(w.now) != tc.status {
			t.Fatalf("%s: old key %s, want %s", tc.name, got.Status(w.now), tc.status)
		}
		evs, _ := w.st.ListKeyAuditEvents(ctx, w.account.ID, old.ID)
		if len(evs) != 2 || evs[0].Action != "rotated" || (tc.in != nil && tc.expires == nil) != strings.Contains(evs[0].Detail, "stops working") {
			t.Fatalf("%s: old key's history %+v", tc.name, evs)
		}
	}
	if _, err := w.svc.Rotate(ctx, actor, w.account.ID, mk("neg", nil).ID, dur(-time.Second)); !domain.IsCode(err, domain.CodeInvalidValue) {
		t.Fatalf("negative: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// Rename changes a key's name and description by the create rules, and the
// audit trail says so; another account's user cannot.
func TestRename(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "old", Description: "d", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	id := c.Key.ID
	if _, err := w.svc.Rename(ctx, actor, w.account.ID, id, "  ", ""); !domain.IsCode(err, domain.CodeMissingField) {
		t.Fatalf("blank name: %v", err)
	} else if e := err.(*domain.Error); len(e.Fields) != 1 || e.Fields[0].Field != "name" {
		t.Fatalf("blank name names no field: %+v", e)
	}
	if _, err := w.svc.Rename(ctx, actor, w.account.ID, id, "ok", "bell\x07"); !domain.IsCode(err, domain.CodeInvalidValue) {
		t.Fatalf("control in description: %v", err)
	}
	other := w.users["owner@other.test"]
	if _, err := w.svc.Rename(ctx, keys.Actor{User: &other}, w.account.ID, id, "x", ""); !domain.IsCode(err, domain.CodeAccessDenied) {
		t.Fatalf("another account's owner: %v", err)
	}
	if _, err := w.svc.Rename(ctx, actor, w.other.ID, id, "x", ""); err == nil {
		t.Fatal("renamed through another account")
	}
	k, err := w.svc.Rename(ctx, actor, w.account.ID, id, " Billing sync ", "New text")
	if err != nil || k.Name != "Billing sync" || k.Description != "New text" {
		t.Fatalf("rename: %+v %v", k, err)
	}
	if _, err := w.svc.Rename(ctx, actor, w.account.ID, id, "Billing sync", "New text"); err != nil {
		t.Fatal(err)
	}
	got, _ := w.svc.Get(ctx, w.account.ID, id)
	if got.Name != "Billing sync" || got.Description != "New text" {
		t.Fatalf("stored: %+v", got)
	}
	evs, _ := w.st.ListKeyAuditEvents(ctx, w.account.ID, id)
	if len(evs) != 2 || evs[0].Action != "renamed" || evs[0].Detail != `"old" → "Billing sync"; description changed` {
		t.Fatalf("history: %+v", evs)
	}
}
