package keys_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestAdmitFloodRefusedLocallyThenRevoked: a key flooding past its limit
// is refused by each instance without asking Redis (docs/production.md,
// "A key floods"); once it is revoked, no instance ever accepts it, and
// each refuses it as revoked once its repair has read the store's epoch.
func TestAdmitFloodRefusedLocallyThenRevoked(t *testing.T) {
	w := newMirroredWorld(t, testenv.RedisURL(t))
	ctx := context.Background()
	c := w.newKey(t)
	svc := keys.New(w.writer.st, nil)
	if err := svc.SetRateLimit(ctx, c.Key.ID, 2); err != nil {
		t.Fatal(err)
	}
	for _, in := range w.instances {
		for range 10 {
			_, _, _ = in.authn.AdmitFrom(ctx, c.Credential, time.Now(), "")
		}
		if in.lim.LocalRefusals() < 5 {
			t.Fatalf("%d of the flood refused in process, want most", in.lim.LocalRefusals())
		}
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, in := range w.instances {
		go in.fresh.Repair(rctx)
	}
	if err := svc.Revoke(ctx, keys.Actor{User: &w.owner}, w.account.ID, c.Key.ID); err != nil {
		t.Fatal(err)
	}
	for i, in := range w.instances {
		waitFor(t, "the revoked key refused as revoked", func() bool { return floodRequestRevoked(t, i, in, c.Credential) })
	}
}

// floodRequestRevoked makes one request of the flood on in: false while
// it is refused for its limit, true once as revoked; any admission fails
// the test.
func floodRequestRevoked(t *testing.T, i int, in *instance, token string) bool {
	t.Helper()
	_, res, err := in.authn.AdmitFrom(context.Background(), token, time.Now(), "")
	var refused *keys.Refused
	switch {
	case errors.As(err, &refused):
		return true
	case err != nil:
		t.Fatalf("instance %d: %v", i, err)
	case res.Allowed:
		t.Fatalf("instance %d admitted the revoked key", i)
	}
	time.Sleep(fresh.RepairEvery / 10)
	return false
}
