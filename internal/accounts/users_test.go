package accounts_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

type team struct {
	st         *store.Store
	svc        *accounts.Service
	acct       domain.Account
	ann, bob   domain.User // Owners
	carl, dora domain.User // Admin, Agent
}

func newTeam(t *testing.T, engine string) team {
	t.Helper()
	ctx := context.Background()
	st, svc := setup(t, engine)
	acct, err := svc.CreateAccount(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	tm := team{st: st, svc: svc, acct: acct}
	for _, u := range []struct {
		to         *domain.User
		email, rol string
	}{{&tm.ann, "ann@acme.test", "owner"}, {&tm.bob, "bob@acme.test", "owner"}, {&tm.carl, "carl@acme.test", "admin"}, {&tm.dora, "dora@acme.test", "agent"}} {
		if *u.to, _, err = svc.Invite(ctx, nil, acct.ID, u.email, u.rol); err != nil {
			t.Fatal(err)
		}
	}
	return tm
}

func (tm team) user(t *testing.T, id string) domain.User {
	t.Helper()
	u, err := tm.st.GetUser(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// trail is the account's audit trail, oldest first, as "action by actor: detail".
func (tm team) trail(t *testing.T) []string {
	t.Helper()
	evs, err := tm.st.ListAuditEvents(context.Background(), tm.acct.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range slices.Backward(evs) {
		if ev.KeyID != "" {
			t.Errorf("user event %s names key %q", ev.Action, ev.KeyID)
		}
		out = append(out, string(ev.Action)+" by "+ev.Actor+": "+ev.Detail)
	}
	return out
}

func TestUserManagement(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			tm := newTeam(t, engine)
			userManagementRoleAndActive(t, ctx, &tm)
			userManagementReset(t, ctx, &tm)
			userManagementTrail(t, ctx, &tm)
		})
	}
}

// userManagementRoleAndActive: Ann makes Dora an Admin, then deactivates
// and reactivates Carl, who keeps his role.
func userManagementRoleAndActive(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	ann, acct := &tm.ann, tm.acct.ID
	if _, err := tm.svc.SetRole(ctx, ann, acct, tm.dora.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if got := tm.user(t, tm.dora.ID); got.Role != domain.RoleAdmin {
		t.Errorf("role after change: %s", got.Role)
	}
	if err := tm.svc.DeactivateUser(ctx, ann, acct, tm.carl.ID); err != nil {
		t.Fatal(err)
	}
	if err := tm.svc.ReactivateUser(ctx, ann, acct, tm.carl.ID); err != nil {
		t.Fatal(err)
	}
	if got := tm.user(t, tm.carl.ID); !got.Active || got.Role != domain.RoleAdmin {
		t.Errorf("reactivated: %+v", got)
	}
}

// userManagementReset: Ann resets Carl's password, then support resets it
// again by email.
func userManagementReset(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	ann, acct := &tm.ann, tm.acct.ID
	// A reset ends the user's sessions and asks for a new password.
	if err := tm.st.ChangePassword(ctx, tm.carl.ID, "hash:chosen", nil); err != nil {
		t.Fatal(err)
	}
	if err := tm.st.CreateSession(ctx, domain.Session{TokenHash: bytes.Repeat([]byte{7}, 32), UserID: tm.carl.ID,
		CSRF: "c", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tm.st.SessionUser(ctx, bytes.Repeat([]byte{7}, 32), time.Now()); err != nil {
		t.Fatalf("session before reset: %v", err)
	}
	u, pw, err := tm.svc.ResetPassword(ctx, ann, acct, tm.carl.ID)
	if err != nil || pw == "" || u.ID != tm.carl.ID {
		t.Fatalf("ResetPassword = %+v, %q, %v", u, pw, err)
	}
	if got := tm.user(t, tm.carl.ID); got.PasswordHash != "hash:"+pw || !got.MustChangePassword {
		t.Errorf("after reset: %+v", got)
	}
	if _, _, err := tm.st.SessionUser(ctx, bytes.Repeat([]byte{7}, 32), time.Now()); err != domain.ErrNotFound {
		t.Errorf("session after reset: %v", err)
	}
	if _, pw2, err := tm.svc.ResetPasswordByEmail(ctx, acct, " CARL@acme.test "); err != nil || pw2 == pw {
		t.Errorf("ResetPasswordByEmail = %q, %v", pw2, err)
	}
}

// userManagementTrail: every change above is in the audit trail, and a
// change that changes nothing adds nothing to it.
func userManagementTrail(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	ann, acct := &tm.ann, tm.acct.ID
	want := []string{
		"user_invited by system: ann@acme.test as owner",
		"user_invited by system: bob@acme.test as owner",
		"user_invited by system: carl@acme.test as admin",
		"user_invited by system: dora@acme.test as agent",
		"user_role_changed by ann@acme.test: dora@acme.test: agent → admin",
		"user_deactivated by ann@acme.test: carl@acme.test",
		"user_reactivated by ann@acme.test: carl@acme.test",
		"user_password_reset by ann@acme.test: carl@acme.test: new one-time password",
		"user_password_reset by support: carl@acme.test: new one-time password",
	}
	if got := tm.trail(t); !slices.Equal(got, want) {
		t.Errorf("audit trail:\n%q\nwant\n%q", got, want)
	}
	// A change that changes nothing records nothing.
	if _, err := tm.svc.SetRole(ctx, ann, acct, tm.dora.ID, "admin"); err != nil || len(tm.trail(t)) != len(want) {
		t.Errorf("same role again: %v, %d events", err, len(tm.trail(t)))
	}
}

func TestUserManagementRefusals(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			tm := newTeam(t, engine)
			userManagementRefusalsCodes(t, ctx, &tm)
			userManagementRefusalsLastOwner(t, ctx, &tm)
			userManagementRefusalsOwnerBack(t, ctx, &tm)
		})
	}
}

// userManagementRefusalsCodes: each refused change, tried in turn, fails
// with its code (and field).
func userManagementRefusalsCodes(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	ann, carl, acct := &tm.ann, &tm.carl, tm.acct.ID
	other, err := tm.svc.CreateAccount(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	stranger, _, err := tm.svc.Invite(ctx, nil, other.ID, "sam@other.test", "owner")
	if err != nil {
		t.Fatal(err)
	}
	_, _, resetBob := tm.svc.ResetPassword(ctx, carl, acct, tm.bob.ID)
	_, _, resetSelf := tm.svc.ResetPassword(ctx, ann, acct, ann.ID)
	_, _, resetStranger := tm.svc.ResetPasswordByEmail(ctx, acct, "sam@other.test")
	_, _, resetNobody := tm.svc.ResetPasswordByEmail(ctx, acct, "zed@acme.test")
	_, _, resetBadEmail := tm.svc.ResetPasswordByEmail(ctx, acct, "Zed <zed@acme.test>")
	_, badRole := tm.svc.SetRole(ctx, ann, acct, tm.dora.ID, "root")
	_, selfRole := tm.svc.SetRole(ctx, ann, acct, ann.ID, "admin")
	_, adminRole := tm.svc.SetRole(ctx, carl, acct, tm.dora.ID, "owner")
	_, crossRole := tm.svc.SetRole(ctx, ann, acct, stranger.ID, "agent")
	_, _, adminInvite := tm.svc.Invite(ctx, carl, acct, "eve@acme.test", "owner")
	for _, tc := range []struct {
		what  string
		err   error
		code  domain.Code
		field string
	}{
		{"an Admin resets", resetBob, domain.CodeAccessDenied, ""},
		{"an Owner resets themselves", resetSelf, domain.CodeInconsistentState, ""},
		{"reset in another account", resetStranger, domain.CodeNotFound, ""},
		{"reset an unknown email", resetNobody, domain.CodeNotFound, ""},
		{"reset a bad email", resetBadEmail, domain.CodeInvalidValue, "email"},
		{"unknown role", badRole, domain.CodeInvalidValue, "role"},
		{"own role", selfRole, domain.CodeInconsistentState, ""},
		{"an Admin changes a role", adminRole, domain.CodeAccessDenied, ""},
		{"role in another account", crossRole, domain.CodeNotFound, ""},
		{"an Admin invites", adminInvite, domain.CodeAccessDenied, ""},
		{"deactivate self", tm.svc.DeactivateUser(ctx, ann, acct, ann.ID), domain.CodeInconsistentState, ""},
		{"reactivate from another account", tm.svc.ReactivateUser(ctx, &stranger, acct, tm.carl.ID), domain.CodeAccessDenied, ""},
	} {
		if domain.ErrorCode(tc.err) != tc.code || fieldOf(tc.err) != tc.field {
			t.Errorf("%s: %v (field %q), want %s on %q", tc.what, tc.err, fieldOf(tc.err), tc.code, tc.field)
		}
	}
}

// userManagementRefusalsLastOwner: what may not happen to Ann once she is
// the last active Owner.
func userManagementRefusalsLastOwner(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	ann, acct := &tm.ann, tm.acct.ID
	// Bob leaves: Ann is the last active Owner, and stays one.
	if err := tm.svc.DeactivateUser(ctx, ann, acct, tm.bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.svc.SetRole(ctx, nil, acct, ann.ID, "admin"); domain.ErrorCode(err) != domain.CodeInconsistentState || fieldOf(err) != "role" {
		t.Errorf("demote the last Owner: %v", err)
	}
	if err := tm.svc.DeactivateUser(ctx, nil, acct, ann.ID); domain.ErrorCode(err) != domain.CodeInconsistentState {
		t.Errorf("deactivate the last Owner: %v", err)
	}
	if _, _, err := tm.svc.ResetPassword(ctx, ann, acct, tm.bob.ID); domain.ErrorCode(err) != domain.CodeInconsistentState {
		t.Errorf("reset a deactivated user: %v", err)
	}
	if _, err := tm.svc.SetRole(ctx, ann, acct, tm.bob.ID, "agent"); domain.ErrorCode(err) != domain.CodeInconsistentState {
		t.Errorf("change a deactivated user's role: %v", err)
	}
	if got := tm.user(t, ann.ID); !got.Active || got.Role != domain.RoleOwner {
		t.Errorf("the last Owner: %+v", got)
	}
}

// userManagementRefusalsOwnerBack reactivates Bob, who then demotes Ann.
func userManagementRefusalsOwnerBack(t *testing.T, ctx context.Context, tm *team) {
	t.Helper()
	ann, acct := &tm.ann, tm.acct.ID
	// Once Bob is back, Ann may go.
	if err := tm.svc.ReactivateUser(ctx, ann, acct, tm.bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.svc.SetRole(ctx, &tm.bob, acct, ann.ID, "agent"); err != nil {
		t.Errorf("demote with another Owner: %v", err)
	}
}

func fieldOf(err error) string {
	var de *domain.Error
	if !errors.As(err, &de) || len(de.Fields) == 0 {
		return ""
	}
	return de.Fields[0].Field
}

// TestTwoOwnersDemoteEachOther: two Owners, each taking the other's role
// (or deactivating them) at the same moment, leave one Owner, on both
// engines; the loser is told why.
func TestTwoOwnersDemoteEachOther(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			tm := newTeam(t, engine)
			for round := range 10 {
				twoOwnersDemoteRound(t, ctx, &tm, round)
			}
		})
	}
}

// twoOwnersDemoteRound races Ann against Bob once, checks that one Owner is
// left and one of them was refused, then makes both Owners again.
func twoOwnersDemoteRound(t *testing.T, ctx context.Context, tm *team, round int) {
	t.Helper()
	ann, bob := tm.user(t, tm.ann.ID), tm.user(t, tm.bob.ID)
	errs := twoOwnersDemoteRace(ctx, tm, ann, bob, round)
	twoOwnersDemoteCheckOneLeft(t, tm, round, []string{ann.ID, bob.ID}, errs)
	// Both Owners again for the next round.
	twoOwnersDemoteRestore(t, ctx, tm, []string{ann.ID, bob.ID})
}

// twoOwnersDemoteRace starts both changes at the same moment: Ann demotes
// (even rounds) or deactivates (odd rounds) Bob while Bob demotes Ann.
func twoOwnersDemoteRace(ctx context.Context, tm *team, ann, bob domain.User, round int) []error {
	acct := tm.acct.ID
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		if round%2 == 0 {
			_, errs[0] = tm.svc.SetRole(ctx, &ann, acct, bob.ID, "admin")
		} else {
			errs[0] = tm.svc.DeactivateUser(ctx, &ann, acct, bob.ID)
		}
	})
	wg.Go(func() {
		<-start
		_, errs[1] = tm.svc.SetRole(ctx, &bob, acct, ann.ID, "agent")
	})
	close(start)
	wg.Wait()
	return errs
}

// twoOwnersDemoteCheckOneLeft: exactly one active Owner among ids, and
// exactly one change refused, as an inconsistent state.
func twoOwnersDemoteCheckOneLeft(t *testing.T, tm *team, round int, ids []string, errs []error) {
	t.Helper()
	owners := 0
	for _, id := range ids {
		if u := tm.user(t, id); u.Active && u.Role == domain.RoleOwner {
			owners++
		}
	}
	failed := 0
	for _, err := range errs {
		if err != nil {
			if domain.ErrorCode(err) != domain.CodeInconsistentState {
				t.Fatalf("round %d: %v", round, err)
			}
			failed++
		}
	}
	if owners != 1 || failed != 1 {
		t.Fatalf("round %d: %d active Owners, %d refused (%v)", round, owners, failed, errs)
	}
}

// twoOwnersDemoteRestore makes each of ids an active Owner again.
func twoOwnersDemoteRestore(t *testing.T, ctx context.Context, tm *team, ids []string) {
	t.Helper()
	acct := tm.acct.ID
	for _, id := range ids {
		if err := tm.svc.ReactivateUser(ctx, nil, acct, id); err != nil {
			t.Fatal(err)
		}
		if _, err := tm.svc.SetRole(ctx, nil, acct, id, "owner"); err != nil {
			t.Fatal(err)
		}
	}
}
