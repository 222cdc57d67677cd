package agents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

type world struct {
	st      *store.Store
	svc     *agents.Service
	clock   *testenv.Clock
	account domain.Account
	owner   agents.Actor // a console user or the operator: no key
}

func setup(t *testing.T, engine string) *world {
	t.Helper()
	w := &world{st: storetest.Open(t, engine), clock: testenv.NewClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	w.svc = agents.New(w.st, w.clock.Now)
	w.account = domain.Account{ID: domain.NewID(domain.PrefixAccount, w.clock.Now()), Name: "Acme", Active: true, CreatedAt: w.clock.Now()}
	if err := w.st.CreateAccount(context.Background(), w.account); err != nil {
		t.Fatal(err)
	}
	w.owner = agents.Actor{AccountID: w.account.ID}
	return w
}

func ptr(s string) *string { return &s }

func code(err error) domain.Code {
	if err == nil {
		return ""
	}
	return domain.ErrorCode(err)
}

func eachEngine(t *testing.T, f func(t *testing.T, w *world)) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) { f(t, setup(t, engine)) })
	}
}

func TestCreateAppliesTheNameRule(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		for _, tc := range []struct {
			name     *string
			want     domain.Code
			wantName string
		}{
			{nil, domain.CodeMissingField, ""},
			{ptr("  Support bot \u00a0"), "", "Support bot"},
			{ptr("   "), domain.CodeInvalidValue, ""},
			{ptr("a\tb"), domain.CodeInvalidValue, ""},
			{ptr("\u200b\u202e"), domain.CodeInvalidValue, ""},
			{ptr("bad \xff"), domain.CodeInvalidValue, ""},
			{ptr(strings.Repeat("é", domain.MaxNameLength)), "", strings.Repeat("é", domain.MaxNameLength)},
			{ptr(strings.Repeat("é", domain.MaxNameLength+1)), domain.CodeInvalidValue, ""},
		} {
			ag, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: tc.name})
			if code(err) != tc.want {
				t.Errorf("Create(%q) = %v, want %q", deref(tc.name), err, tc.want)
				continue
			}
			if err == nil && (ag.Name != tc.wantName || !ag.Enabled || !ag.UpdatedAt.Equal(ag.CreatedAt)) {
				t.Errorf("Create(%q) = %+v", deref(tc.name), ag)
			}
		}
		long := strings.Repeat("x", domain.MaxInstructionsLength+1)
		if _, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr("Long"), Instructions: &long}); code(err) != domain.CodeInvalidValue {
			t.Errorf("too long instructions: %v", err)
		}
		if _, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr("Ctl"), Instructions: ptr("a\x00b")}); code(err) != domain.CodeInvalidValue {
			t.Errorf("instructions with NUL: %v", err)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestDuplicateNameAndWhoLearnsTheHolder(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		first, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr("Billing")})
		if err != nil {
			t.Fatal(err)
		}
		mine, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr("Mine")})
		if err != nil {
			t.Fatal(err)
		}
		restricted := agents.Actor{AccountID: w.account.ID, Key: &domain.APIKey{ID: "key_r", AgentIDs: []string{mine.ID}}}
		allowed := agents.Actor{AccountID: w.account.ID, Key: &domain.APIKey{ID: "key_a", AgentIDs: []string{mine.ID, first.ID}}}
		unrestricted := agents.Actor{AccountID: w.account.ID, Key: &domain.APIKey{ID: "key_u"}}
		for _, tc := range []struct {
			what   string
			actor  agents.Actor
			do     func(agents.Actor) error
			wantID string
		}{
			{"create, console", w.owner, func(a agents.Actor) error {
				_, err := w.svc.Create(ctx, a, agents.Fields{Name: ptr("BILLING")})
				return err
			}, first.ID},
			{"create, unrestricted key", unrestricted, func(a agents.Actor) error {
				_, err := w.svc.Create(ctx, a, agents.Fields{Name: ptr("billing ")})
				return err
			}, first.ID},
			{"rename, key restricted to others", restricted, func(a agents.Actor) error {
				_, err := w.svc.Update(ctx, a, mine.ID, agents.Fields{Name: ptr("billing")})
				return err
			}, ""},
			{"rename, key restricted to both", allowed, func(a agents.Actor) error {
				_, err := w.svc.Update(ctx, a, mine.ID, agents.Fields{Name: ptr("Billing")})
				return err
			}, first.ID},
		} {
			err := tc.do(tc.actor)
			var de *domain.Error
			if !asError(err, &de) || de.Code != domain.CodeDuplicateValue || de.ExistingID != tc.wantID ||
				len(de.Fields) != 1 || de.Fields[0].Field != "name" {
				t.Errorf("%s: %v (%+v)", tc.what, err, de)
			}
			if tc.wantID == "" && strings.Contains(de.Message, first.ID) {
				t.Errorf("%s: the message names the holder: %s", tc.what, de.Message)
			}
		}
		if _, err := w.svc.Create(ctx, restricted, agents.Fields{Name: ptr("New")}); code(err) != domain.CodeAccessDenied {
			t.Errorf("a restricted key creates: %v", err)
		}
	})
}

func asError(err error, de **domain.Error) bool {
	e, ok := err.(*domain.Error)
	*de = e
	return ok
}

func TestUpdatedAtOnlyMovesForward(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		ag, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr("Bot"), Instructions: ptr("Be brief.")})
		if err != nil {
			t.Fatal(err)
		}
		created := ag.UpdatedAt
		steps := []struct {
			what    string
			advance time.Duration
			do      func() (domain.Agent, error)
			want    time.Time
		}{
			{"same values change nothing", time.Second, func() (domain.Agent, error) {
				return w.svc.Update(ctx, w.owner, ag.ID, agents.Fields{Name: ptr(" Bot "), Instructions: ptr("Be brief.")})
			}, created},
			{"enabling an enabled agent changes nothing", time.Second, func() (domain.Agent, error) {
				return w.svc.SetEnabled(ctx, w.owner, ag.ID, true)
			}, created},
			{"a rename moves to the clock", time.Second, func() (domain.Agent, error) {
				return w.svc.Update(ctx, w.owner, ag.ID, agents.Fields{Name: ptr("Bot 2")})
			}, created.Add(3 * time.Second)},
			{"a clock behind the last write still moves forward", -time.Hour, func() (domain.Agent, error) {
				return w.svc.SetEnabled(ctx, w.owner, ag.ID, false)
			}, created.Add(3*time.Second + time.Millisecond)},
			{"and again", 0, func() (domain.Agent, error) {
				return w.svc.Update(ctx, w.owner, ag.ID, agents.Fields{Instructions: ptr("")})
			}, created.Add(3*time.Second + 2*time.Millisecond)},
		}
		for _, s := range steps {
			w.clock.Advance(s.advance)
			got, err := s.do()
			if err != nil {
				t.Fatalf("%s: %v", s.what, err)
			}
			if !got.UpdatedAt.Equal(s.want) {
				t.Errorf("%s: updated_at %v, want %v", s.what, got.UpdatedAt, s.want)
			}
		}
		got, err := w.svc.Get(ctx, w.owner, ag.ID)
		if err != nil || got.Name != "Bot 2" || got.Instructions != "" || got.Enabled {
			t.Errorf("Get = %+v, %v", got, err)
		}
	})
}

func TestNotFoundAndOtherAccounts(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		ag, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr("Bot")})
		if err != nil {
			t.Fatal(err)
		}
		stranger := agents.Actor{AccountID: "acct_other"}
		long := "agt_" + strings.Repeat("z", 100)
		for _, tc := range []struct {
			what string
			err  error
		}{
			{"get", second(w.svc.Get(ctx, stranger, ag.ID))},
			{"update", second(w.svc.Update(ctx, stranger, ag.ID, agents.Fields{Name: ptr("Mine")}))},
			{"enable", second(w.svc.SetEnabled(ctx, stranger, ag.ID, false))},
			{"stats", second(w.svc.Stats(ctx, stranger, ag.ID))},
			{"long id", second(w.svc.Get(ctx, w.owner, long))},
		} {
			if code(tc.err) != domain.CodeNotFound {
				t.Errorf("%s: %v", tc.what, tc.err)
			}
			if len(tc.err.Error()) > 120 {
				t.Errorf("%s: the message echoes the whole id: %s", tc.what, tc.err)
			}
		}
		st, err := w.svc.Stats(ctx, w.owner, ag.ID)
		if err != nil || st.AgentID != ag.ID || st.QuestionsTotal != 0 {
			t.Errorf("Stats = %+v, %v", st, err)
		}
	})
}

func second[T any](_ T, err error) error { return err }

// TestNotFoundEchoesNoSecret: a credential given as the agent id is echoed
// only up to its public prefix, wherever it starts in the id.
func TestNotFoundEchoesNoSecret(t *testing.T) {
	c, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}
	secret := c.Text[len(c.Text)-credential.SecretLen:]
	public := credential.Redact(c.Text) // agk_live_<prefix>_…
	for _, tc := range []struct{ id, want string }{
		{c.Text, `"` + public + `"`},
		{"agt_" + c.Text, `"agt_` + public + `"`},
		{c.Text + "/stats", `"` + public + `"`},
		{strings.Repeat("z", 50) + c.Text, `"` + strings.Repeat("z", 50) + public[:14] + "…" + `"`},
		{"agk_" + secret, `"[redacted]"`},
		{"agk_live_" + secret, `"[redacted]"`},
		{"agk_live_abcdefghijkl" + secret, `"[redacted]"`}, // no "_" after 12 characters: no prefix
		{"agt_01" + secret, `"agt_01` + secret + `"`},      // not a credential: echoed
	} {
		msg := agents.NotFound(tc.id).Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("NotFound(%.20s…) = %s, want it to show %s", tc.id, msg, tc.want)
		}
		if strings.Contains(tc.id, "agk_") && strings.Contains(msg, secret[:8]) {
			t.Errorf("NotFound(%.20s…) echoes the secret: %s", tc.id, msg)
		}
	}
	eachEngine(t, func(t *testing.T, w *world) {
		_, err := w.svc.Get(context.Background(), w.owner, c.Text)
		if code(err) != domain.CodeNotFound || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), public) {
			t.Errorf("Get(credential) = %v", err)
		}
	})
}

func TestListKeepsToARestrictedKeysAgents(t *testing.T) {
	eachEngine(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		var ids []string
		for _, n := range []string{"A", "B", "C"} {
			ag, err := w.svc.Create(ctx, w.owner, agents.Fields{Name: ptr(n)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, ag.ID)
			w.clock.Advance(time.Millisecond)
		}
		k := domain.APIKey{
			ID: domain.NewID(domain.PrefixKey, w.clock.Now()), AccountID: w.account.ID, Name: "r", Prefix: "abcdefghijkl",
			Hash: make([]byte, 32), Env: domain.EnvLive, Scopes: []domain.Scope{domain.ScopeAgentsRead},
			AgentIDs: []string{ids[2]}, RateLimitPerMinute: 60, CreatedAt: w.clock.Now(),
		}
		if err := w.st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			what  string
			actor agents.Actor
			page  agents.Page
			want  []string
		}{
			{"everything", w.owner, agents.Page{}, ids},
			{"a page", w.owner, agents.Page{Limit: 2}, ids[:2]},
			{"after", w.owner, agents.Page{AfterID: ids[0], AfterCreatedAt: w.clock.Now().Add(-3 * time.Millisecond)}, ids[1:]},
			{"restricted", agents.Actor{AccountID: w.account.ID, Key: &k}, agents.Page{}, ids[2:]},
		} {
			items, err := w.svc.List(ctx, tc.actor, tc.page)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, it.ID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s: %v, want %v", tc.what, got, tc.want)
			}
		}
	})
}
