package keys_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestRedisBackToTheHeldEpoch: Redis goes back to exactly the epoch under
// which an instance holds a key (a replica promoted with an older copy of
// the mirror) after the key was revoked. An instance that has learned of
// the later epoch (its own write, its repair's read of the store) refuses
// the key on its very next request; one that has not accepts it until its
// repair reads the store (docs/production.md: the remaining bound).
func TestRedisBackToTheHeldEpoch(t *testing.T) {
	w := newMirroredWorld(t, testenv.RedisURL(t))
	ctx := context.Background()
	back := func(in *instance, epoch int64) {
		t.Helper()
		if err := in.rc.Set(ctx, w.mirrorKey(), epoch, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		var r *keys.Refused
		if !errors.As(err, &r) {
			t.Fatalf("%s: %v; want refused", what, err)
		}
	}
	for trial := range 20 {
		// Its own write: instance 0 revokes the key it holds.
		k := w.newKey(t)
		w.warm(t, k.Credential)
		own := w.instances[0]
		l, ok := own.authn.HeldKey(k.Key.Prefix)
		if !ok {
			t.Fatal("the key is not held after a request")
		}
		if err := keys.New(own.st, nil).Revoke(ctx, keys.Actor{User: &w.owner}, w.account.ID, k.Key.ID); err != nil {
			t.Fatal(err)
		}
		back(own, l.Epoch())
		refused("own write, Redis back to the held epoch", own.admit(k.Credential))

		// Another's write: instance 1 learns of it by its repair's read;
		// instance 2, which has not read the store since, is the bound.
		k = w.newKey(t)
		w.warm(t, k.Credential)
		l, _ = w.instances[1].authn.HeldKey(k.Key.Prefix)
		if err := keys.New(w.writer.st, nil).Revoke(ctx, keys.Actor{User: &w.owner}, w.account.ID, k.Key.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := w.instances[1].fresh.Check(ctx); err != nil { // what Mirror.Repair reads
			t.Fatal(err)
		}
		back(w.writer, l.Epoch())
		refused("repair's read, Redis back to the held epoch", w.instances[1].admit(k.Credential))
		if trial == 0 {
			if err := w.instances[2].admit(k.Credential); err != nil {
				t.Fatalf("instance 2 (no read since the change): %v; the test's premise is that it cannot know", err)
			}
		}
		if _, err := w.instances[2].fresh.Check(ctx); err != nil {
			t.Fatal(err)
		}
		refused("instance 2 after its repair's read", w.instances[2].admit(k.Credential))
	}
}
