package store

import (
	"context"
)

// LegacyBump raises the key epoch as a writer of 1.2 does, recording no
// account (a rolling upgrade).
func (s *Store) LegacyBump(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, `UPDATE key_epoch SET epoch = epoch + 1 WHERE id = 1`)
	return err
}
