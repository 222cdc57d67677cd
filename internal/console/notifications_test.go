package console_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
)

// TestEmailNoticesPage: an Owner or Admin sees the four mailed notices and
// their own address, with "yes" while serve sends mail and a warning that
// no email is sent without --smtp-url; an agent user is told they get
// none. Every signed-in user finds the page in the navigation.
func TestEmailNoticesPage(t *testing.T) {
	kinds := []string{"api_key.leaked", "api_key.anomaly", "api_key.expiring", "webhook_endpoint.disabled"}
	for _, on := range []bool{true, false} {
		f := newFixture(t, func(c *console.Config) { c.MailEnabled = on })
		acct, owner := f.account("Acme")
		admin := f.user(acct, "admin@example.com", domain.RoleAdmin)
		agent := f.user(acct, "bot@example.com", domain.RoleAgent)
		for _, u := range []domain.User{owner, admin} {
			p := f.signedIn(u).get("/console/notifications")
			wantStatus(t, "notices page", p, http.StatusOK)
			want := append([]string{u.Email, `id="nav-notifications"`, `aria-current="page"`}, kinds...)
			if on {
				wantHolds(t, "notices page, mail on", p.body, append(want, "you get an email at", "emailed to you"), []string{`id="mail-off"`, "not sent: mail is off"})
			} else {
				wantHolds(t, "notices page, mail off", p.body, append(want, `id="mail-off"`, "--smtp-url", "not sent: mail is off"), []string{"emailed to you"})
			}
		}
		p := f.signedIn(agent).get("/console/notifications")
		wantStatus(t, "agent's notices page", p, http.StatusOK)
		wantHolds(t, "agent's notices page", p.body, []string{"gets no notice emails", "(agent)"}, []string{"api_key.leaked", "emailed to you"})
		p = f.signedIn(agent).get("/console/agents")
		wantHolds(t, "agent's navigation", p.body, []string{`href="/console/notifications"`}, nil)
	}
}

// TestBrowserEmailNoticesWithMail looks at the page while serve sends
// mail, at 1400 and 400 pixels (notifications-on-*.png): nothing sticks
// out sideways at 400. TestBrowserEveryPageAt400 looks at it with mail off.
func TestBrowserEmailNoticesWithMail(t *testing.T) {
	f := newFixture(t, func(c *console.Config) { c.MailEnabled = true })
	_, owner := f.account("Acme")
	b := newTab(t, f.srv.URL, 1400, 60*time.Second)
	b.signIn(owner.Email, testPassword, "nav-notifications")
	b.do("notices", chromedp.Navigate(f.srv.URL+"/console/notifications"), chromedp.WaitVisible(chromedp.ID("mail-kinds")))
	for _, width := range []int64{1400, 400} {
		b.do("viewport", chromedp.EmulateViewport(width, 900))
		if got := b.eval("overflow", overflowJS); got != "ok" {
			t.Errorf("at %d pixels: %s", width, got)
		}
		b.shot(fmt.Sprintf("notifications-on-%d", width))
	}
}
