package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

func accountCreate(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account create")
	name := fs.String("name", "", "the account's name")
	if _, err := parse(fs, args, "--name"); err != nil {
		return err
	}
	// Refused before openStore, which would create the database.
	if _, err := accounts.CheckAccountName(*name); err != nil {
		return err
	}
	return withStore(ctx, openStore, *db, func(st *store.Store) error {
		a, err := accounts.New(st, nil, nil).CreateAccount(ctx, *name)
		if err != nil {
			return err
		}
		return e.println(a.ID, "account "+a.ID+" was created, but its id could not be written")
	})
}

// accountLine is an account as `account show` prints it: what support
// needs to answer "why is this refused?", features included.
type accountLine struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Active    bool             `json:"active"`
	Features  []domain.Feature `json:"features"`
	CreatedAt string           `json:"created_at"`
}

// accountColumns are account show's lines in a table.
var accountColumns = []column[accountLine]{
	{head: "ID", cell: func(a accountLine) string { return a.ID }},
	{head: "NAME", cell: func(a accountLine) string { return a.Name }},
	{head: "ACTIVE", cell: func(a accountLine) string { return strconv.FormatBool(a.Active) }},
	{head: "FEATURES", cell: func(a accountLine) string { return joinAny(a.Features) }},
	{head: "CREATED", cell: func(a accountLine) string { return shortTime(a.CreatedAt) }},
}

func accountShow(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account show")
	out := e.output(fs)
	pos, err := parse(fs, args, "ID|NAME")
	if err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		id, err := findAccount(ctx, st, pos[0])
		if err != nil {
			return err
		}
		a, err := accounts.New(st, nil, nil).Account(ctx, id)
		if err != nil {
			return err
		}
		return printOne(out, accountLine{ID: a.ID, Name: a.Name, Active: a.Active, Features: nonNil(a.Features), CreatedAt: wire.Time(a.CreatedAt)}, accountColumns)
	})
}

// accountRename gives an account (by id, or by its current name) a new
// name, checked as account create checks it and audited (actor
// "support"). It prints the id and the name as stored.
func accountRename(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account rename")
	pos, err := parse(fs, args, "ID|NAME", "NEW_NAME")
	if err != nil {
		return err
	}
	if _, err := accounts.CheckAccountName(pos[1]); err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		id, err := findAccount(ctx, st, pos[0])
		if err != nil {
			return err
		}
		n, err := accounts.New(st, nil, nil).Rename(ctx, nil, id, pos[1])
		if err != nil {
			return err
		}
		return changed(e, id, "renamed", strconv.Quote(n))
	})
}

// findAccount is the id of the account whose id, or else whose name
// (ignoring case), is ref; a name that several accounts share is refused.
func findAccount(ctx context.Context, st *store.Store, ref string) (string, error) {
	if _, err := st.GetAccount(ctx, ref); !errors.Is(err, domain.ErrNotFound) {
		return ref, err
	}
	list, err := st.ListAccounts(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, a := range list {
		if strings.EqualFold(a.Name, ref) {
			ids = append(ids, a.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", domain.Errorf(domain.CodeNotFound, "no account has the id or name %q (agentapi account list shows them)", ref)
	case 1:
		return ids[0], nil
	}
	return "", domain.Errorf(domain.CodeInvalidValue, "%d accounts are named %q (%s): give the id", len(ids), ref, strings.Join(ids, ", "))
}

// accountList prints every account (output.go: a table or JSON lines).
func accountList(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account list")
	out := e.output(fs)
	if _, err := parse(fs, args); err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		list, err := st.ListAccounts(ctx)
		if err != nil {
			return err
		}
		lines := make([]accountSummary, len(list))
		for i, a := range list {
			lines[i] = accountSummary{a.ID, a.Name, a.Active, wire.Time(a.CreatedAt), a.Users, a.Keys}
		}
		return printList(out, lines, []column[accountSummary]{
			{head: "ID", cell: func(a accountSummary) string { return a.ID }},
			{head: "NAME", cell: func(a accountSummary) string { return a.Name }},
			{head: "ACTIVE", cell: func(a accountSummary) string { return strconv.FormatBool(a.Active) }},
			{head: "CREATED", cell: func(a accountSummary) string { return shortTime(a.CreatedAt) }},
			{head: "USERS", cell: func(a accountSummary) string { return strconv.Itoa(a.Users) }},
			{head: "KEYS", cell: func(a accountSummary) string { return strconv.Itoa(a.Keys) }},
		})
	})
}

// accountSummary is a line of `account list --json`: users counts the
// active users, keys the keys not revoked.
type accountSummary struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Active    bool   `json:"active"`
	CreatedAt string `json:"created_at"`
	Users     int    `json:"users"`
	Keys      int    `json:"keys"`
}

// accountSetActive is account activate or deactivate, which change what
// every key of the account may do: on a fleet it needs --redis
// (openForKeys). It prints the id and the new state.
func accountSetActive(verb string) func(context.Context, env, []string) error {
	return func(ctx context.Context, e env, args []string) error {
		fs, db := e.flags("account " + verb)
		pos, err := parse(fs, args, "ID")
		if err != nil {
			return err
		}
		return withStore(ctx, e.openForKeys, *db, func(st *store.Store) error {
			if err := accounts.New(st, nil, nil).SetActive(ctx, pos[0], verb == "activate"); err != nil {
				return err
			}
			return changed(e, pos[0], map[string]string{"activate": "active", "deactivate": "inactive"}[verb])
		})
	}
}

// changed prints what a command changed: the id, then its new state.
func changed(e env, id string, what ...string) error {
	return e.println(id+" "+strings.Join(what, " "), id+" is changed, but saying so failed")
}

// println prints line on stdout. A command has done its work before it
// prints, so a failed write is reported as done, the write's error after.
func (e env) println(line, done string) error {
	if _, err := fmt.Fprintln(e.stdout, line); err != nil {
		return fmt.Errorf("%s: %w", done, err)
	}
	return nil
}

func accountFeature(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account feature")
	enable := fs.String("enable", "", "feature to switch on (ai-answers)")
	disable := fs.String("disable", "", "feature to switch off (ai-answers)")
	// The switch is checked before the arguments: "account feature
	// ai-answers ID" lacks --enable or --disable, not an argument.
	if err := parseFlags(fs, func() error { return fs.Parse(args) }); err != nil {
		return err
	}
	if (*enable == "") == (*disable == "") {
		return fmt.Errorf("%w: needs exactly one of --enable ai-answers or --disable ai-answers, before the account ID", errUsage)
	}
	if err := checkArgs(fs, fs.Args(), []string{"ID"}, true); err != nil {
		return err
	}
	pos := fs.Args()
	name, on := *enable, "enabled"
	if name == "" {
		name, on = *disable, "disabled"
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		if err := accounts.New(st, nil, nil).SetFeature(ctx, pos[0], name, on == "enabled"); err != nil {
			return err
		}
		return changed(e, pos[0], name, on)
	})
}
