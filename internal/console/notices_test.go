package console_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
)

// idleKeyNotice makes a key of acme used again after 31 days unused,
// through the API and the last_used_at write-behind, which raises
// after_idle; it returns the key's id.
func idleKeyNotice(t *testing.T, f *fixture, acme domain.Account, owner domain.User, name string) string {
	t.Helper()
	ctx := context.Background()
	k := f.key(acme, owner, name)
	if err := f.st.TouchKeys(ctx, map[string]time.Time{k.Key.ID: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(31 * 24 * time.Hour)
	if got := f.apiStatus(k.Credential); got != 200 {
		t.Fatalf("GET /v1/me: %d", got)
	}
	if err := f.toucher.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return k.Key.ID
}

// TestKeyNotices: a key's anomaly shows on its page and on Developers,
// saying what happened and what to do, and that no email was sent, until
// an Admin dismisses it (audited); a user without the role cannot.
func TestKeyNotices(t *testing.T) {
	f := newFixture(t)
	acme, owner := f.account("Acme")
	admin := f.user(acme, "admin@acme.example", domain.RoleAdmin)
	member := f.user(acme, "member@acme.example", domain.RoleAgent)
	quiet := f.key(acme, owner, "quiet")
	id := idleKeyNotice(t, f, acme, owner, "CI <deploy>")

	b := f.signedIn(owner)
	want := []string{`id="key-notices"`, "Used after an idle month", "was last used on", "31 days before",
		`href="/console/developers/logs?key=` + id + `"`, `href="/console/developers/keys/` + id + `/rotate"`,
		`href="/console/developers/keys/` + id + `/revoke"`, "No email was sent: this server has no mail server set (serve --smtp-url)."}
	dev := b.get("/console/developers")
	wantStatus(t, "developers", dev, 200)
	wantHolds(t, "Developers' notice", noticeSection(dev.body), append(want, "CI &lt;deploy&gt;"), []string{quiet.Key.ID, "<deploy>"})
	keyPage := b.get("/console/developers/keys/" + id)
	wantHolds(t, "the key page's notice", noticeSection(keyPage.body), want, nil)
	if p := b.get("/console/developers/keys/" + quiet.Key.ID); strings.Contains(p.body, `id="key-notices"`) {
		t.Error("a notice on a key that raised none")
	}

	form := url.Values{"reason": {"after_idle"}, "event": {regexpFind(`name="event" value="(evt_[0-9a-z]+)"`, keyPage.body)}, "back": {"key"}}
	m := f.signedIn(member)
	wantStatus(t, "a member dismissing", m.post("/console/agents", "/console/developers/keys/"+id+"/notices/dismiss", form), 404)
	if p := b.get("/console/developers/keys/" + id); !strings.Contains(p.body, `id="key-notices"`) {
		t.Fatal("a member dismissed the notice")
	}

	a := f.signedIn(admin)
	p := a.post("/console/developers/keys/"+id, "/console/developers/keys/"+id+"/notices/dismiss", form)
	wantRedirect(t, "dismiss", p, "/console/developers/keys/"+id+"?done=notice-dismissed")
	for _, path := range []string{"/console/developers", "/console/developers/keys/" + id} {
		if p := b.get(path); strings.Contains(p.body, `id="key-notices"`) {
			t.Errorf("%s: the notice outlived its dismissal", path)
		}
	}
	wantStatus(t, "dismissing twice", a.post("/console/developers/keys/"+id, "/console/developers/keys/"+id+"/notices/dismiss", form), 404)
	checkDismissAudit(t, f, acme.ID, id, admin)
}

func checkDismissAudit(t *testing.T, f *fixture, accountID, keyID string, by domain.User) {
	t.Helper()
	evs, err := f.st.ListKeyAuditEvents(context.Background(), accountID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range evs {
		actions = append(actions, string(ev.Action))
		if ev.Action == domain.AuditNoticeDismissed && (ev.ActorID != by.ID || !strings.Contains(ev.Detail, "after idle")) {
			t.Errorf("dismissal entry %+v", ev)
		}
	}
	if !strings.Contains(strings.Join(actions, " "), "notice_dismissed anomaly") {
		t.Errorf("the key's trail %v lacks the anomaly and its dismissal", actions)
	}
}

// noticeSection is the notices block of a page.
func noticeSection(body string) string {
	return regexpFind(`(?s)(<section class="notice notice-warn key-notices".*?</section>)`, body)
}

// TestKeyNoticesWithMail: with a mail server set, the notice does not say
// that no email was sent.
func TestKeyNoticesWithMail(t *testing.T) {
	f := newFixture(t, func(c *console.Config) { c.MailEnabled = true })
	acme, owner := f.account("Acme")
	idleKeyNotice(t, f, acme, owner, "ci")
	p := f.signedIn(owner).get("/console/developers")
	wantHolds(t, "the notice", noticeSection(p.body), []string{"Owners and Admins get an email"}, []string{"No email was sent"})
}
