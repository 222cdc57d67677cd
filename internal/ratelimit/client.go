package ratelimit

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

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

// IsClusterURL reports whether rawURL names a Redis Cluster (or Valkey
// cluster): redis+cluster://host:port,host:port (rediss+cluster:// for TLS).
func IsClusterURL(rawURL string) bool {
	return strings.HasPrefix(rawURL, "redis+cluster://") || strings.HasPrefix(rawURL, "rediss+cluster://")
}

// ClusterOptions reads a redis+cluster://[user:password@]host:port,host:port[?…]
// URL (rediss+cluster:// for TLS) into the options of a cluster client:
// the addresses are where it starts; it learns the others, and follows
// MOVED, ASK and failovers, on its own. As ClientOptions, deadlines come
// from each call's context and the protocol is RESP2 unless asked.
func ClusterOptions(rawURL string) (*redis.ClusterOptions, error) {
	scheme, rest, ok := strings.Cut(rawURL, "+cluster://")
	if !ok || (scheme != "redis" && scheme != "rediss") {
		return nil, fmt.Errorf("not a redis+cluster:// URL")
	}
	userinfo, hosts := "", rest
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		userinfo, hosts = rest[:at+1], rest[at+1:]
	}
	query := ""
	if q := strings.IndexAny(hosts, "/?"); q >= 0 {
		hosts, query = hosts[:q], hosts[q:]
	}
	addrs := strings.Split(hosts, ",")
	if hosts == "" || slices.Contains(addrs, "") {
		return nil, fmt.Errorf("redis+cluster:// URL names no host, or an empty one")
	}
	q, err := url.ParseQuery(strings.TrimPrefix(strings.TrimPrefix(query, "/"), "?"))
	if err != nil {
		return nil, err
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	opts, err := redis.ParseClusterURL(scheme + "://" + userinfo + addrs[0] + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	if opts.Protocol == 0 {
		opts.Protocol = 2
	}
	opts.ContextTimeoutEnabled = true
	if opts.DialerRetries == 0 {
		// A primary that is down refuses at once: one dial, not five
		// 100 ms apart, so its accounts fall back within the limiter's
		// 250 ms rather than after it.
		opts.DialerRetries = 1
	}
	return opts, nil
}

// NewClient returns a client for rawURL: a cluster client for a
// redis+cluster:// URL (ClusterOptions), else a client of one server
// (ClientOptions).
func NewClient(rawURL string) (redis.UniversalClient, error) {
	if IsClusterURL(rawURL) {
		opts, err := ClusterOptions(rawURL)
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(opts), nil
	}
	opts, err := ClientOptions(rawURL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}
