package keys_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// TestEditIsOneTransactionAndOneEvent: the console's save of a key's
// access, allowed addresses and name is one api_key.updated event whose
// previous_attributes name each changed field, with one audit entry per
// part; saving nothing new writes neither.
func TestEditIsOneTransactionAndOneEvent(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := domain.ParseAllowList("192.0.2.0/24")
	if err != nil {
		t.Fatal(err)
	}
	edit := keys.Edit{Access: &keys.Access{Scopes: []domain.Scope{domain.ScopeAgentsQuery}}, AllowedIPs: &list, Name: "renamed"}
	if _, err := w.svc.Edit(ctx, actor, w.account.ID, c.Key.ID, edit); err != nil {
		t.Fatal(err)
	}
	evs := keyEvents(t, w, domain.EventKeyUpdated)
	if len(evs) != 1 {
		t.Fatalf("%d api_key.updated events, want 1", len(evs))
	}
	var prev map[string]json.RawMessage
	if err := json.Unmarshal(evs[0].Previous, &prev); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"name": `"k"`, "scopes": `["aiagents:read"]`, "allowed_ips": `[]`} {
		if string(prev[field]) != want {
			t.Errorf("previous_attributes.%s = %s, want %s", field, prev[field], want)
		}
	}
	if len(prev) != 3 {
		t.Errorf("previous_attributes = %v, want name, scopes and allowed_ips only", prev)
	}
	if evs[0].Actor == nil || evs[0].Actor.Type != "user" || evs[0].Actor.ID != owner.ID {
		t.Errorf("actor = %+v, want the user", evs[0].Actor)
	}
	trail, err := w.st.ListKeyAuditEvents(ctx, w.account.ID, c.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(trail) != 4 { // created, access, allowed addresses, renamed
		t.Errorf("%d audit entries, want 4: %+v", len(trail), trail)
	}
	// The same save again changes nothing: no event.
	if _, err := w.svc.Edit(ctx, actor, w.account.ID, c.Key.ID, edit); err != nil {
		t.Fatal(err)
	}
	if n := len(keyEvents(t, w, domain.EventKeyUpdated)); n != 1 {
		t.Errorf("%d api_key.updated events after a save that changed nothing, want 1", n)
	}
}

// TestUpdateKeyAllOrNothing: when one part of a save cannot apply (the key
// was revoked since it was read), no part of it does: the name stays, and
// no event is written.
func TestUpdateKeyAllOrNothing(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.Revoke(ctx, actor, w.account.ID, c.Key.ID); err != nil {
		t.Fatal(err)
	}
	name := "renamed"
	err = w.st.UpdateKey(ctx, w.account.ID, c.Key.ID, store.KeyEdit{
		Access: &store.KeyAccess{Scopes: []domain.Scope{domain.ScopeAgentsQuery}}, Name: &name,
	}, nil)
	if !errors.Is(err, domain.ErrRevoked) {
		t.Fatalf("UpdateKey on a revoked key: %v, want ErrRevoked", err)
	}
	k, err := w.st.GetKey(ctx, w.account.ID, c.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "k" {
		t.Errorf("name = %q after a refused save, want it unchanged", k.Name)
	}
	if n := len(keyEvents(t, w, domain.EventKeyUpdated)); n != 0 {
		t.Errorf("%d api_key.updated events after a refused save, want 0", n)
	}
	if n := len(keyEvents(t, w, domain.EventKeyRevoked)); n != 1 {
		t.Errorf("%d api_key.revoked events, want 1", n)
	}
}

func keyEvents(t *testing.T, w *world, typ domain.EventType) []domain.Event {
	t.Helper()
	evs, err := w.st.ListEvents(context.Background(), store.EventQuery{AccountID: w.account.ID, Types: []string{string(typ)}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
