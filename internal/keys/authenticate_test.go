package keys_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// wrongSecret is cred with another secret and a valid checksum: a known
// prefix whose secret does not match.
func wrongSecret(cred string) string {
	body := cred[:len(cred)-credential.SecretLen] + (rand.Text() + rand.Text())[:credential.RandomLen]
	return body + credential.Checksum(body)
}

// badChecksum is cred with its last character changed.
func badChecksum(cred string) string {
	last := "x"
	if cred[len(cred)-1] == 'x' {
		last = "y"
	}
	return cred[:len(cred)-1] + last
}

func TestAuthenticate(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	create := func(clock time.Time, expires *time.Time) keys.Created {
		t.Helper()
		c, err := keys.New(w.st, func() time.Time { return clock }).Create(ctx, keys.Actor{User: &owner},
			keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}, ExpiresAt: expires})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	valid := create(w.now, nil)
	revoked := create(w.now, nil)
	if err := w.svc.Revoke(ctx, keys.Actor{User: &owner}, w.account.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	past := w.now.Add(-time.Hour)
	expiry := past.Add(time.Minute)
	expired := create(past, &expiry)
	unknown, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}

	var background sync.WaitGroup
	a, err := keys.NewAuthenticator(keys.AuthConfig{Store: w.st, Background: &background})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"valid", valid.Credential, ""},
		{"malformed", badChecksum(valid.Credential), "malformed"},
		{"unknown prefix", unknown.Text, "unknown"},
		{"wrong secret", wrongSecret(valid.Credential), "wrong_secret"},
		{"revoked", revoked.Credential, "revoked"},
		{"expired", expired.Credential, "expired"},
		{"expired again", expired.Credential, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) { authenticateCheckToken(t, a, tc.token, w.now, tc.reason, valid.Key.ID) })
	}
	// The expired key's use is in the audit trail once, however often it came.
	background.Wait()
	authenticateCheckExpiredInUseOnce(t, w, expired.Key.ID)
}

// authenticateCheckToken: a.Authenticate admits token as the key validID
// when reason is empty, and otherwise refuses it for reason, telling the
// client only that the key is invalid.
func authenticateCheckToken(t *testing.T, a *keys.Authenticator, token string, now time.Time, reason, validID string) {
	t.Helper()
	k, err := a.Authenticate(context.Background(), token, now)
	if reason == "" {
		if err != nil || k.ID != validID {
			t.Fatalf("Authenticate = %s, %v; want %s", k.ID, err, validID)
		}
		return
	}
	var refused *keys.Refused
	if !errors.As(err, &refused) || refused.Reason != reason {
		t.Fatalf("Authenticate = %v; want refused (%s)", err, reason)
	}
	// One answer for every reason: the client cannot tell them apart.
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeInvalidCredentials || de.Message != "The API key is invalid." {
		t.Errorf("client sees %v; want invalid_credentials", de)
	}
	if k.ID != "" {
		t.Errorf("a refusal returned key %s", k.ID)
	}
}

// authenticateCheckExpiredInUseOnce: the key keyID's audit trail holds
// exactly one expired_in_use event.
func authenticateCheckExpiredInUseOnce(t *testing.T, w *world, keyID string) {
	t.Helper()
	evs, err := w.st.ListKeyAuditEvents(context.Background(), w.account.ID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Action == "expired_in_use" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d expired_in_use events; want 1", n)
	}
}

// TestAuthenticateRefusalCostsAnUnknownPrefixRead: a refusal of a key held
// in memory makes the one database read an unknown prefix makes, so that
// timing does not tell a known prefix from an unknown one; an admitted
// request makes none.
func TestAuthenticateRefusalCostsAnUnknownPrefixRead(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	c, err := w.svc.Create(ctx, keys.Actor{User: &owner}, keys.CreateParams{AccountID: w.account.ID, Name: "k", Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := keys.NewAuthenticator(keys.AuthConfig{Store: w.st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, c.Credential, w.now); err != nil { // now held in memory
		t.Fatal(err)
	}
	reads := func() uint64 { return a.CacheStats().Reads }
	before := reads()
	if _, err := a.Authenticate(ctx, c.Credential, w.now); err != nil {
		t.Fatal(err)
	}
	if got := reads() - before; got != 0 {
		t.Errorf("an admitted key held in memory cost %d database reads; want 0", got)
	}
	before = reads()
	if _, err := a.Authenticate(ctx, wrongSecret(c.Credential), w.now); err == nil {
		t.Fatal("wrong secret admitted")
	}
	if got := reads() - before; got != 1 {
		t.Errorf("a refusal of a key held in memory cost %d database reads; want 1, as an unknown prefix", got)
	}
}

func TestNewAuthenticatorNeedsAStore(t *testing.T) {
	if _, err := keys.NewAuthenticator(keys.AuthConfig{}); err == nil {
		t.Error("NewAuthenticator(nil store) succeeded")
	}
}
