// Command agentapi runs the agentapi service (serve) and the operator
// tooling that support and scripts use (account, user, key).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		// A command whose reader went away (`agentapi key create … | head -c0`)
		// gets an error from its write instead of dying of SIGPIPE: it can
		// then say so and undo what nobody received (key create revokes
		// the key).
		signal.Ignore(syscall.SIGPIPE)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
