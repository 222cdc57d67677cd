package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestKeyPolicyRoundTrip: an account without a policy reads the zero one;
// a change is stored, with one audit entry and one key_policy.updated event
// (data the policy, previous_attributes the changed fields, actor the
// user); saving the same policy again writes nothing.
func TestKeyPolicyRoundTrip(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		st := storetest.Open(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, st)
		other := storetest.Account(t, st)
		if p, err := st.GetKeyPolicy(ctx, acct.ID); err != nil || p != (domain.KeyPolicy{}) {
			t.Fatalf("no policy yet: %+v, %v", p, err)
		}
		at := storetest.T0.Add(time.Hour)
		want := domain.KeyPolicy{MaxKeyLifetimeDays: 90, RequireAllowedIPs: true, UpdatedAt: at}
		setPolicy(t, st, acct.ID, want, true)
		if p, err := st.GetKeyPolicy(ctx, acct.ID); err != nil || p != want {
			t.Fatalf("read back %+v, %v; want %+v", p, err, want)
		}
		if p, err := st.GetKeyPolicy(ctx, other.ID); err != nil || p != (domain.KeyPolicy{}) {
			t.Fatalf("another account's policy: %+v, %v", p, err)
		}
		// The same again, later: nothing written, the stored one kept.
		setPolicy(t, st, acct.ID, domain.KeyPolicy{MaxKeyLifetimeDays: 90, RequireAllowedIPs: true, UpdatedAt: at.Add(time.Hour)}, false)
		// Back to no maximum: previous_attributes names the lifetime only.
		setPolicy(t, st, acct.ID, domain.KeyPolicy{RequireAllowedIPs: true, UpdatedAt: at.Add(2 * time.Hour)}, true)

		evs, err := st.ListEvents(ctx, store.EventQuery{AccountID: acct.ID, Types: []string{"key_policy.*"}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 {
			t.Fatalf("%d key_policy events, want 2: %+v", len(evs), evs)
		}
		checkPolicyEvent(t, evs[0], `{"max_key_lifetime_days":90,"require_allowed_ips":true,"updated_at":"2026-03-01T13:00:00.000Z"}`,
			`{"max_key_lifetime_days":null,"require_allowed_ips":false}`)
		checkPolicyEvent(t, evs[1], `{"max_key_lifetime_days":null,"require_allowed_ips":true,"updated_at":"2026-03-01T15:00:00.000Z"}`,
			`{"max_key_lifetime_days":90}`)
		audit, err := st.ListAuditEvents(ctx, acct.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != 2 || audit[0].Action != domain.AuditKeyPolicyUpdated || audit[0].KeyID != "" ||
			audit[0].Detail != "90 days → none" || audit[1].Detail != "none → 90 days" {
			t.Fatalf("audit trail %+v", audit)
		}
	})
}

// setPolicy sets p as user usr_1 and checks whether it changed anything.
func setPolicy(t *testing.T, st *store.Store, accountID string, p domain.KeyPolicy, wantChanged bool) {
	t.Helper()
	audit := func(before, after domain.KeyPolicy) domain.AuditEvent {
		ev := storetest.Event(accountID, "", domain.AuditKeyPolicyUpdated, p.UpdatedAt)
		ev.Detail = before.LifetimeWords() + " → " + after.LifetimeWords()
		return ev
	}
	_, changed, err := st.SetKeyPolicy(context.Background(), accountID, p, &domain.EventActor{Type: "user", ID: "usr_1"}, audit)
	if err != nil || changed != wantChanged {
		t.Fatalf("set %+v: changed %v, %v; want changed %v", p, changed, err, wantChanged)
	}
}

func checkPolicyEvent(t *testing.T, ev domain.Event, data, prev string) {
	t.Helper()
	if ev.Type != domain.EventKeyPolicyUpdated || ev.Actor == nil || *ev.Actor != (domain.EventActor{Type: "user", ID: "usr_1"}) || ev.RequestID != "" {
		t.Fatalf("event %+v", ev)
	}
	for _, c := range []struct{ got, want string }{{string(ev.Data), data}, {string(ev.Previous), prev}} {
		var g, w any
		if err := json.Unmarshal([]byte(c.got), &g); err != nil {
			t.Fatalf("%s: %v", c.got, err)
		}
		_ = json.Unmarshal([]byte(c.want), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("got %s, want %s", gb, wb)
		}
	}
}

// TestKeyPolicyUnknownAccount: a policy for an account that does not exist
// is not found, and nothing is written.
func TestKeyPolicyUnknownAccount(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		st := storetest.Open(t, engine)
		_, _, err := st.SetKeyPolicy(context.Background(), "acct_nope", domain.KeyPolicy{MaxKeyLifetimeDays: 7},
			nil, func(_, _ domain.KeyPolicy) domain.AuditEvent { return domain.AuditEvent{} })
		if err != domain.ErrNotFound {
			t.Fatalf("err %v, want ErrNotFound", err)
		}
	})
}
