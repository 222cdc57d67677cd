package main

import (
	"bufio"
	"context"
	"strings"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

func userCreate(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("user create")
	account := fs.String("account", "", "the account id")
	email := fs.String("email", "", "the user's email, used to sign in")
	role := fs.String("role", "", "owner, admin or agent")
	if _, err := parse(fs, args, "--account", "--email", "--role"); err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		u, err := accounts.New(st, accounts.Hash, nil).CreateUser(ctx, accounts.NewUser{
			AccountID: *account, Email: *email, Role: *role, Password: func() (string, error) { return readPassword(e) },
		})
		if err != nil {
			return err
		}
		return e.println(u.ID, "user "+u.ID+" was created, but its id could not be written")
	})
}

// userResetPassword gives a user a new one-time password, printed once,
// which they replace at next sign-in: how support lets in a user (an
// Owner too) who lost theirs. Their console sessions end.
func userResetPassword(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("user reset-password")
	account := fs.String("account", "", "the account id")
	email := fs.String("email", "", "the user's email")
	if _, err := parse(fs, args, "--account", "--email"); err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		u, pw, err := accounts.New(st, accounts.Hash, nil).ResetPasswordByEmail(ctx, *account, *email)
		if err != nil {
			return err
		}
		return e.println(pw, "the password of user "+u.ID+" was reset, but the new one could not be written (reset it again)")
	})
}

// readPassword reads one line from stdin: scripts pipe it in, and it never
// appears in the process list or shell history. The service checks it.
func readPassword(e env) (string, error) {
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", domain.Errorf(domain.CodeMissingField, "the password is read from standard input, one line; none was given")
	}
	return strings.TrimRight(line, "\r\n"), nil
}
