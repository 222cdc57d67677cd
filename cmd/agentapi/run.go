package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/store"
)

const usage = `agentapi: the agentapi service and its operator tooling

Usage:
  agentapi serve [--addr ADDR] [--db DB] [--redis URL] [flags]
  agentapi fake-model [--addr ADDR] [--delay D]   (a stand-in model for trying questions)
  agentapi account create --name NAME
  agentapi account list
  agentapi account show ID|NAME
  agentapi account rename ID|NAME NEW_NAME
  agentapi account activate|deactivate ID
  agentapi account feature (--enable|--disable) ai-answers ID
  agentapi user create --account ID --email EMAIL --role owner|admin|agent   (password on stdin)
  agentapi user reset-password --account ID --email EMAIL   (prints a one-time password)
  agentapi user list --account ID
  agentapi key create --account ID --as EMAIL --name NAME [--description TEXT]
                      (--preset NAME | --scopes a,b) [--agents ID,ID] [--expires-at RFC3339]
                      [--allowed-ips IP,CIDR] [--rate-limit N] [--env live|test] [--json]
  agentapi key revoke --account ID --as EMAIL KEY_ID
  agentapi key set-rate-limit KEY_ID N
  agentapi key list --account ID
  agentapi key show KEY_ID                                    (everything but the secret)

  agentapi api me
  agentapi api agents list [--limit N] [--next CURSOR | --all] [--updated-since RFC3339]
  agentapi api agents get|enable|disable|stats ID
  agentapi api agents create --name NAME [--instructions TEXT] [--adopt-existing]
  agentapi api agents update ID [--name NAME] [--instructions TEXT]
  agentapi api ask AGENT_ID [--conversation ID] [--stream] QUESTION   (QUESTION "-" reads stdin)
  agentapi api events list [--type T,T] [--since RFC3339] [--limit N] [--next CURSOR | --all]
  agentapi api events get ID
  agentapi api webhooks list
  agentapi api webhooks create URL --events T,T [--description TEXT]   (prints the secret once)
  agentapi api webhooks get|delete|test ID
  agentapi api webhooks rotate-secret ID [--overlap 24h]
  agentapi api webhooks deliveries ID [--status succeeded|failed] [--event EVENT_ID] [--limit N] [--next CURSOR]
  agentapi api webhooks resend ID EVENT_ID

  agentapi version                                            (the build's version)

Commands that print what they read (list, show, the api commands) print a
table when stdout is a terminal and JSON otherwise, one object a line;
--json or --table chooses.
The api commands call a running service as an API user: the key comes from
$AGENTAPI_KEY (never a flag), the service from --url or $AGENTAPI_URL
(default http://127.0.0.1:8080/v1).
The operator commands take --db: a postgres:// URL selects PostgreSQL, anything else
is a SQLite file (default agentapi.db, or $AGENTAPI_DB). Those that change keys
(revoke, set-rate-limit, account activate/deactivate) need --redis URL (or
$AGENTAPI_REDIS_URL) where serve runs with --redis, or --no-redis.
Run "agentapi COMMAND -h" for a command's flags. Exit status: 0 done, 1 failed,
2 a command line that could not be understood (one line says which flag).
`

// defaultDB is --db when neither the flag nor AGENTAPI_DB gives one.
const defaultDB = "agentapi.db"

// errUsage marks a command line that could not be understood (exit 2).
var errUsage = errors.New("usage")

// env is the process environment, passed in so tests can set it.
type env struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	op             *operator // --redis of operator commands (operator.go)
}

// run is the whole program; main only wires it to the process. It returns
// the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, op: &operator{}}
	err := e.op.finish(commandTree().dispatch(ctx, e, "agentapi", args))
	// Every line is redacted as logs are (credential.RedactText): support
	// pastes a credential where a key id belongs, the command echoes what
	// it could not find, and scripts' stderr ends up in logs.
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		printUsageError(stderr, err)
		return 2
	}
	fmt.Fprintf(stderr, "agentapi: %s\n", credential.RedactText(oneLine(err)))
	return 1
}

// usageError is a command line that a command (path, such as "agentapi key
// create") could not understand: run prints it as one line that names the
// command and where its help is (docs/operator-cli.md, Reference).
type usageError struct {
	path string
	err  error
}

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// printUsageError prints err, a usage error, on one line of w:
// `agentapi: key create: --rate-limit must be …; see "agentapi key create --help"`.
func printUsageError(w io.Writer, err error) {
	msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
	if msg == errUsage.Error() {
		return
	}
	msg = credential.RedactText(strings.Join(strings.Fields(msg), " "))
	var ue usageError
	if !errors.As(err, &ue) {
		fmt.Fprintf(w, "agentapi: %s\n", msg)
		return
	}
	fmt.Fprintf(w, "agentapi: %s: %s; see \"%s --help\"\n", strings.TrimPrefix(ue.path, "agentapi "), msg, ue.path)
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

// flags returns a flag set for an operator command (newFlagSet), with the
// --db flag every one of them has, and --redis (operator.go).
func (e env) flags(name string) (*flag.FlagSet, *string) {
	fs := e.newFlagSet("agentapi " + name)
	db := fs.String("db", cmp.Or(e.getenv("AGENTAPI_DB"), defaultDB), "database: a postgres:// URL or a SQLite file path (env AGENTAPI_DB)")
	if name != "serve" && e.op != nil {
		e.op.redisURL = fs.String("redis", e.getenv("AGENTAPI_REDIS_URL"),
			"redis:// URL of the Redis the instances share; writes raise the key epoch's mirror there (env AGENTAPI_REDIS_URL)")
		e.op.noRedis = fs.Bool("no-redis", false, "change keys of a database whose instances run with --redis without raising the mirror: they may accept a key as it was for up to "+fresh.StaleBound.String())
	}
	return fs, db
}

// newFlagSet returns a flag set that prints nothing while it parses and
// never exits: a bad command line comes back from parseFlags as one line
// (scripts read stderr), and -h prints the usage and flags to stdout.
func (e env) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(helpOutput{e.stdout})
	fs.Usage = func() {}
	return fs
}

// helpOutput is a flag set's output while it parses: the flag package
// writes its errors and usage there, which are dropped; parseFlags prints
// the usage itself, to w, when -h asked for it.
type helpOutput struct{ w io.Writer }

func (helpOutput) Write(p []byte) (int, error) { return len(p), nil }

// parseFlags runs parse, which parses fs (once, or in steps), refusing a
// flag given twice (a script that sets --rate-limit twice means one of the
// two), and --json with --table. Its error is flag.ErrHelp, after the
// usage was printed, or errUsage with a one-line reason that names the flag
// and what it takes.
func parseFlags(fs *flag.FlagSet, parse func() error) error {
	values := map[string]flag.Value{}
	wrapped := map[string]*onceValue{}
	fs.VisitAll(func(f *flag.Flag) {
		values[f.Name] = f.Value
		wrapped[f.Name] = &onceValue{Value: f.Value, name: f.Name}
		f.Value = wrapped[f.Name]
	})
	err := parse()
	fs.VisitAll(func(f *flag.Flag) { f.Value = values[f.Name] })
	switch {
	case err == nil:
		if given(fs, "json") && given(fs, "table") {
			return fmt.Errorf("%w: give --json or --table, not both", errUsage)
		}
		return nil
	case errors.Is(err, flag.ErrHelp):
		if h, ok := fs.Output().(helpOutput); ok {
			fs.SetOutput(h.w)
			fmt.Fprint(h.w, usageOf(fs.Name()), "\nFlags:\n")
			fs.PrintDefaults()
			fs.SetOutput(h)
		}
		return err
	}
	for _, o := range wrapped {
		if o.problem != "" {
			return fmt.Errorf("%w: %s", errUsage, o.problem)
		}
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return fmt.Errorf(`%w: there is no flag --%s%s`, errUsage, name, didYouMean(name, names, "--"))
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag needs an argument: -"); ok {
		if f := fs.Lookup(name); f != nil {
			return fmt.Errorf("%w: --%s needs a value: %s", errUsage, name, acceptedForm(f))
		}
	}
	return fmt.Errorf("%w: %s", errUsage, oneLine(err))
}

// onceValue is a flag's value that may be set once per command line. It
// keeps the problem with a value it refused, in words: the flag package's
// own ("invalid value "ten" for flag -rate-limit: parse error") says
// neither what the flag takes nor that flags are written with "--".
type onceValue struct {
	flag.Value
	name    string
	set     bool
	problem string
}

func (o *onceValue) Set(s string) error {
	if o.set {
		o.problem = fmt.Sprintf("--%s is given more than once; give it once", o.name)
		return errors.New(o.problem)
	}
	o.set = true
	if err := o.Value.Set(s); err != nil {
		o.problem = badValueText(o.name, acceptedForm(&flag.Flag{Name: o.name, Value: o.Value}), s)
		return err
	}
	return nil
}

// IsBoolFlag keeps a boolean flag boolean (--json, not --json=true).
func (o *onceValue) IsBoolFlag() bool {
	b, ok := o.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagForms says what a flag takes where its type alone does not.
var flagForms = map[string]string{
	"rate-limit": fmt.Sprintf("a whole number of requests a minute, 1 to %d", domain.MaxRateLimitPerMinute),
	"limit":      "a whole number of items a page, 1 to 100",
	"overlap":    "a duration from 0 to 168h in whole seconds, such as 1h or 90m",
}

// acceptedForm is what flag f takes, in words.
func acceptedForm(f *flag.Flag) string {
	if form, ok := flagForms[f.Name]; ok {
		return form
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return "true or false (or the flag alone, for true)"
		case int, int64, uint, uint64:
			return "a whole number"
		case float64:
			return "a number"
		case time.Duration:
			return "a duration such as 500ms, 30s or 5m"
		}
	}
	return f.Usage
}

// badValue is the usage error for a value of flag name that is not what
// it takes.
func badValue(name, got string) error {
	return fmt.Errorf("%w: %s", errUsage, badValueText(name, flagForms[name], got))
}

func badValueText(name, form, got string) string {
	return fmt.Sprintf("--%s must be %s (got %q)", name, form, got)
}

// parse parses flags, then checks the command line against want
// (checkArgs). Flags come first: one after the arguments is named.
func parse(fs *flag.FlagSet, args []string, want ...string) ([]string, error) {
	if err := parseFlags(fs, func() error { return fs.Parse(args) }); err != nil {
		return nil, err
	}
	if err := checkArgs(fs, fs.Args(), want, true); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}

// checkArgs checks a parsed command line against want: the names of its
// positional arguments got (exactly as many, or at least as many when the
// last ends in "..."), then, starting with "--", the flags it needs. With
// flagsFirst, a flag of fs among got was written after an argument.
func checkArgs(fs *flag.FlagSet, got, want []string, flagsFirst bool) error {
	var positional []string
	for _, w := range want {
		if !strings.HasPrefix(w, "--") {
			positional = append(positional, w)
		}
	}
	n := len(positional)
	if len(got) != n && !(n > 0 && strings.HasSuffix(positional[n-1], "...") && len(got) >= n) {
		if late := lateFlag(fs, got, flagsFirst); late != "" {
			return fmt.Errorf("%w: --%s comes after an argument; flags come first (%s --%s … %s)", errUsage, late, fs.Name(), late, strings.Join(positional, " "))
		}
		expects := cmp.Or(strings.Join(positional, " "), "no arguments")
		return fmt.Errorf("%w: expects %s, got %s", errUsage, expects, countArgs(got))
	}
	for _, w := range want {
		if name, ok := strings.CutPrefix(w, "--"); ok && !given(fs, name) {
			return fmt.Errorf("%w: needs --%s: %s", errUsage, name, fs.Lookup(name).Usage)
		}
	}
	return nil
}

// lateFlag is the name of the first flag of fs in got, when flags come
// first; "" when there is none.
func lateFlag(fs *flag.FlagSet, got []string, flagsFirst bool) string {
	if !flagsFirst {
		return ""
	}
	for _, arg := range got {
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if fs.Lookup(name) != nil {
			return name
		}
	}
	return ""
}

// countArgs says how many arguments got holds, quoting them.
func countArgs(got []string) string {
	if len(got) == 0 {
		return "none"
	}
	quoted := make([]string, len(got))
	for i, g := range got {
		quoted[i] = strconv.Quote(g)
	}
	return strings.Join(quoted, " ")
}

// openExisting opens the database of an operator command that works on
// what is there: a SQLite file that does not exist is refused, naming it,
// rather than created empty (a mistyped or pasted --db would otherwise
// "succeed" against a new database). Only serve and account create may
// create one. It only stats the path: opening, mapping or closing the
// database files is the driver's business (docs/operator-cli.md).
func (e env) openExisting(ctx context.Context, dsn string) (*store.Store, error) {
	if !store.IsPostgres(dsn) { // a SQLite file path
		if _, err := os.Stat(dsn); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database file %q (--db or AGENTAPI_DB); only serve and account create make a new one", dsn)
		} else if err != nil {
			return nil, fmt.Errorf("database file %q: %w", dsn, err)
		}
	}
	st, err := openStore(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := e.op.attach(ctx, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// withStore opens the database db with open (openExisting, openForKeys),
// runs fn on it and closes it.
func withStore(ctx context.Context, open func(context.Context, string) (*store.Store, error), db string, fn func(*store.Store) error) error {
	st, err := open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

// openStore opens (and migrates) dsn. A SQLite file whose directory does
// not exist, a file that is not SQLite and a database of another program
// are each one plain line naming the problem, not the driver's error.
func openStore(ctx context.Context, dsn string) (*store.Store, error) {
	if !store.IsPostgres(dsn) {
		if _, err := os.Stat(filepath.Dir(dsn)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot open %s: its directory does not exist", dsn)
		}
	}
	st, err := store.Open(ctx, dsn)
	switch {
	case errors.Is(err, store.ErrNotSQLite), errors.Is(err, store.ErrNotAgentapi):
		return nil, err // it names the database
	case err != nil:
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}

// nonNil is list, or an empty list for nil: printed as [], not null.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}
