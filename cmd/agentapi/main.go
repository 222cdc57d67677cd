// Command agentapi runs the agentapi service (serve) and the operator
// tooling that support and scripts use (account, user, key).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		// A command whose reader went away (`agentapi key create … | head -c0`)
		// gets an error from its write instead of dying of SIGPIPE: it can
		// then say so and undo what nobody received (key create revokes
		// the key).
		signal.Ignore(syscall.SIGPIPE)
	}
	// go-redis prints its own lines to stderr (a failed dial, once per
	// try), where a command prints exactly one; serve --redis sends them to
	// its JSON log instead (openLimiter).
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietRedis is go-redis's logger until serve replaces it: it drops every line.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
