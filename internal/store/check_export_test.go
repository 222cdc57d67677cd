package store

import (
	"context"
)

// KeyEpoch runs one epoch check, not shared with other callers.
func (s *Store) KeyEpoch(ctx context.Context) (int64, error) { return s.keyEpoch(ctx) }

// keyEpoch reads the current key epoch (see Check), bypassing the
// sharing of checks.
func (s *Store) keyEpoch(ctx context.Context) (int64, error) {
	m, err := s.check(ctx)
	return m.Epoch, err
}

// LegacyBump raises the key epoch as a writer of 1.2 does, recording no
// account (a rolling upgrade).
func (s *Store) LegacyBump(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, `UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1`)
	return err
}
