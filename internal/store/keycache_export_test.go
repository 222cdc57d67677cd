package store

import "context"

// KeyEpoch runs one epoch check, not shared with other callers.
func (s *Store) KeyEpoch(ctx context.Context) (int64, error) { return s.keyEpoch(ctx) }
