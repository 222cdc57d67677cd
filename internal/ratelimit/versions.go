package ratelimit

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Versions names, per account, the version of what the account's agent
// list holds, kept in Redis (docs/production.md, "Agent lists from
// memory"). A writer that changed an account's agents sets a new version
// after the commit and before it answers; an instance reads the version in
// the request's rate-limit decision (AllowAt's watch) and answers a page
// from memory only when it read that page under the same version, less
// than agents.ListStaleBound ago: the bound on a stale page when a writer
// could not set the version (Redis away) or Redis went back to an older
// copy.
//
// A version is a fresh random number, never a counter: a Redis that lost
// its data, or went back to an older copy, and counted up again could
// otherwise bring back a version under which an instance holds a page read
// before a change. An absent version is a version too (-1): a page read
// under it is served only while it stays absent.
type Versions struct {
	client redis.UniversalClient
	prefix string
	log    *slog.Logger
	// timeout bounds one bump (RaiseTimeout, as the key epoch's raise);
	// tests shorten it.
	timeout time.Duration
	failed  atomic.Int64
}

// versionTTL lets an account's version expire when nothing changed it
// for a day: an absent version is as good as any (Versions), and Redis
// keeps one key per account that writes, not one per account ever seen.
const versionTTL = 24 * time.Hour

// NewVersions returns the versions of the store identified by storeID
// (as MirrorKey's) on client; log receives bumps that failed (nil:
// discarded).
func NewVersions(client redis.UniversalClient, storeID []byte, log *slog.Logger) *Versions {
	return &Versions{client: client, prefix: "agentapi:agents-version:" + storeTag(storeID) + ":",
		log: cmp.Or(log, slog.New(slog.DiscardHandler)), timeout: RaiseTimeout}
}

// Key is the Redis key holding account's version: what AllowAt watches.
func (v *Versions) Key(account string) string { return v.prefix + account }

// AgentsChanged sets a new version for account, within RaiseTimeout
// whatever ctx allows (the change it reports is committed). A failure is
// logged and counted; pages then stay servable for at most agents.ListStaleBound.
func (v *Versions) AgentsChanged(ctx context.Context, account string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.timeout)
	defer cancel()
	if err := v.client.Set(ctx, v.Key(account), newVersion(), versionTTL).Err(); err != nil {
		v.failed.Add(1)
		v.log.Warn("agent list version: set failed; pages held in memory expire within a second", "err", err)
		return fmt.Errorf("set the agent list version in Redis: %w", err)
	}
	return nil
}

// Failures counts the bumps that failed since v was made.
func (v *Versions) Failures() int64 { return v.failed.Load() }

// newVersion is a random version in [0, 2⁴⁸): exact as a number in the
// decision script (Lua's numbers are doubles), never -1 (absent), and
// with 2⁻⁴⁸ odds of meeting any one earlier version again.
func newVersion() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return int64(binary.LittleEndian.Uint64(b[:]) >> 16)
}
