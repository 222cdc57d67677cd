package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestBrowserUserManagement walks an Owner's user management in headless
// Chromium: a role change, a role marked at fault, a new one-time password
// (confirmed in the dialog, shown once), deactivation and reactivation, and
// the audit trail naming each; screenshots at 1280 and 390 pixels (where
// Sign out stays on screen) go to $AGENTAPI_ARTIFACTS_DIR.
func TestBrowserUserManagement(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	bob := f.user(a, "bob@acme.example", domain.RoleAdmin)

	b := newTab(t, f.srv.URL, 1280, 120*time.Second)
	b.prefix = "users"
	// narrow: at 390 pixels Sign out stays on screen and nothing scrolls
	// sideways.
	narrow := func(name string) {
		t.Helper()
		out := b.eval("sign out", `(function () {
			var r = document.querySelector('form[action="/console/signout"] button').getBoundingClientRect();
			var w = document.documentElement.scrollWidth;
			return (r.width > 0 && r.left >= 0 && r.right <= 390 && w <= 390) ? 'ok' : 'Sign out at ' + r.left + '..' + r.right + ', page ' + w + ' wide';
		})()`)
		if out != "ok" {
			t.Errorf("%s at 390 pixels: %s", name, out)
		}
	}
	base := f.srv.URL
	bobPage := base + "/console/users/" + bob.ID

	b.signIn(owner.Email, testPassword, "new-key")
	b.do("users", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.ID("users")),
		chromedp.Click(chromedp.CSS(`#users a[href="/console/users/`+bob.ID+`"]`)), chromedp.WaitVisible(chromedp.ID("save-role")))
	b.shots("01-user", narrow)

	// A role the form does not offer is marked beside the field.
	b.do("bad role", chromedp.Evaluate[chromedp.Void](`document.querySelector('#user-role-select option').value = 'root'`),
		chromedp.SetValue(chromedp.ID("user-role-select"), "root"),
		chromedp.Click(chromedp.ID("save-role")), chromedp.WaitVisible(chromedp.ID("role-error")))
	if inv := b.eval("aria-invalid", `document.getElementById('user-role-select').getAttribute('aria-invalid')`); inv != "true" {
		t.Fatalf("the role is not marked: %q", inv)
	}
	b.shots("02-role-error", narrow)
	b.do("role", chromedp.Navigate(bobPage), chromedp.WaitVisible(chromedp.ID("save-role")),
		chromedp.SetValue(chromedp.ID("user-role-select"), "owner"),
		chromedp.Click(chromedp.ID("save-role")), chromedp.WaitVisible(chromedp.CSS(`.notice-ok`)))
	if role := b.eval("role", `document.getElementById('user-role').textContent`); role != "owner" {
		t.Fatalf("role shown: %q", role)
	}
	if u, _ := f.st.GetUser(ctx, bob.ID); u.Role != domain.RoleOwner {
		t.Fatalf("stored role: %s", u.Role)
	}

	// A new one-time password, after the confirmation dialog.
	b.do("new password", chromedp.Click(chromedp.ID("new-password")), chromedp.WaitVisible(chromedp.ID("one-time-password")))
	if msg, ok := b.dialog(); ok {
		if !strings.Contains(msg, "bob@acme.example") {
			t.Errorf("confirmation: %q", msg)
		}
	} else {
		t.Error("no confirmation before a new one-time password")
	}
	pw, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID("one-time-password")))
	if err != nil || strings.TrimSpace(pw) == "" {
		t.Fatalf("one-time password: %q, %v", pw, err)
	}
	f.secrets = append(f.secrets, strings.TrimSpace(pw))
	b.shots("03-new-password", narrow)
	if u, _ := f.st.GetUser(ctx, bob.ID); !u.MustChangePassword {
		t.Fatal("Bob need not choose a password")
	}

	// Deactivate (confirmation page) and reactivate.
	b.do("deactivate", chromedp.Navigate(bobPage), chromedp.WaitVisible(chromedp.ID("deactivate")),
		chromedp.Click(chromedp.ID("deactivate")), chromedp.WaitVisible(chromedp.ID("confirm-deactivate")),
		chromedp.Click(chromedp.ID("confirm-deactivate")), chromedp.WaitVisible(chromedp.ID("users")))
	b.do("deactivated", chromedp.Navigate(bobPage), chromedp.WaitVisible(chromedp.ID("reactivate")))
	b.shots("04-deactivated", narrow)
	b.do("reactivate", chromedp.Click(chromedp.ID("reactivate")), chromedp.WaitVisible(chromedp.ID("save-role")))
	if u, _ := f.st.GetUser(ctx, bob.ID); !u.Active {
		t.Fatal("Bob is not active again")
	}

	b.do("audit", chromedp.Navigate(base+"/console/developers/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	trail := b.eval("audit", `document.getElementById('audit').textContent`)
	for _, want := range []string{"role changed", "password reset", "user deactivated", "user reactivated"} {
		if !strings.Contains(trail, want) {
			t.Errorf("the audit trail has no %q", want)
		}
	}
	b.shots("05-audit", narrow)
}
