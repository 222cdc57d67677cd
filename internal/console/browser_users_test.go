package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestBrowserUserManagement walks an Owner's user management in headless
// Chromium: a role change, a role marked at fault, a new one-time password
// (confirmed in the dialog, shown once), deactivation and reactivation, and
// the audit trail naming each; screenshots at 1280 and 390 pixels (where
// Sign out stays on screen) go to $AGENTAPI_ARTIFACTS_DIR.
func TestBrowserUserManagement(t *testing.T) {
	chromium := testenv.Chromium(t)
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	bob := f.user(a, "bob@acme.example", domain.RoleAdmin)

	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	bctx, cancelTimeout := context.WithTimeout(bctx, 120*time.Second)
	defer cancelTimeout()
	dialogs := make(chan string, 4)
	openings := chromedp.Events(bctx, cdppage.JavascriptDialogOpening)
	go func() {
		for ev, err := range openings {
			if err != nil {
				return
			}
			select {
			case dialogs <- ev.Message:
			default:
			}
			_, _ = chromedp.Call(bctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, expr string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	shots := func(name string) {
		t.Helper()
		for _, width := range []int64{1280, 390} {
			do("viewport", chromedp.EmulateViewport(width, 900))
			if width == 390 {
				out := eval("sign out", `(function () {
					var r = document.querySelector('form[action="/console/signout"] button').getBoundingClientRect();
					var w = document.documentElement.scrollWidth;
					return (r.width > 0 && r.left >= 0 && r.right <= 390 && w <= 390) ? 'ok' : 'Sign out at ' + r.left + '..' + r.right + ', page ' + w + ' wide';
				})()`)
				if out != "ok" {
					t.Errorf("%s at 390 pixels: %s", name, out)
				}
			}
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("screenshot %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("users-%s-%d.png", name, width)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		do("viewport", chromedp.EmulateViewport(1280, 900))
	}
	base := f.srv.URL
	bobPage := base + "/console/users/" + bob.ID

	do("sign in", chromedp.Navigate(base+"/console/signin"), chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), owner.Email),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("new-key")))
	do("users", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.ID("users")),
		chromedp.Click(chromedp.CSS(`#users a[href="/console/users/`+bob.ID+`"]`)), chromedp.WaitVisible(chromedp.ID("save-role")))
	shots("01-user")

	// A role the form does not offer is marked beside the field.
	do("bad role", chromedp.Evaluate[chromedp.Void](`document.querySelector('#user-role-select option').value = 'root'`),
		chromedp.SetValue(chromedp.ID("user-role-select"), "root"),
		chromedp.Click(chromedp.ID("save-role")), chromedp.WaitVisible(chromedp.ID("role-error")))
	if inv := eval("aria-invalid", `document.getElementById('user-role-select').getAttribute('aria-invalid')`); inv != "true" {
		t.Fatalf("the role is not marked: %q", inv)
	}
	shots("02-role-error")
	do("role", chromedp.Navigate(bobPage), chromedp.WaitVisible(chromedp.ID("save-role")),
		chromedp.SetValue(chromedp.ID("user-role-select"), "owner"),
		chromedp.Click(chromedp.ID("save-role")), chromedp.WaitVisible(chromedp.CSS(`.notice-ok`)))
	if role := eval("role", `document.getElementById('user-role').textContent`); role != "owner" {
		t.Fatalf("role shown: %q", role)
	}
	if u, _ := f.st.GetUser(ctx, bob.ID); u.Role != domain.RoleOwner {
		t.Fatalf("stored role: %s", u.Role)
	}

	// A new one-time password, after the confirmation dialog.
	do("new password", chromedp.Click(chromedp.ID("new-password")), chromedp.WaitVisible(chromedp.ID("one-time-password")))
	select {
	case msg := <-dialogs:
		if !strings.Contains(msg, "bob@acme.example") {
			t.Errorf("confirmation: %q", msg)
		}
	default:
		t.Error("no confirmation before a new one-time password")
	}
	pw, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("one-time-password")))
	if err != nil || strings.TrimSpace(pw) == "" {
		t.Fatalf("one-time password: %q, %v", pw, err)
	}
	f.secrets = append(f.secrets, strings.TrimSpace(pw))
	shots("03-new-password")
	if u, _ := f.st.GetUser(ctx, bob.ID); !u.MustChangePassword {
		t.Fatal("Bob need not choose a password")
	}

	// Deactivate (confirmation page) and reactivate.
	do("deactivate", chromedp.Navigate(bobPage), chromedp.WaitVisible(chromedp.ID("deactivate")),
		chromedp.Click(chromedp.ID("deactivate")), chromedp.WaitVisible(chromedp.ID("confirm-deactivate")),
		chromedp.Click(chromedp.ID("confirm-deactivate")), chromedp.WaitVisible(chromedp.ID("users")))
	do("deactivated", chromedp.Navigate(bobPage), chromedp.WaitVisible(chromedp.ID("reactivate")))
	shots("04-deactivated")
	do("reactivate", chromedp.Click(chromedp.ID("reactivate")), chromedp.WaitVisible(chromedp.ID("save-role")))
	if u, _ := f.st.GetUser(ctx, bob.ID); !u.Active {
		t.Fatal("Bob is not active again")
	}

	do("audit", chromedp.Navigate(base+"/console/developers/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	trail := eval("audit", `document.getElementById('audit').textContent`)
	for _, want := range []string{"role changed", "password reset", "user deactivated", "user reactivated"} {
		if !strings.Contains(trail, want) {
			t.Errorf("the audit trail has no %q", want)
		}
	}
	shots("05-audit")
}
