package keys

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
)

// LeakActor is who the audit trail says revoked a key reported leaked.
const LeakActor = "GitHub secret scanning"

// leakDetail starts the detail of that event; the report's URL follows.
const leakDetail = "reported leaked at "

// maxLeakURL bounds the URL kept in the audit trail (in characters).
const maxLeakURL = 2000

// Leak is what a leak report found about one token.
type Leak struct {
	// Ours: the token is a credential of ours that exists, active or not.
	Ours bool
	// Revoked: this call revoked it (it was active when read). Two
	// instances handling the same report at once may both say so; the
	// store revokes and audits once.
	Revoked bool
	// Key is the key, when Ours; never its credential.
	Key domain.APIKey
}

// RevokeLeaked revokes the key whose credential is token, reported leaked
// at url, at once and on every instance, as Revoke does; the audit event
// says "revoked: reported leaked at URL", by LeakActor. A token that is not
// a credential of ours (malformed, bad checksum, unknown prefix, or a
// secret that does not match the stored hash) is not ours and changes
// nothing. Reporting a revoked key again changes nothing either.
func (s *Service) RevokeLeaked(ctx context.Context, token, url string) (Leak, error) {
	cred, err := credential.Parse(token)
	if err != nil {
		return Leak{}, nil
	}
	// The key as it stands after this call began (the key cache checks
	// the key epoch first), as authentication reads it.
	k, _, err := s.store.ReadKeyByPrefix(ctx, cred.Prefix)
	if errors.Is(err, domain.ErrNotFound) {
		credential.Equal(credential.DummyHash[:], token) // as authentication does
		return Leak{}, nil
	}
	if err != nil {
		return Leak{}, fmt.Errorf("key by prefix: %w", err)
	}
	if !credential.Equal(k.Hash, token) {
		return Leak{}, nil
	}
	k.Hash = nil
	if k.RevokedAt != nil {
		return Leak{Ours: true, Key: k}, nil
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	ev := domain.AuditEvent{
		ID: domain.NewID(domain.PrefixEvent, now), AccountID: k.AccountID, KeyID: k.ID,
		Action: domain.AuditRevoked, Actor: LeakActor, Detail: leakDetail + cleanURL(url), CreatedAt: now,
	}
	source := map[string]string{"type": "github_secret_scanning", "url": cleanURL(url)}
	if err := s.store.RevokeLeakedKey(ctx, k.AccountID, k.ID, now, source, ev); err != nil {
		return Leak{}, fmt.Errorf("revoke key: %w", err)
	}
	k.RevokedAt = &now
	return Leak{Ours: true, Revoked: true, Key: k}, nil
}

// cleanURL is a reported URL as the audit trail keeps it: valid UTF-8,
// no control characters (the store refuses NUL; a log or terminal must not
// be steered by it), at most maxLeakURL characters.
func cleanURL(u string) string {
	u = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(u, "\uFFFD"))
	if utf8.RuneCountInString(u) > maxLeakURL {
		u = string([]rune(u)[:maxLeakURL]) + "…"
	}
	if u == "" {
		return "(no URL given)"
	}
	return u
}

// LeakedRevocation is a key revoked as leaked: the event and where.
type LeakedRevocation struct {
	Event domain.AuditEvent
	URL   string
}

// maxLeakedShown bounds what RecentLeaks returns.
const maxLeakedShown = 20

// RecentLeaks returns the account's keys revoked as leaked since `since`,
// newest first, at most 20: what the console's banner names.
func (s *Service) RecentLeaks(ctx context.Context, accountID string, since time.Time) ([]LeakedRevocation, error) {
	evs, err := s.store.ListAuditEventsByActor(ctx, accountID, domain.AuditRevoked, LeakActor, since, maxLeakedShown)
	if err != nil {
		return nil, fmt.Errorf("leaked keys: %w", err)
	}
	out := make([]LeakedRevocation, 0, len(evs))
	for _, ev := range evs {
		out = append(out, LeakedRevocation{Event: ev, URL: strings.TrimPrefix(ev.Detail, leakDetail)})
	}
	return out, nil
}
