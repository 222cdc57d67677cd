package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestOwnerManagesUsers walks an Owner's user management: a role change
// (and a bad role marked on its field), deactivation and reactivation, a
// new one-time password (shown once, ending the user's sessions, replacing
// the old password), the refusals for oneself and for a deactivated user,
// and the audit trail that records each.
func TestOwnerManagesUsers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	bob := f.user(a, "bob@acme.example", domain.RoleAdmin)
	carl := f.user(a, "carl@acme.example", domain.RoleAgent)
	ob, bb := f.browser(), f.browser()
	ob.signIn(owner.Email, testPassword, "/console/")
	bb.signIn(bob.Email, testPassword, "/console/")
	bobPage := "/console/users/" + bob.ID

	users := ob.get("/console/users")
	if !strings.Contains(users.body, `href="`+bobPage+`"`) || strings.Contains(users.body, `href="/console/users/`+owner.ID+`"`) {
		t.Fatal("users page: no link to manage Bob, or one to manage oneself")
	}
	wantRedirect(t, "role", ob.post(bobPage, bobPage+"/role", url.Values{"role": {"owner"}}), bobPage+"?done=role")
	if u, _ := f.st.GetUser(ctx, bob.ID); u.Role != domain.RoleOwner {
		t.Fatalf("role after change: %s", u.Role)
	}
	bad := ob.post(bobPage, bobPage+"/role", url.Values{"role": {"root"}})
	wantStatus(t, "bad role", bad, http.StatusUnprocessableEntity)
	if !strings.Contains(bad.body, `id="role-error"`) || !strings.Contains(bad.body, `aria-invalid="true" aria-describedby="role-error"`) {
		t.Fatalf("bad role: the field is not marked\n%s", bad.body)
	}
	self := "/console/users/" + owner.ID
	wantStatus(t, "own page", ob.get(self), http.StatusOK)
	wantStatus(t, "own role", ob.post(self, self+"/role", url.Values{"role": {"agent"}}), http.StatusConflict)
	wantStatus(t, "own password", ob.post(self, self+"/password", nil), http.StatusConflict)

	// A new one-time password: shown once, Bob's session ends, and only it
	// (not his old password) signs him in, to choose his own.
	p := ob.post(bobPage, bobPage+"/password", nil)
	wantStatus(t, "new password", p, http.StatusCreated)
	oneTime := regexpFind(`id="one-time-password" class="credential">([^<]+)<`, p.body)
	if oneTime == "" || p.header.Get("Cache-Control") != "no-store" || !strings.Contains(p.body, "New one-time password") {
		t.Fatalf("new password page:\n%s", p.body)
	}
	f.secrets = append(f.secrets, oneTime)
	if strings.Contains(ob.get(bobPage).body, oneTime) {
		t.Fatal("the one-time password is shown again")
	}
	wantRedirect(t, "Bob's next request", bb.get("/console/developers"), "/console/signin")
	wantStatus(t, "Bob's old password", f.browser().signInRaw(bob.Email, testPassword), http.StatusUnauthorized)
	f.browser().signIn(bob.Email, oneTime, "/console/password")

	// Deactivate and reactivate Carl.
	carlPage := "/console/users/" + carl.ID
	wantRedirect(t, "deactivate", ob.post(carlPage+"/deactivate", carlPage+"/deactivate", nil), "/console/users?done=deactivated")
	page := ob.get(carlPage)
	if !strings.Contains(page.body, `id="reactivate"`) || strings.Contains(page.body, `id="new-password"`) {
		t.Fatal("a deactivated user's page: no Reactivate, or a password button")
	}
	wantStatus(t, "password of a deactivated user", ob.post(carlPage, carlPage+"/password", nil), http.StatusConflict)
	wantRedirect(t, "reactivate", ob.post(carlPage, carlPage+"/reactivate", nil), carlPage+"?done=reactivated")
	if u, _ := f.st.GetUser(ctx, carl.ID); !u.Active {
		t.Fatal("not reactivated")
	}
	f.browser().signIn(carl.Email, testPassword, "/console/")

	audit := ob.get("/console/developers/audit")
	for _, want := range []string{"role changed", "password reset", "user deactivated", "user reactivated",
		"bob@acme.example: admin → owner", "carl@acme.example"} {
		if !strings.Contains(audit.body, want) {
			t.Errorf("audit trail without %q", want)
		}
	}
	if got := ob.get("/console/developers/audit?q=" + url.QueryEscape(owner.Email)); !strings.Contains(got.body, "role changed") {
		t.Error("audit trail: user events not found by who")
	}
}

// TestInviteIsAudited: an invitation is in the audit trail, by its Owner.
func TestInviteIsAudited(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	ob := f.signedIn(owner)
	p := ob.post("/console/users", "/console/users", url.Values{"email": {"dee@acme.example"}, "role": {"admin"}})
	wantStatus(t, "invite", p, http.StatusCreated)
	f.secrets = append(f.secrets, regexpFind(`id="one-time-password" class="credential">([^<]+)<`, p.body))
	audit := ob.get("/console/developers/audit")
	if !strings.Contains(audit.body, "user invited") || !strings.Contains(audit.body, "dee@acme.example as admin") {
		t.Fatalf("audit trail without the invitation:\n%s", audit.body)
	}
}

// TestUserManagementIsOwnersOnly: Admins and Agents get 404 for every
// user route, an Owner gets 404 for another account's users, and every POST
// needs the session's CSRF token.
func TestUserManagementIsOwnersOnly(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	_, theirOwner := f.account("Globex")
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)
	agentUser := f.user(a, "agent@acme.example", domain.RoleAgent)
	victim := "/console/users/" + agentUser.ID
	for _, u := range []domain.User{admin, agentUser} {
		b := f.browser()
		b.signIn(u.Email, testPassword, "/console/")
		wantStatus(t, u.Email+" GET", b.get(victim), http.StatusNotFound)
		for _, action := range []string{"/role", "/password", "/reactivate", "/deactivate"} {
			wantStatus(t, u.Email+" POST "+action, b.post("/console/agents", victim+action, url.Values{"role": {"owner"}}), http.StatusNotFound)
		}
	}
	ob := f.signedIn(owner)
	theirs := "/console/users/" + theirOwner.ID
	wantStatus(t, "their user", ob.get(theirs), http.StatusNotFound)
	for _, action := range []string{"/role", "/password", "/reactivate"} {
		wantStatus(t, "their user "+action, ob.post("/console/users", theirs+action, url.Values{"role": {"agent"}}), http.StatusNotFound)
		p := ob.do(http.MethodPost, victim+action, url.Values{"role": {"owner"}, "csrf": {"forged"}})
		wantStatus(t, "forged token "+action, p, http.StatusForbidden)
	}
	if u, _ := f.st.GetUser(context.Background(), agentUser.ID); u.Role != domain.RoleAgent || u.MustChangePassword || !u.Active {
		t.Fatalf("a refused request changed the user: %+v", u)
	}
	if u, _ := f.st.GetUser(context.Background(), theirOwner.ID); u.Role != domain.RoleOwner || u.MustChangePassword {
		t.Fatalf("another account's user changed: %+v", u)
	}
}

// TestUserPageEscapes: a stored email with markup is shown as text.
func TestUserPageEscapes(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	evil := f.user(a, `<script>alert(1)</script>"@acme.example`, domain.RoleAgent)
	ob := f.signedIn(owner)
	for _, path := range []string{"/console/users/" + evil.ID, "/console/users"} {
		p := ob.get(path)
		wantStatus(t, path, p, http.StatusOK)
		if strings.Contains(p.body, "<script>alert(1)") || !strings.Contains(p.body, "&lt;script&gt;alert(1)") {
			t.Fatalf("%s: the email is not escaped", path)
		}
	}
}

// TestDeactivatedUserNoticeKeepsEmail: the refusal to reset a deactivated
// user's password neither alters their email (a first letter not ASCII,
// or lower case) nor shows it outside <bdi>.
func TestDeactivatedUserNoticeKeepsEmail(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ob := f.signedIn(owner)
	for _, email := range []string{"éva@x.test", "agent2@x.test", "\u202eeva@x.test"} {
		u := f.user(a, email, domain.RoleAgent)
		page := "/console/users/" + u.ID
		wantRedirect(t, "deactivate", ob.post(page+"/deactivate", page+"/deactivate", nil), "/console/users?done=deactivated")
		p := ob.post(page, page+"/password", nil)
		wantStatus(t, email+": password of a deactivated user", p, http.StatusConflict)
		notice := regexpFind(`id="user-error">([^<]*)<`, p.body)
		if notice != "This user is deactivated: reactivate them first." {
			t.Errorf("%q: notice %q", email, notice)
		}
		if !strings.Contains(p.body, "<bdi>"+email+"</bdi>") || strings.Contains(p.body, "\ufffd") || strings.Contains(p.body, "Agent2") {
			t.Errorf("%q: the email is altered or not in <bdi>", email)
		}
	}
}
