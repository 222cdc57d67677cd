package accounts_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/password"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// cheap stands in for argon2id: the rules, not the hash, are under test.
func cheap(_ context.Context, pw string) (string, error) { return "hash:" + pw, nil }

func setup(t *testing.T, engine string) (*store.Store, *accounts.Service) {
	t.Helper()
	st := storetest.Open(t, engine)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	return st, accounts.New(st, cheap, func() time.Time { return now })
}

func TestCheckEmail(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" for refused
	}{
		{"ann@example.com", "ann@example.com"},
		{"  Ann@Example.COM \n", "ann@example.com"},
		{"owner@localhost", "owner@localhost"},
		{"Ann <ann@example.com>", ""},
		{"<ann@example.com>", ""},
		{"ann@example.com, bob@example.com", ""},
		{"ann", ""},
		{"", ""},
		{"ann\xff@example.com", ""},
		{"\xffann@example.com", ""},
		{strings.Repeat("a", 243) + "@example.com", ""},
		{strings.Repeat("a", 242) + "@example.com", strings.Repeat("a", 242) + "@example.com"},
	} {
		got, err := accounts.CheckEmail(tc.in)
		if got != tc.want || (tc.want == "") != (domain.ErrorCode(err) == domain.CodeInvalidValue) {
			t.Errorf("CheckEmail(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCreateUserChecksInOneOrder(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			st, svc := setup(t, engine)
			acct, err := svc.CreateAccount(ctx, " Acme ")
			if err != nil || acct.Name != "Acme" || !acct.Active {
				t.Fatalf("CreateAccount = %+v, %v", acct, err)
			}
			good := "correct horse battery staple"
			for _, tc := range []createUserOrderCase{
				{"bad role first", "acct_nope", "not an email", "boss", "", domain.CodeInvalidValue, "role", false},
				{"then the email", "acct_nope", "Ann <ann@example.com>", "admin", "", domain.CodeInvalidValue, "email", false},
				{"then the password", "acct_nope", "ann@example.com", "admin", "short", domain.CodeInvalidValue, "", true},
				{"then the account", "acct_nope", "ann@example.com", "admin", good, domain.CodeNotFound, "no account", true},
				{"created", acct.ID, " Ann@Example.com", "admin", good, "", "", true},
				{"taken, whatever the case", acct.ID, "ANN@example.com", "agent", good, domain.CodeDuplicateValue, "already exists", true},
			} {
				createUserOrderCheck(t, ctx, svc, good, tc)
			}
			if _, err := st.GetUserByEmail(ctx, "ann@example.com"); err != nil {
				t.Errorf("the user is not stored: %v", err)
			}
			createUserOrderReadError(t, ctx, svc, acct.ID)
		})
	}
}

// createUserOrderCase is one row of TestCreateUserChecksInOneOrder.
type createUserOrderCase struct {
	what                string
	account, email, rol string
	pw                  string
	want                domain.Code
	says                string
	asksPassword        bool
}

// createUserOrderCheck creates tc's user and checks the error, whether the
// password was asked for, and (when created) the user.
func createUserOrderCheck(t *testing.T, ctx context.Context, svc *accounts.Service, good string, tc createUserOrderCase) {
	t.Helper()
	asked := false
	u, err := svc.CreateUser(ctx, accounts.NewUser{AccountID: tc.account, Email: tc.email, Role: tc.rol,
		Password: func() (string, error) { asked = true; return tc.pw, nil }})
	if domain.ErrorCode(err) != tc.want && !(tc.want == "" && err == nil) || err != nil && !strings.Contains(err.Error(), tc.says) {
		t.Errorf("%s: %v, want %q saying %q", tc.what, err, tc.want, tc.says)
	}
	if asked != tc.asksPassword {
		t.Errorf("%s: password asked %v", tc.what, asked)
	}
	if tc.want == "" && (u.Email != "ann@example.com" || u.Role != domain.RoleAdmin || u.PasswordHash != "hash:"+good || u.MustChangePassword) {
		t.Errorf("%s: %+v", tc.what, u)
	}
}

// createUserOrderReadError has the password reader fail while creating Bob.
func createUserOrderReadError(t *testing.T, ctx context.Context, svc *accounts.Service, accountID string) {
	t.Helper()
	// A failure to read the password is returned as it is.
	readErr := errors.New("stdin closed")
	if _, err := svc.CreateUser(ctx, accounts.NewUser{AccountID: accountID, Email: "bob@example.com", Role: "agent",
		Password: func() (string, error) { return "", readErr }}); !errors.Is(err, readErr) {
		t.Errorf("read error: %v", err)
	}
}

func TestInviteAndDeactivate(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, store.EngineSQLite)
	svc := accounts.New(st, accounts.Hash, nil)
	acct, err := svc.CreateAccount(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	u, pw, err := svc.Invite(ctx, nil, acct.ID, "bob@example.com", "agent")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := password.Verify(u.PasswordHash, pw); !ok || err != nil || !u.MustChangePassword || !u.Active {
		t.Fatalf("invited %+v: verify %v, %v", u, ok, err)
	}
	if err := svc.DeactivateUser(ctx, nil, "acct_other", u.ID); domain.ErrorCode(err) != domain.CodeNotFound {
		t.Errorf("deactivate from another account: %v", err)
	}
	if err := svc.DeactivateUser(ctx, nil, acct.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetUser(ctx, u.ID); err != nil || got.Active {
		t.Errorf("after deactivate: %+v, %v", got, err)
	}
}

func TestAccountSwitches(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			_, svc := setup(t, engine)
			if _, err := svc.CreateAccount(ctx, "\u200b"); domain.ErrorCode(err) != domain.CodeInvalidValue {
				t.Errorf("invisible name: %v", err)
			}
			acct, err := svc.CreateAccount(ctx, "Acme")
			if err != nil {
				t.Fatal(err)
			}
			accountSwitchesFlip(t, ctx, svc, acct.ID)
			got, err := svc.Account(ctx, acct.ID)
			if err != nil || got.Active || !got.HasFeature(domain.FeatureAIAnswers) {
				t.Errorf("Account = %+v, %v", got, err)
			}
			if _, err := svc.Account(ctx, "acct_nope"); domain.ErrorCode(err) != domain.CodeNotFound {
				t.Errorf("unknown account: %v", err)
			}
		})
	}
}

// accountSwitchesFlip turns the AI answers feature on and the account off,
// in that order, with the refusals around them, and checks each code.
func accountSwitchesFlip(t *testing.T, ctx context.Context, svc *accounts.Service, accountID string) {
	t.Helper()
	for _, tc := range []struct {
		what string
		err  error
		want domain.Code
	}{
		{"unknown feature", svc.SetFeature(ctx, accountID, "time-travel", true), domain.CodeInvalidValue},
		{"feature, unknown account", svc.SetFeature(ctx, "acct_nope", string(domain.FeatureAIAnswers), true), domain.CodeNotFound},
		{"feature on", svc.SetFeature(ctx, accountID, string(domain.FeatureAIAnswers), true), ""},
		{"deactivate", svc.SetActive(ctx, accountID, false), ""},
		{"deactivate unknown", svc.SetActive(ctx, "acct_nope", false), domain.CodeNotFound},
	} {
		if got := domain.ErrorCode(tc.err); tc.err != nil && got != tc.want || tc.err == nil && tc.want != "" {
			t.Errorf("%s: %v, want %q", tc.what, tc.err, tc.want)
		}
	}
}

func TestBootstrapOnce(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			st, svc := setup(t, engine)
			first, created, err := svc.Bootstrap(ctx)
			if engine == store.EnginePostgres {
				bootstrapOnceNoAccount(t, ctx, st, first, created, err)
				return
			}
			bootstrapOnceFirstOwner(t, first, created, err)
			bootstrapOnceAgain(t, ctx, st, svc)
		})
	}
}

// bootstrapOnceNoAccount: on production's store, Bootstrap creates nothing.
func bootstrapOnceNoAccount(t *testing.T, ctx context.Context, st *store.Store, first accounts.First, created bool, err error) {
	t.Helper()
	// Production's store: no account, so no one-time password
	// in its logs; serve says how to create one instead.
	if err != nil || created || !first.NoAccount || first.Password != "" {
		t.Fatalf("Bootstrap on PostgreSQL = %+v, %v, %v", first, created, err)
	}
	if n, err := st.CountAccounts(ctx); n != 0 || err != nil {
		t.Fatalf("accounts: %d, %v", n, err)
	}
}

// bootstrapOnceFirstOwner: the first Bootstrap created an account and its
// Owner, who must change the one-time password.
func bootstrapOnceFirstOwner(t *testing.T, first accounts.First, created bool, err error) {
	t.Helper()
	if err != nil || !created {
		t.Fatalf("Bootstrap = %v, %v", created, err)
	}
	if first.Owner.Email != accounts.FirstOwnerEmail || first.Owner.Role != domain.RoleOwner || !first.Owner.MustChangePassword ||
		first.Owner.AccountID != first.Account.ID || first.Owner.PasswordHash != "hash:"+first.Password || first.Password == "" {
		t.Errorf("first = %+v", first)
	}
}

// bootstrapOnceAgain: a second Bootstrap creates nothing more.
func bootstrapOnceAgain(t *testing.T, ctx context.Context, st *store.Store, svc *accounts.Service) {
	t.Helper()
	if _, again, err := svc.Bootstrap(ctx); again || err != nil {
		t.Errorf("second Bootstrap = %v, %v", again, err)
	}
	if n, err := st.CountAccounts(ctx); n != 1 || err != nil {
		t.Errorf("accounts: %d, %v", n, err)
	}
}
