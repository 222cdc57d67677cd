package ratelimit

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mirror is the copy of the store's key epoch kept in Redis
// (docs/production.md, "One Redis round trip per request"). Writers raise
// it after committing a change that bumped the epoch; the decision script
// (allowScript) compares it with the epoch under which an instance holds
// a key, so that a key held in memory is used only while nothing changed.
// It only ever moves forwards (raiseScript): a writer that raises late
// cannot undo a later writer's raise.
type Mirror struct {
	client redis.UniversalClient
	key    string
	log    *slog.Logger
	// timeout bounds one raise (RaiseTimeout); tests shorten it.
	timeout time.Duration
	// failed counts raises that did not reach Redis (a CLI exits 1 on it).
	failed atomic.Int64
}

// RaiseTimeout bounds a writer's raise; past it the change stays committed
// and the writer says so (StaleBound).
const RaiseTimeout = 2 * time.Second

// StaleBound is how long a key can be accepted after a change whose raise
// failed: every instance repairs the mirror at least this often.
const StaleBound = time.Second

// RepairEvery is how often an instance repairs the mirror (Repair), well
// within StaleBound.
const RepairEvery = StaleBound / 2

// MirrorKey names the mirror of the store identified by storeID (bytes
// that every instance sharing the database reads alike, such as a server
// secret): databases sharing one Redis never share a mirror.
func MirrorKey(storeID []byte) string { return "agentapi:key-epoch:" + storeTag(storeID) }

func storeTag(storeID []byte) string { return hex.EncodeToString(storeID[:min(len(storeID), 8)]) }

// NewMirror returns the mirror named key (MirrorKey) on client; log
// receives raises that failed (nil: discarded).
func NewMirror(client redis.UniversalClient, key string, log *slog.Logger) *Mirror {
	return &Mirror{client: client, key: key, log: cmp.Or(log, slog.New(slog.DiscardHandler)), timeout: RaiseTimeout}
}

// Key is the mirror's Redis key.
func (m *Mirror) Key() string { return m.key }

// raiseScript sets KEYS[1] to ARGV[1] unless it already holds as much or
// more, and returns what it then holds.
var raiseScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1') or -1
if n > cur then
  redis.call('SET', KEYS[1], n)
  return n
end
return cur
`)

// RaiseEpoch raises the mirror to epoch (set only if greater), within
// RaiseTimeout whatever ctx allows: a writer whose caller went away after
// the commit still raises. A failure is logged and counted (Failures).
func (m *Mirror) RaiseEpoch(ctx context.Context, epoch int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout)
	defer cancel()
	err := raiseScript.Run(ctx, m.client, []string{m.key}, epoch).Err()
	if err != nil {
		m.failed.Add(1)
		m.log.Warn("key epoch mirror: raise failed; instances repair it within a second", "epoch", epoch, "err", err)
		return fmt.Errorf("raise the key epoch mirror in Redis: %w", err)
	}
	return nil
}

// Failures counts the raises that failed since the mirror was made.
func (m *Mirror) Failures() int64 { return m.failed.Load() }

// Repair raises the mirror to what current returns (the store's epoch)
// every RepairEvery until ctx ends: a writer that could not raise it, or a
// Redis that lost it or went back to an older copy, is set right within
// StaleBound. Failures are logged once per outage.
func (m *Mirror) Repair(ctx context.Context, current func(context.Context) (int64, error)) {
	t := time.NewTicker(RepairEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := m.repairOnce(ctx, current)
		if err != nil && !failing {
			m.log.Warn("key epoch mirror: repair failed", "err", err)
		}
		failing = err != nil
	}
}

func (m *Mirror) repairOnce(ctx context.Context, current func(context.Context) (int64, error)) error {
	cctx, cancel := context.WithTimeout(ctx, RepairEvery)
	defer cancel()
	epoch, err := current(cctx)
	if err != nil {
		return fmt.Errorf("read the store's key epoch: %w", err)
	}
	return raiseScript.Run(cctx, m.client, []string{m.key}, epoch).Err()
}

// MirrorSecret is the name of the server secret (store.Secret) whose bytes
// name a database's mirror (MirrorKey): every instance and operator
// command on that database reads the same.
const MirrorSecret = "key-epoch-mirror"
