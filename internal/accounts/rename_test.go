package accounts_test

import (
	"context"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestRename: an Owner of the account (or the CLI: nobody) renames it,
// the name trimmed and checked as at creation and audited with the old
// and the new name; an Admin, another account's Owner, a deactivated
// Owner and a blank name are refused and change nothing.
func TestRename(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) { renameOn(t, engine) })
	}
}

func renameOn(t *testing.T, engine string) {
	t.Helper()
	ctx := context.Background()
	st, svc := setup(t, engine)
	acct, _ := svc.CreateAccount(ctx, "Acme")
	other, _ := svc.CreateAccount(ctx, "Other")
	owner := domain.User{ID: "usr_1", AccountID: acct.ID, Role: domain.RoleOwner, Active: true, Email: "o@acme.example"}
	for what, by := range map[string]*domain.User{
		"an Admin":            {ID: "usr_2", AccountID: acct.ID, Role: domain.RoleAdmin, Active: true},
		"another's Owner":     {ID: "usr_3", AccountID: other.ID, Role: domain.RoleOwner, Active: true},
		"a deactivated Owner": {ID: "usr_4", AccountID: acct.ID, Role: domain.RoleOwner},
	} {
		if _, err := svc.Rename(ctx, by, acct.ID, "Hijacked"); domain.ErrorCode(err) != domain.CodeAccessDenied {
			t.Errorf("%s: %v", what, err)
		}
	}
	if _, err := svc.Rename(ctx, &owner, acct.ID, " \t"); domain.ErrorCode(err) != domain.CodeInvalidValue {
		t.Errorf("blank name: %v", err)
	}
	if n, err := svc.Rename(ctx, &owner, acct.ID, "  Acme Robotics "); err != nil || n != "Acme Robotics" {
		t.Fatalf("rename = %q, %v", n, err)
	}
	if _, err := svc.Rename(ctx, nil, "acct_nobody", "X"); domain.ErrorCode(err) != domain.CodeNotFound {
		t.Errorf("unknown account: %v", err)
	}
	got, _ := st.GetAccount(ctx, acct.ID)
	items, _, err := st.AuditPage(ctx, store.AuditPageQuery{AccountID: acct.ID, Limit: 10})
	if got.Name != "Acme Robotics" || err != nil || len(items) != 1 || items[0].Actor != owner.Email ||
		items[0].ActorID != owner.ID || items[0].Detail != `"Acme" → "Acme Robotics"` {
		t.Fatalf("account %+v, audit %+v, %v", got, items, err)
	}
}
