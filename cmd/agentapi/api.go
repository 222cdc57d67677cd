package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// The `agentapi api` commands are for API users, not operators: they call
// a running service over HTTP through the public Go client, with the key
// from AGENTAPI_KEY. There is deliberately no --key flag: a key on the
// command line lands in shell history and in every process listing.

const defaultAPIURL = "http://127.0.0.1:8080/v1"

// apiCommand is one `agentapi api` command line: its flags, with the
// --url and --insecure-http every api command has.
type apiCommand struct {
	e        env
	fs       *flag.FlagSet
	url      *string
	insecure *bool
	out      *output
}

func (e env) apiCommand(name string) *apiCommand {
	fs := e.newFlagSet("agentapi api " + name)
	return &apiCommand{
		e: e, fs: fs,
		url:      fs.String("url", cmp.Or(e.getenv("AGENTAPI_URL"), defaultAPIURL), "API base URL ending in /v1 (env AGENTAPI_URL)"),
		insecure: fs.Bool("insecure-http", false, "allow sending the key over plain http to a host that is not loopback"),
		out:      e.output(fs),
	}
}

// parse reads flags anywhere on the line (`agents update ID --name N` and
// `agents update --name N ID` both work; after "--" everything is
// positional) and checks the line against want (checkArgs). flag stops at
// the first positional argument, which is kept before parsing the rest.
func (a *apiCommand) parse(args []string, want ...string) ([]string, error) {
	if err := refuseKeyFlag(args); err != nil {
		return nil, err
	}
	var pos []string
	err := parseFlags(a.fs, func() error {
		for {
			if err := a.fs.Parse(args); err != nil {
				return err
			}
			rest := a.fs.Args()
			if len(rest) == 0 {
				return nil
			}
			if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
				pos = append(pos, rest...)
				return nil
			}
			pos = append(pos, rest[0])
			args = rest[1:]
		}
	})
	if err != nil {
		return nil, err
	}
	if err := checkArgs(a.fs, pos, want, false); err != nil {
		return nil, err
	}
	return pos, nil
}

// refuseKeyFlag names the flag a user may try for the key (--key,
// --api-key, --token, before any "--"), rather than flag's "not defined".
func refuseKeyFlag(args []string) error {
	for _, arg := range args {
		if arg == "--" {
			return nil
		}
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		if name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "="); name == "key" || name == "api-key" || name == "token" {
			return fmt.Errorf("%w: there is no --%s flag: the key is read only from AGENTAPI_KEY, so that it never lands in shell history", errUsage, name)
		}
	}
	return nil
}

// client builds the API client from the flags and AGENTAPI_KEY.
func (a *apiCommand) client() (*client.Client, error) {
	key := strings.TrimSpace(a.e.getenv("AGENTAPI_KEY"))
	if key == "" {
		return nil, fmt.Errorf("%w: set AGENTAPI_KEY to your API key (agk_…); it is read only from the environment", errUsage)
	}
	opts := []client.Option{
		client.WithUserAgent("agentapi-cli/1"),
		// Bounds a whole request, an answer from a model included (the
		// server gives the model 30 s).
		client.WithHTTPClient(&http.Client{Timeout: 90 * time.Second, Transport: dialHint{http.DefaultTransport, *a.url}}),
	}
	if *a.insecure {
		opts = append(opts, client.WithInsecureHTTP())
	}
	c, err := client.New(*a.url, key, opts...)
	if err != nil {
		// The library names its option; here it is a flag.
		msg := strings.ReplaceAll(strings.TrimPrefix(err.Error(), "client: "), "WithInsecureHTTP", "--insecure-http")
		return nil, fmt.Errorf("%w: %s", errUsage, msg)
	}
	return c, nil
}

// callPrint builds a's client, runs fn with it and prints the object fn
// returns (printOne, with cols), or the line of its error (callErr).
func callPrint[W any](a *apiCommand, fn func(*client.Client) (W, error), cols []column[W]) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	v, err := fn(c)
	if err != nil {
		return callErr(err)
	}
	return printOne(a.out, v, cols)
}

// apiError is the one line printed for a failed API call:
// "<code>: <message>", then the fields at fault, the existing id of a
// duplicate and the request id, which support asks for.
type apiError struct{ e *client.Error }

func (a apiError) Error() string {
	e := a.e
	var b strings.Builder
	b.WriteString(cmp.Or(e.Code, fmt.Sprintf("http_%d", e.StatusCode)) + ": " + e.Message)
	var fields []string
	for _, f := range e.Errors {
		// A field error that repeats the message (a duplicate name) names
		// only its field: the line says it once.
		if f.Message == e.Message {
			fields = append(fields, f.Field)
		} else {
			fields = append(fields, f.Field+": "+f.Message)
		}
	}
	if fields != nil {
		b.WriteString(" (" + strings.Join(fields, "; ") + ")")
	}
	if e.ExistingID != "" {
		b.WriteString(" existing_id=" + e.ExistingID)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " retry_after=%ds", int(e.RetryAfter.Round(time.Second)/time.Second))
	}
	if e.RequestID != "" && !strings.Contains(e.Message, e.RequestID) {
		b.WriteString(" request_id=" + e.RequestID)
	}
	return b.String()
}

// callErr turns a client error into the CLI's line.
func callErr(err error) error {
	var e *client.Error
	var u *unreachableError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &u):
		return u
	case errors.As(err, &e):
		return apiError{e}
	}
	return err
}

// unreachableError is a request that never reached the service: its line
// says where the command looked, and how to point it elsewhere (the
// default address is a guess that serve --addr may have made wrong).
type unreachableError struct{ url, why string }

func (u *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s (%s): is serve running? Set --url or AGENTAPI_URL to its address", u.url, u.why)
}

// dialHint is the api commands' transport: a connection that could not be
// made becomes an unreachableError naming url.
type dialHint struct {
	base http.RoundTripper
	url  string
}

func (d dialHint) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(r)
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" {
		return resp, err
	}
	why := "cannot connect"
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.As(err, &dns):
		why = "unknown host " + dns.Name
	case op.Timeout():
		why = "timed out"
	}
	return nil, &unreachableError{url: d.url, why: why}
}

// The api commands print what the API sent, in its shapes (package wire,
// which the API renders too): timestamps as the server writes them
// (milliseconds, Z), so that they sort as strings, and each object with
// exactly its fields.

// printAll prints every item of a list that --all follows page by page,
// as shape shows it: a table with cols, or a JSON line each.
func printAll[T, W any](a *apiCommand, seq iter.Seq2[T, error], shape func(T) W, cols []column[W]) error {
	return printSeq(a.out, func(yield func(W, error) bool) {
		for v, err := range seq {
			if err != nil {
				yield(*new(W), callErr(err))
				return
			}
			if !yield(shape(v), nil) {
				return
			}
		}
	}, cols)
}

// item is an agent in a list: the contract's four fields.
func item(a client.Agent) wire.AgentItem {
	return wire.AgentItem{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: wire.Time(a.CreatedAt)}
}

// record is a single agent, with every field (empty instructions included).
func record(a client.Agent) wire.Agent {
	return wire.Agent{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: wire.Time(a.CreatedAt),
		Instructions: a.Instructions, UpdatedAt: wire.Time(a.UpdatedAt)}
}

// scopes converts the client's scopes to the wire's, nil kept nil (null).
func scopes(list []string) []domain.Scope {
	if list == nil {
		return nil
	}
	out := make([]domain.Scope, len(list))
	for i, s := range list {
		out[i] = domain.Scope(s)
	}
	return out
}

func stats(s client.Stats) wire.Stats {
	return wire.Stats{AgentID: s.AgentID, QuestionsTotal: s.QuestionsTotal, AnsweredTotal: s.AnsweredTotal,
		FailedTotal: s.FailedTotal, LastQuestionAt: wire.TimePtr(s.LastQuestionAt), AverageAnswerMS: s.AverageAnswerMS,
		ConversationsTotal: s.ConversationsTotal}
}

func apiMe(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("me")
	if _, err := a.parse(args); err != nil {
		return err
	}
	return callPrint(a, func(c *client.Client) (wire.Me, error) {
		k, err := c.Me(ctx)
		return wire.Me{Key: wire.Key{ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix,
			Scopes: scopes(k.Scopes), RateLimitPerMinute: k.RateLimitPerMinute, LastUsedAt: wire.TimePtr(k.LastUsedAt), ExpiresAt: wire.TimePtr(k.ExpiresAt)},
			AllowedIPs: nonNil(k.AllowedIPs)}, err
	}, meColumns)
}

// apiAgentsList prints one page, and on stderr the --next that follows
// it; --all follows every page.
func apiAgentsList(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("agents list")
	limit := a.fs.Int("limit", 0, "page size (1-100; default: the server's, 30)")
	next := a.fs.String("next", "", "the page after the one that printed this cursor")
	all := a.fs.Bool("all", false, "print every page")
	since := a.fs.String("updated-since", "", "only agents changed at or after this RFC 3339 time")
	if _, err := a.parse(args); err != nil {
		return err
	}
	opts := client.ListOptions{Limit: *limit, Next: *next}
	if *limit < 0 || *limit > 100 {
		return badValue("limit", strconv.Itoa(*limit))
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			return fmt.Errorf("%w: --updated-since must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q)", errUsage, *since)
		}
		opts.UpdatedSince = t
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if *all {
		return printAll(a, c.Agents(ctx, opts), item, agentItemColumns)
	}
	p, err := c.ListAgents(ctx, opts)
	if err != nil {
		return callErr(err)
	}
	items := make([]wire.AgentItem, len(p.Agents))
	for i, ag := range p.Agents {
		items[i] = item(ag)
	}
	if err := printList(a.out, items, agentItemColumns); err != nil {
		return err
	}
	if p.HasMore {
		fmt.Fprintf(e.stderr, "agentapi: more agents: --next %s (or --all)\n", p.Next)
	}
	return nil
}

func apiAgentsCreate(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("agents create")
	name := a.fs.String("name", "", "the agent's name (unique in the account)")
	instructions := a.fs.String("instructions", "", "what the agent is told about its job")
	adopt := a.fs.Bool("adopt-existing", false, "if an agent of that name exists, print it instead of failing")
	if _, err := a.parse(args, "--name"); err != nil {
		return err
	}
	return callPrint(a, func(c *client.Client) (wire.Agent, error) {
		ag, err := c.CreateAgent(ctx, client.NewAgent{Name: *name, Instructions: *instructions, AdoptExisting: *adopt})
		return record(ag), err
	}, agentColumns)
}

func apiAgentsUpdate(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("agents update")
	name := a.fs.String("name", "", "new name")
	instructions := a.fs.String("instructions", "", "new instructions (\"\" clears them)")
	pos, err := a.parse(args, "ID")
	if err != nil {
		return err
	}
	var u client.AgentUpdate
	if given(a.fs, "name") {
		u.Name = name
	}
	if given(a.fs, "instructions") {
		u.Instructions = instructions
	}
	if u.Name == nil && u.Instructions == nil {
		return fmt.Errorf("%w: needs --name NAME or --instructions TEXT (or both): what to change", errUsage)
	}
	return callPrint(a, func(c *client.Client) (wire.Agent, error) {
		ag, err := c.UpdateAgent(ctx, pos[0], u)
		return record(ag), err
	}, agentColumns)
}

func apiAsk(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("ask")
	conv := a.fs.String("conversation", "", "continue this conversation (conversation_id of an earlier answer)")
	stream := a.fs.Bool("stream", false, "print the answer's text as the model writes it, then a newline, instead of the answer object")
	pos, err := a.parse(args, "AGENT_ID", "QUESTION...")
	if err != nil {
		return err
	}
	question := strings.Join(pos[1:], " ")
	if question == "-" {
		b, err := io.ReadAll(io.LimitReader(e.stdin, 1<<20))
		if err != nil {
			return fmt.Errorf("read question from stdin: %w", err)
		}
		question = strings.TrimSpace(string(b))
	}
	q := client.Question{Question: question, ConversationID: *conv}
	if *stream {
		c, err := a.client()
		if err != nil {
			return err
		}
		return printStream(e.stdout, c.AskStream(ctx, pos[0], q))
	}
	return callPrint(a, func(c *client.Client) (wire.Answer, error) {
		ans, err := c.Ask(ctx, pos[0], q)
		return wire.Answer{ID: ans.ID, ConversationID: ans.ConversationID, Question: ans.Question,
			Answer: ans.Answer, CreatedAt: wire.Time(ans.CreatedAt), AnswerMS: ans.AnswerMS}, err
	}, answerColumns)
}

// printStream writes each piece of a streamed answer as it arrives (flushed
// when w buffers), then a newline. A failure, before or after the first
// piece, is the command's error, printed like any api command's; text
// already written is ended with its newline first.
func printStream(w io.Writer, events iter.Seq2[client.StreamEvent, error]) error {
	flush := func() error { return nil }
	if f, ok := w.(interface{ Flush() error }); ok {
		flush = f.Flush
	}
	wrote := false
	for ev, err := range events {
		if err != nil {
			if wrote {
				_, _ = io.WriteString(w, "\n")
				_ = flush()
			}
			return callErr(err)
		}
		if ev.Delta == "" {
			continue
		}
		if _, err := io.WriteString(w, ev.Delta); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if err := flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		wrote = true
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return flush()
}
