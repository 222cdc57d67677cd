package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

const usage = `agentapi: the agentapi service and its operator tooling

Usage:
  agentapi serve [--addr ADDR] [--db DB] [--redis URL] [flags]
  agentapi account create --name NAME
  agentapi account deactivate ID | account activate ID
  agentapi account feature (--enable|--disable) ai-answers ID
  agentapi user create --account ID --email EMAIL --role owner|admin|agent   (password on stdin)
  agentapi key create --account ID --as EMAIL --name NAME [--description TEXT]
                      (--preset NAME | --scopes a,b) [--agents ID,ID] [--expires-at RFC3339]
                      [--rate-limit N] [--env live|test] [--json]
  agentapi key revoke --account ID --as EMAIL KEY_ID
  agentapi key set-rate-limit KEY_ID N
  agentapi key list --account ID

  agentapi api me
  agentapi api agents list [--limit N] [--updated-since RFC3339]
  agentapi api agents get|enable|disable|stats ID
  agentapi api agents create --name NAME [--instructions TEXT] [--adopt-existing]
  agentapi api agents update ID [--name NAME] [--instructions TEXT]
  agentapi api ask AGENT_ID [--conversation ID] QUESTION      (QUESTION "-" reads stdin)

The api commands call a running service as an API user: the key comes from
$AGENTAPI_KEY (never a flag), the service from --url or $AGENTAPI_URL
(default http://127.0.0.1:8080/v1).
The operator commands take --db: a postgres:// URL selects PostgreSQL, anything else
is a SQLite file (default agentapi.db, or $AGENTAPI_DB).
Run "agentapi COMMAND -h" for a command's flags.
`

// errUsage marks a command line that could not be understood (exit 2).
var errUsage = errors.New("usage")

// env is the process environment, passed in so tests can set it.
type env struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// run is the whole program; main only wires it to the process. It returns
// the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	err := dispatch(ctx, e, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		if msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": "); msg != errUsage.Error() {
			fmt.Fprintf(stderr, "agentapi: %s\n", msg)
		}
		return 2
	}
	fmt.Fprintf(stderr, "agentapi: %s\n", oneLine(err))
	return 1
}

// oneLine is the reason printed for a failed command: a contract error's
// message, or the error text, on one line.
func oneLine(err error) string {
	var de *domain.Error
	msg := err.Error()
	if errors.As(err, &de) {
		msg = de.Message
	}
	return strings.Join(strings.Fields(msg), " ")
}

func dispatch(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "serve":
		return serve(ctx, e, rest)
	case "account":
		return accountCmd(ctx, e, rest)
	case "user":
		return userCmd(ctx, e, rest)
	case "key":
		return keyCmd(ctx, e, rest)
	case "api":
		return apiCmd(ctx, e, rest)
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
		return nil
	}
	fmt.Fprint(e.stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, sub)
}

// flags returns a flag set that reports errors instead of exiting, with the
// --db flag every command has.
func (e env) flags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("agentapi "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	db := fs.String("db", e.or("AGENTAPI_DB", "agentapi.db"), "database: a postgres:// URL or a SQLite file path (env AGENTAPI_DB)")
	return fs, db
}

func (e env) or(name, def string) string {
	if v := e.getenv(name); v != "" {
		return v
	}
	return def
}

// parse parses flags and checks the number of positional arguments.
func parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", errUsage, oneLine(err))
	}
	if fs.NArg() != len(positional) {
		want := "no arguments"
		if len(positional) > 0 {
			want = strings.Join(positional, " ")
		}
		return nil, fmt.Errorf("%w: %s expects %s after its flags (flags come first)", errUsage, fs.Name(), want)
	}
	return fs.Args(), nil
}

func required(fs *flag.FlagSet, names ...string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, n := range names {
		if !set[n] {
			return fmt.Errorf("%w: %s needs --%s", errUsage, fs.Name(), n)
		}
	}
	return nil
}

func openStore(ctx context.Context, dsn string) (*store.Store, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}
