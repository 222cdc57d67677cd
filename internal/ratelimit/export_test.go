package ratelimit

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Get reads the mirror; ok is false when Redis holds none.
func (m *Mirror) Get(ctx context.Context) (epoch int64, ok bool, err error) {
	v, err := m.client.Get(ctx, m.key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}
