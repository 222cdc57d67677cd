package store

import (
	"context"

	"github.com/agentapi/agentapi/internal/domain"
)

// ReadKeyByPrefix reads the key from the database, bypassing the cache.
func (s *Store) ReadKeyByPrefix(ctx context.Context, prefix string) (domain.APIKey, bool, error) {
	return s.readKeyByPrefix(ctx, prefix)
}

// KeyEpoch runs one epoch check, not shared with other callers.
func (s *Store) KeyEpoch(ctx context.Context) (int64, error) { return s.keyEpoch(ctx) }

// keyEpoch reads the current key epoch (see keyCache), bypassing the
// sharing of checks.
func (s *Store) keyEpoch(ctx context.Context) (int64, error) {
	m, err := s.check(ctx)
	return m.epoch, err
}
