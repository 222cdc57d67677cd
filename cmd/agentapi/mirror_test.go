package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// mirroredInstance is serve's authentication as far as the mirror goes:
// a store on dsn, a Redis limiter checking held keys against the mirror.
func mirroredInstance(t *testing.T, dsn, redisURL string) func(token string) error {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rc, err := ratelimit.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	tr, err := fresh.Open(ctx, st, rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := ratelimit.NewRedis(rc, ratelimit.NewMemory(nil), nil)
	t.Cleanup(lim.Close)
	a, err := keys.NewAuthenticator(keys.AuthConfig{Store: st, Fresh: tr, Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go tr.Repair(rctx)
	return func(token string) error {
		_, err := a.Admit(ctx, keys.Request{Token: token, Now: time.Now()})
		return err
	}
}

// TestOperatorRedisRaisesTheMirror: key revoke, key set-rate-limit and
// account deactivate given --redis are seen by every instance on its very
// next request; given a Redis that does not answer, the change is kept
// and the command exits 1 naming the one-second bound.
func TestOperatorRedisRaisesTheMirror(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	acct := mustCLI(t, dsn, "", "account", "create", "--name", "Acme")
	mustCLI(t, dsn, "a long passphrase\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	instances := []func(string) error{
		mirroredInstance(t, dsn, redisURL), mirroredInstance(t, dsn, redisURL), mirroredInstance(t, dsn, redisURL),
	}
	newKey := func() (string, string) {
		t.Helper()
		return raisesMirrorKey(t, dsn, acct, instances)
	}
	for trial := range 20 {
		id, cred := newKey()
		switch trial % 2 {
		case 0:
			mirrorCLI(t, dsn, "key", "revoke", "--redis", redisURL, "--account", acct, "--as", "ann@example.com", id)
			raisesMirrorRefused(t, instances, trial, cred)
		case 1:
			mirrorCLI(t, dsn, "account", "deactivate", "--redis", redisURL, acct)
			raisesMirrorRefused(t, instances, trial, cred)
			mirrorCLI(t, dsn, "account", "activate", "--redis", redisURL, acct)
		}
	}

	// Redis that does not answer: saved, exit 1, the bound named; the
	// instances' repair ends the stale window.
	id, cred := newKey()
	_, errs, code := cli(t, dsn, "", "key", "revoke", "--redis", "redis://127.0.0.1:1", "--account", acct, "--as", "ann@example.com", id)
	if code != 1 || !strings.Contains(errs, "the change is saved") || !strings.Contains(errs, "up to 1s") {
		t.Fatalf("exit %d, stderr %q; want 1 naming the bound", code, errs)
	}
	raisesMirrorAwaitRepair(t, instances, cred)
}

// raisesMirrorKey creates an aiagent-read key for ann (named by the time,
// so each is new) and checks that every instance admits it; it returns
// the key's id and credential.
func raisesMirrorKey(t *testing.T, dsn, acct string, instances []func(string) error) (string, string) {
	t.Helper()
	out := mirrorCLI(t, dsn, "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k"+time.Now().Format("150405.000000000"), "--preset", "aiagent-read", "--json")
	id := strings.SplitN(strings.SplitN(out, `"id":"`, 2)[1], `"`, 2)[0]
	cred := strings.SplitN(strings.SplitN(out, `"credential":"`, 2)[1], `"`, 2)[0]
	for i, admit := range instances {
		if err := admit(cred); err != nil {
			t.Fatalf("instance %d before: %v", i, err)
		}
	}
	return id, cred
}

// raisesMirrorRefused: every instance refuses cred on its very next
// request.
func raisesMirrorRefused(t *testing.T, instances []func(string) error, trial int, cred string) {
	t.Helper()
	for i, admit := range instances {
		var r *keys.Refused
		if err := admit(cred); !errors.As(err, &r) {
			t.Fatalf("trial %d, instance %d: the very next request: %v, want refused", trial, i, err)
		}
	}
}

// raisesMirrorAwaitRepair waits, up to 10 times fresh.StaleBound in
// all, for every instance to refuse cred.
func raisesMirrorAwaitRepair(t *testing.T, instances []func(string) error, cred string) {
	t.Helper()
	deadline := time.Now().Add(10 * fresh.StaleBound)
	for _, admit := range instances {
		for {
			var r *keys.Refused
			if err := admit(cred); errors.As(err, &r) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the revoked key is still accepted after the repair")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// mirrorCLI runs a command that must succeed and returns its stdout.
func mirrorCLI(t *testing.T, db string, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, db, "", args...)
	if code != 0 {
		t.Fatalf("agentapi %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}
