package ratelimit

import "github.com/redis/go-redis/v9"

// ClientOptions reads a redis:// (or rediss://) URL into the options of the
// client the limiter is to use.
//
// The limiter gives each round trip its own deadline (250 ms); go-redis
// obeys a context's deadline only with ContextTimeoutEnabled, and without it
// waits out its own read time-out (5 s) on a Redis that stops answering
// without an error (a stopped process, a hung host): every instance would
// hold its requests that long before falling back. With it, connecting,
// the connection's set-up and each script call all end at the limiter's
// deadline.
//
// The protocol is RESP2 unless the URL asks (?protocol=3): the limiter uses
// no RESP3 feature, and with RESP3 go-redis looks for push notifications on
// every use of a connection.
func ClientOptions(rawURL string) (*redis.Options, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.Protocol == 0 {
		opts.Protocol = 2
	}
	opts.ContextTimeoutEnabled = true
	return opts, nil
}
