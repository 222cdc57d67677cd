package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// operator is what an operator command sets up beyond its own flags: the
// Redis of --redis (AGENTAPI_REDIS_URL) and the key epoch's mirror there,
// which every write that bumps the epoch raises after its commit
// (fresh.Tracker), so that instances see a revocation on their very next
// request (docs/operator-cli.md).
type operator struct {
	redisURL *string
	noRedis  *bool
	client   redis.UniversalClient
	fresh    *fresh.Tracker
}

// openForKeys opens the database of a command that changes what a key
// may do. Where serve runs with --redis (store.KeyEpochMirrored), its
// instances hold keys until the mirror in Redis moves: without --redis the
// command is refused (exit 2), unless --no-redis accepts the delay.
func (e env) openForKeys(ctx context.Context, dsn string) (*store.Store, error) {
	st, err := e.openExisting(ctx, dsn)
	if err != nil {
		return nil, err
	}
	o := e.op
	if o == nil || o.client != nil {
		return st, nil
	}
	mirrored, err := st.KeyEpochMirrored(ctx)
	switch {
	case err != nil:
		st.Close()
		return nil, err
	case !mirrored:
		return st, nil
	case *o.noRedis:
		fmt.Fprintf(e.stderr, "agentapi: --no-redis: the instances may accept the key as it was for up to %v\n", fresh.StaleBound)
		return st, nil
	}
	st.Close()
	return nil, fmt.Errorf("%w: this database's instances run with --redis and keep keys until its key epoch mirror moves: give --redis URL (or AGENTAPI_REDIS_URL), or --no-redis to accept that they may accept the key as it was for up to %v", errUsage, fresh.StaleBound)
}

// attach makes st raise the mirror when the command was given --redis.
func (o *operator) attach(ctx context.Context, st *store.Store) error {
	if o == nil || o.redisURL == nil || *o.redisURL == "" {
		return nil
	}
	client, err := ratelimit.NewClient(*o.redisURL)
	if err != nil {
		return fmt.Errorf("%w: --redis is not a redis:// or redis+cluster:// URL", errUsage)
	}
	o.client = client
	o.fresh, err = fresh.Open(ctx, st, client, nil)
	return err
}

// finish closes the Redis client and turns a failed raise into the
// command's error (exit 1): the change is committed all the same.
func (o *operator) finish(err error) error {
	if o == nil || o.client == nil {
		return err
	}
	o.client.Close()
	if o.fresh.RaiseFailures() > 0 {
		return errors.Join(err, fmt.Errorf("the change is saved, but the key epoch mirror in Redis could not be raised within %v: instances may accept the key as it was for up to %v, until their repair raises it",
			fresh.RaiseTimeout, fresh.StaleBound))
	}
	return err
}
