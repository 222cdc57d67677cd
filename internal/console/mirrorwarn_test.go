package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/testenv"
)

const mirrorWarningText = "other instances may accept the old key for up to 1 second"

// TestConsoleWarnsWhenTheMirrorWasNotRaised: a key revoked, edited or
// rotated (the old key stopping now) from the console while Redis does
// not take the mirror's raise is saved, and the page it leads to says
// other instances may accept the old key for up to a second; with the
// raise taken, no warning.
func TestConsoleWarnsWhenTheMirrorWasNotRaised(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	keyPath := func(id string) string { return "/console/developers/keys/" + id }

	follow := func(what string, p page) page {
		t.Helper()
		wantRedirect(t, what, p, "/console/developers/keys/")
		return b.get(p.header.Get("Location"))
	}
	check := func(raise bool) {
		t.Helper()
		warned := func(what string, p page) {
			t.Helper()
			wantStatus(t, what, p, http.StatusOK)
			if got := strings.Contains(p.body, mirrorWarningText) && strings.Contains(p.body, `class="notice notice-warn" role="alert"`); got == raise {
				t.Fatalf("%s (raise taken: %v): warning shown %v\n%s", what, raise, got, p.body)
			}
		}
		k := f.key(a, owner, "edited")
		warned("edit", follow("edit", b.post(keyPath(k.Key.ID)+"/edit", keyPath(k.Key.ID)+"/edit",
			url.Values{"name": {"renamed"}, "description": {"d"}, "allowed_ips": {""}})))
		if got, _ := f.keys.Get(context.Background(), a.ID, k.Key.ID); got.Name != "renamed" {
			t.Fatalf("the edit was not saved: %q", got.Name)
		}

		k = f.key(a, owner, "revoked")
		warned("revoke", follow("revoke", b.post(keyPath(k.Key.ID)+"/revoke", keyPath(k.Key.ID)+"/revoke", nil)))
		if f.apiStatus(k.Credential) != http.StatusUnauthorized {
			t.Fatal("the revocation was not saved")
		}

		k = f.key(a, owner, "rotated")
		p := b.post(keyPath(k.Key.ID)+"/rotate", keyPath(k.Key.ID)+"/rotate", url.Values{"old_expires": {"now"}})
		shown := follow("rotate", p)
		warned("rotate", shown)
		if cred := credentialRE.FindString(shown.body); cred != "" {
			f.secrets = append(f.secrets, cred)
		}
		if f.apiStatus(k.Credential) != http.StatusUnauthorized {
			t.Fatal("the old key still works after a rotation that stops it now")
		}
	}

	check(true)
	// From now on the store's commits are told to a tracker whose Redis
	// never answers.
	opts, err := ratelimit.ClientOptions("redis://" + testenv.SilentListener(t))
	if err != nil {
		t.Fatal(err)
	}
	dead := redis.NewClient(opts)
	t.Cleanup(func() { dead.Close() })
	fail := fresh.New(f.st, fresh.Options{Redis: dead, StoreID: []byte("console"), RaiseTimeout: 200 * time.Millisecond})
	check(false)
	if n := fail.RaiseFailures(); n < 3 {
		t.Fatalf("%d raises failed; want one per change", n)
	}
}
