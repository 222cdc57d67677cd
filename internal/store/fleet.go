package store

import (
	"context"
	"fmt"
)

// fleetMirrorClaim names the row in claims that serve --redis writes: the
// instances on this database keep the key epoch's mirror in Redis, so a
// key-affecting operator command must raise it too (cmd/agentapi).
const fleetMirrorClaim = "fleet:key-epoch-mirror"

// MarkKeyEpochMirrored records that instances on this database keep the
// key epoch's mirror in Redis. It is never undone.
func (s *Store) MarkKeyEpochMirrored(ctx context.Context) error {
	_, err := s.Claim(ctx, fleetMirrorClaim)
	return err
}

// KeyEpochMirrored reports whether MarkKeyEpochMirrored ever ran on this
// database.
func (s *Store) KeyEpochMirrored(ctx context.Context) (bool, error) {
	var claimed bool
	err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM claims WHERE name = $1)`, fleetMirrorClaim).Scan(&claimed)
	if err != nil {
		return false, fmt.Errorf("read fleet mirror claim: %w", err)
	}
	return claimed, nil
}
