package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentapi/agentapi/client"
)

// command is one word of a command line: a group holds subcommands, a leaf
// runs with the arguments after its name.
type command struct {
	name string
	run  func(context.Context, env, []string) error
	subs []command
}

// commandTree is every command; usage (run.go) describes them.
func commandTree() command {
	return command{name: "agentapi", subs: []command{
		{name: "serve", run: serve},
		{name: "fake-model", run: fakeModel},
		{name: "version", run: versionCmd},
		{name: "account", subs: []command{
			{name: "create", run: accountCreate},
			{name: "list", run: accountList},
			{name: "show", run: accountShow},
			{name: "rename", run: accountRename},
			{name: "activate", run: accountSetActive("activate")},
			{name: "deactivate", run: accountSetActive("deactivate")},
			{name: "feature", run: accountFeature},
		}},
		{name: "user", subs: []command{
			{name: "create", run: userCreate},
			{name: "reset-password", run: userResetPassword},
			{name: "list", run: userList},
		}},
		{name: "key", subs: []command{
			{name: "create", run: keyCreate},
			{name: "revoke", run: keyRevoke},
			{name: "set-rate-limit", run: keySetRateLimit},
			{name: "list", run: keyList},
			{name: "show", run: keyShow},
		}},
		{name: "api", subs: []command{
			{name: "me", run: apiMe},
			{name: "ask", run: apiAsk},
			{name: "agents", subs: []command{
				{name: "list", run: apiAgentsList},
				{name: "create", run: apiAgentsCreate},
				{name: "update", run: apiAgentsUpdate},
				oneID("agents", "get", (*client.Client).GetAgent, record, agentColumns),
				oneID("agents", "enable", (*client.Client).EnableAgent, record, agentColumns),
				oneID("agents", "disable", (*client.Client).DisableAgent, record, agentColumns),
				oneID("agents", "stats", (*client.Client).AgentStats, stats, statsColumns),
			}},
			eventsCommands(),
			webhooksCommands(),
		}},
	}}
}

// dispatch runs the command args name under c (path is c's own words, as
// typed). "help", -h and --help print the usage of the level they stand at.
func (c command) dispatch(ctx context.Context, e env, path string, args []string) error {
	if c.run != nil {
		if len(args) > 0 && onlyHelp(args) { // "key create help", "key create help help"
			args = []string{"-h"}
		}
		err := c.run(ctx, e, args)
		if errors.Is(err, errUsage) {
			err = usageError{path: path, err: err}
		}
		return err
	}
	if len(args) == 0 {
		return fmt.Errorf(`%w: %s needs a command: %s; "%s help" describes them`, errUsage, path, strings.Join(c.names(), ", "), path)
	}
	if args[0] == "help" {
		// "help key create" is "key create help". Every further "help" goes
		// too: kept, "help help" would become "help help" again, forever.
		if topic := withoutHelp(args[1:]); len(topic) > 0 {
			return c.dispatch(ctx, e, path, append(topic, "help"))
		}
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(e.stdout, usageOf(path))
		return nil
	}
	for _, sub := range c.subs {
		if sub.name == args[0] {
			return sub.dispatch(ctx, e, path+" "+sub.name, args[1:])
		}
	}
	return fmt.Errorf(`%w: unknown command "%s %s"%s; %s has %s`, errUsage, path, args[0], didYouMean(args[0], c.names(), path+" "), path, strings.Join(c.names(), ", "))
}

// onlyHelp reports whether every word of args is "help".
func onlyHelp(args []string) bool {
	return !slices.ContainsFunc(args, func(a string) bool { return a != "help" })
}

// withoutHelp is args without its "help" words, in a new slice.
func withoutHelp(args []string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "help" })
}

func (c command) names() []string {
	names := make([]string, len(c.subs))
	for i, sub := range c.subs {
		names[i] = sub.name
	}
	return names
}

// usageOf is the part of usage that describes the commands under path:
// the whole text for "agentapi", else its lines naming path (and the lines
// that continue them).
func usageOf(path string) string {
	if path == "agentapi" {
		return usage
	}
	i := strings.LastIndex(path, " ")
	parent, last := path[:i], path[i+1:]
	var b strings.Builder
	b.WriteString("Usage:\n")
	in := false
	for _, line := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  "+parent+" "); ok {
			word, _, _ := strings.Cut(rest, " ")
			in = slices.Contains(strings.Split(word, "|"), last)
		} else if !strings.HasPrefix(line, "    ") {
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// didYouMean suggests the name in names nearest to typed, as
// ` (did you mean "<prefix><name>"?)`, or nothing when none is near.
func didYouMean(typed string, names []string, prefix string) string {
	best, bestDist := "", len(typed)/2+2
	for _, n := range names {
		if d := editDistance(typed, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(` (did you mean "%s%s"?)`, prefix, best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
