package client

import (
	"context"
	"time"
)

// WithSleep replaces the wait between attempts, so tests never wait.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = f }
}

// WithJitter replaces the uniform draw in [0, n) of full jitter.
func WithJitter(f func(n int64) int64) Option { return func(c *Client) { c.jitter = f } }
