package store

import "context"

// ReadKeyByPrefix is KeyByPrefix without the cache, for comparisons.
func (s *Store) ReadKeyByPrefix(ctx context.Context, prefix string) error {
	_, _, err := s.readKeyByPrefix(ctx, prefix)
	return err
}

// KeyEpoch runs one epoch check, not shared with other callers.
func (s *Store) KeyEpoch(ctx context.Context) (int64, error) { return s.keyEpoch(ctx) }
