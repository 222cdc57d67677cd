package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/password"
)

func userCmd(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("%w: user needs a subcommand: create", errUsage)
	}
	fs, db := e.flags("user create")
	account := fs.String("account", "", "the account id")
	email := fs.String("email", "", "the user's email, used to sign in")
	role := fs.String("role", "", "owner, admin or agent")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	if err := required(fs, "account", "email", "role"); err != nil {
		return err
	}
	r, ok := domain.ParseRole(*role)
	if !ok {
		return domain.Errorf(domain.CodeInvalidValue, "role must be owner, admin or agent")
	}
	addr, err := checkEmail(*email)
	if err != nil {
		return err
	}
	pw, err := readPassword(e)
	if err != nil {
		return err
	}
	hash, err := password.Hash(pw)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.GetAccount(ctx, *account); errors.Is(err, domain.ErrNotFound) {
		return domain.Errorf(domain.CodeNotFound, "no account %q", *account)
	} else if err != nil {
		return fmt.Errorf("get account: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := domain.User{
		ID: domain.NewID(domain.PrefixUser, now), AccountID: *account, Email: addr,
		Role: r, PasswordHash: hash, Active: true, CreatedAt: now,
	}
	err = st.CreateUser(ctx, u)
	var dup *domain.DuplicateError
	if errors.As(err, &dup) {
		return domain.Errorf(domain.CodeDuplicateValue, "a user with email %s already exists (%s)", addr, dup.ExistingID)
	}
	if err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	if _, err := fmt.Fprintln(e.stdout, u.ID); err != nil {
		return fmt.Errorf("user %s was created, but its id could not be written: %w", u.ID, err)
	}
	return nil
}

// checkEmail accepts a bare address (no display name) and returns its
// normalized form.
func checkEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || len(s) > 254 {
		return "", domain.Errorf(domain.CodeInvalidValue, "%q is not an email address", s)
	}
	return domain.NormalizeEmail(s), nil
}

// readPassword reads one line from stdin: scripts pipe it in, and it never
// appears in the process list or shell history.
func readPassword(e env) (string, error) {
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", domain.Errorf(domain.CodeMissingField, "the password is read from standard input, one line; none was given")
	}
	pw := strings.TrimRight(line, "\r\n")
	if err := password.Check(pw); err != nil {
		return "", domain.Errorf(domain.CodeInvalidValue, "%s", err.Error())
	}
	return pw, nil
}
