package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// expiryNotice is one of the time-based key events: its kind (the
// key_notices row that makes it once), its type, how long before
// expires_at it falls due, and what its details say.
type expiryNotice struct {
	kind   string
	typ    domain.EventType
	before time.Duration
	label  string
}

// expiryNotices are checked nearest first: a key found within a day of its
// end gets the 1-day reminder and not the 7-day one too.
var expiryNotices = []expiryNotice{
	{kind: "expired", typ: domain.EventKeyExpired, before: 0, label: ""},
	{kind: "expiring_1d", typ: domain.EventKeyExpiring, before: 24 * time.Hour, label: "1d"},
	{kind: "expiring_7d", typ: domain.EventKeyExpiring, before: 7 * 24 * time.Hour, label: "7d"},
}

// SweepKeyExpiry writes the api_key.expiring (7 days and 1 day before
// expires_at) and api_key.expired events due at now, for at most batch
// keys, each exactly once however many instances sweep (key_notices'
// primary key); it reports how many events it wrote. A revoked key gets
// none.
func (s *Store) SweepKeyExpiry(ctx context.Context, now time.Time, batch int) (int, error) {
	written := 0
	for i, n := range expiryNotices {
		ids, err := s.keysDue(ctx, n, now, batch)
		if err != nil {
			return written, err
		}
		for _, id := range ids {
			ok, err := s.noticeKey(ctx, id, expiryNotices[i:], now)
			if err != nil {
				return written, err
			}
			if ok {
				written++
			}
		}
	}
	return written, nil
}

// keysDue lists unrevoked keys whose notice n is due at now and not yet
// written.
func (s *Store) keysDue(ctx context.Context, n expiryNotice, now time.Time, batch int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT k.id FROM api_keys k
		WHERE k.expires_at IS NOT NULL AND k.expires_at <= $1 AND k.revoked_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM key_notices n WHERE n.key_id = k.id AND n.kind = $2)
		ORDER BY k.expires_at LIMIT $3`, toMS(now.Add(n.before)), n.kind, batch)
	return collect("list keys due a notice", rows, err, func(r *sql.Rows) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
}

// noticeKey claims notices[0] for the key and, when this call made the
// claim, records its event; the notices after it (further from the key's
// end) are claimed too, without events: they are past.
func (s *Store) noticeKey(ctx context.Context, keyID string, notices []expiryNotice, now time.Time) (bool, error) {
	wrote := false
	err := s.inTx(ctx, func(tx *Tx) error {
		wrote = false
		for i, n := range notices {
			res, err := tx.ExecContext(ctx, `INSERT INTO key_notices (key_id, kind, created_at) VALUES ($1, $2, $3)
				ON CONFLICT (key_id, kind) DO NOTHING`, keyID, n.kind, toMS(now))
			if err != nil {
				return fmt.Errorf("claim key notice: %w", err)
			}
			if i > 0 {
				continue
			}
			if got, err := res.RowsAffected(); err != nil || got == 0 {
				return err // another instance wrote it
			}
			if err := s.recordNotice(ctx, tx, keyID, n); err != nil {
				return err
			}
			wrote = true
		}
		return nil
	})
	return wrote, err
}

func (s *Store) recordNotice(ctx context.Context, tx *Tx, keyID string, n expiryNotice) error {
	k, err := scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys k WHERE k.id = $1`, keyID))
	if err != nil {
		return rowErr("get key", err)
	}
	if k.RevokedAt != nil {
		return nil
	}
	var extra any
	if n.label != "" {
		extra = map[string]any{"details": map[string]string{"expires_in": n.label}}
	}
	return tx.recordKey(ctx, k, n.typ, nil, extra, nil, &domain.EventActor{Type: "system", ID: "sweep"})
}
