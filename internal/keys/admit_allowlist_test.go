package keys_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestAdmitAllowlistEditThroughTheMirror: with PostgreSQL and Redis, an
// edit of a key's IP allowlist by another writer applies on the very next
// request on every instance holding the key (one Redis round trip, no
// store check while nothing changes), like a revocation, both ways.
func TestAdmitAllowlistEditThroughTheMirror(t *testing.T) {
	w := newMirroredWorld(t, testenv.RedisURL(t))
	svc := keys.New(w.writer.st, nil)
	owner := keys.Actor{User: &w.owner}
	office, err := domain.ParseAllowList("192.0.2.0/24, 2001:db8::/32")
	if err != nil {
		t.Fatal(err)
	}
	const trials = 30
	for trial := range trials {
		admitAllowlistTrial(t, w, svc, owner, office, trial)
	}
}

// admitAllowlistTrial is one trial of TestAdmitAllowlistEditThroughTheMirror:
// a fresh key held everywhere from any address, then restricted to office
// and emptied again, each edit seen by every instance's next request.
func admitAllowlistTrial(t *testing.T, w *mirroredWorld, svc *keys.Service, owner keys.Actor, office domain.AllowList, trial int) {
	t.Helper()
	ctx := context.Background()
	c := w.newKey(t)
	for i, in := range w.instances { // held everywhere, any address
		if _, _, err := in.authn.AdmitFrom(ctx, c.Credential, time.Now(), "198.51.100.9"); err != nil {
			t.Fatalf("trial %d, instance %d before the edit: %v", trial, i, err)
		}
	}
	if _, err := svc.SetAllowedIPs(ctx, owner, w.account.ID, c.Key.ID, office); err != nil {
		t.Fatal(err)
	}
	for i, in := range w.instances {
		if _, _, err := in.authn.AdmitFrom(ctx, c.Credential, time.Now(), "198.51.100.9"); !errors.As(err, new(*keys.AddressRefused)) {
			t.Fatalf("trial %d, instance %d: the next request from outside after the edit: %v, want refused", trial, i, err)
		}
		if _, _, err := in.authn.AdmitFrom(ctx, c.Credential, time.Now(), "192.0.2.44"); err != nil {
			t.Fatalf("trial %d, instance %d: a request from inside after the edit: %v", trial, i, err)
		}
	}
	if _, err := svc.SetAllowedIPs(ctx, owner, w.account.ID, c.Key.ID, nil); err != nil {
		t.Fatal(err)
	}
	for i, in := range w.instances {
		if _, _, err := in.authn.AdmitFrom(ctx, c.Credential, time.Now(), "198.51.100.9"); err != nil {
			t.Fatalf("trial %d, instance %d: the next request after the list was emptied: %v", trial, i, err)
		}
	}
}
