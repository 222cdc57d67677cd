package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
)

func accountCmd(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: account needs a subcommand: create, show, deactivate, activate or feature", errUsage)
	}
	switch args[0] {
	case "create":
		return accountCreate(ctx, e, args[1:])
	case "show":
		return accountShow(ctx, e, args[1:])
	case "deactivate", "activate":
		return accountSetActive(ctx, e, args[0], args[1:])
	case "feature":
		return accountFeature(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: unknown account subcommand %q", errUsage, args[0])
}

func accountCreate(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account create")
	name := fs.String("name", "", "the account's name")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "name"); err != nil {
		return err
	}
	// Refused before openStore, which would create the database.
	if _, err := accounts.CheckAccountName(*name); err != nil {
		return err
	}
	st, err := openStore(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := accounts.New(st, nil, nil).CreateAccount(ctx, *name)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(e.stdout, a.ID); err != nil {
		return fmt.Errorf("account %s was created, but its id could not be written: %w", a.ID, err)
	}
	return nil
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

func accountShow(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account show")
	pos, err := parse(fs, args, "ID")
	if err != nil {
		return err
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := accounts.New(st, nil, nil).Account(ctx, pos[0])
	if err != nil {
		return err
	}
	features := a.Features
	if features == nil {
		features = []domain.Feature{}
	}
	line := accountLine{ID: a.ID, Name: a.Name, Active: a.Active, Features: features, CreatedAt: formatTime(a.CreatedAt)}
	if err := json.NewEncoder(e.stdout).Encode(line); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func accountSetActive(ctx context.Context, e env, verb string, args []string) error {
	fs, db := e.flags("account " + verb)
	pos, err := parse(fs, args, "ID")
	if err != nil {
		return err
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	return accounts.New(st, nil, nil).SetActive(ctx, pos[0], verb == "activate")
}

func accountFeature(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("account feature")
	enable := fs.String("enable", "", "feature to switch on (ai-answers)")
	disable := fs.String("disable", "", "feature to switch off (ai-answers)")
	pos, err := parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if (*enable == "") == (*disable == "") {
		return fmt.Errorf("%w: account feature needs exactly one of --enable or --disable", errUsage)
	}
	name, on := *enable, true
	if name == "" {
		name, on = *disable, false
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	return accounts.New(st, nil, nil).SetFeature(ctx, pos[0], name, on)
}
