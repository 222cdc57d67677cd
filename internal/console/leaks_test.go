package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestLeakedKeyBanner: a key revoked because GitHub reported it leaked is
// named on the Developers page, with the URL escaped, to the account's
// Owners and Admins for 30 days; its history shows the event; a key revoked
// by hand and another account's leak make no banner.
func TestLeakedKeyBanner(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	acme, owner := f.account("Acme")
	admin := f.user(acme, "admin@acme.example", domain.RoleAdmin)
	other, otherOwner := f.account("Other")
	leaked := f.key(acme, owner, "CI <deploy>")
	byHand := f.key(acme, owner, "rotated away")
	elsewhere := f.key(other, otherOwner, "their key")
	if err := f.keys.Revoke(ctx, domainActor(owner), acme.ID, byHand.Key.ID); err != nil {
		t.Fatal(err)
	}

	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	if p := b.get("/console/developers"); strings.Contains(p.body, `id="leaked-keys"`) {
		t.Fatal("a banner before any leak")
	}

	url := `https://github.com/octo/leak/blob/main/x.py?<script>alert(1)</script>`
	for _, c := range []string{leaked.Credential, elsewhere.Credential} {
		if l, err := f.keys.RevokeLeaked(ctx, c, url); err != nil || !l.Revoked {
			t.Fatalf("RevokeLeaked: %+v, %v", l, err)
		}
	}
	for _, who := range []domain.User{owner, admin} {
		b := f.browser()
		b.signIn(who.Email, testPassword, "/console/")
		p := b.get("/console/developers")
		wantStatus(t, "developers", p, 200)
		banner := regexpFind(`(?s)(<div class="notice notice-error" role="alert" id="leaked-keys">.*?</div>)`, p.body)
		wantHolds(t, who.Email+": the banner", banner, []string{
			"A key was", "found in public code and revoked",
			`href="/console/developers/keys/` + leaked.Key.ID + `"`, "CI &lt;deploy&gt;", leaked.Key.Prefix,
			"https://github.com/octo/leak/blob/main/x.py?&lt;script&gt;alert(1)&lt;/script&gt;",
		}, []string{"<script>", byHand.Key.ID, elsewhere.Key.ID, elsewhere.Key.Prefix})
	}

	p := b.get("/console/developers/keys/" + leaked.Key.ID)
	wantStatus(t, "key page", p, 200)
	wantHolds(t, "the key's history", p.body, []string{"GitHub secret scanning", "reported leaked at https://github.com/octo/leak/blob/main/x.py?&lt;script&gt;"}, nil)

	f.clock.Advance(31 * 24 * time.Hour)
	if p := b.get("/console/developers"); strings.Contains(p.body, `id="leaked-keys"`) {
		t.Fatal("the banner outlived 30 days")
	}
}
