package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

func userCreate(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("user create")
	account := fs.String("account", "", "the account id")
	email := fs.String("email", "", "the user's email, used to sign in")
	role := fs.String("role", "", "owner, admin or agent")
	if _, err := parse(fs, args, "--account", "--email", "--role"); err != nil {
		return err
	}
	if _, ok := domain.ParseRole(*role); !ok {
		return fmt.Errorf("%w: --role must be owner, admin or agent (got %q)", errUsage, *role)
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

// userLine is a user as user list prints it: never the password's hash.
type userLine struct {
	ID     string `json:"id"`
	Email  string `json:"email"`
	Role   string `json:"role"`
	Status string `json:"status"` // active or inactive
	// MustChangePassword: they hold a one-time password (user
	// reset-password, the first Owner) not yet replaced at sign-in.
	MustChangePassword bool   `json:"must_change_password"`
	CreatedAt          string `json:"created_at"`
}

var userColumns = []column[userLine]{
	{head: "ID", cell: func(u userLine) string { return u.ID }},
	{head: "EMAIL", cell: func(u userLine) string { return u.Email }},
	{head: "ROLE", cell: func(u userLine) string { return u.Role }},
	{head: "STATUS", cell: func(u userLine) string { return u.Status }},
	{head: "PASSWORD", cell: func(u userLine) string {
		if u.MustChangePassword {
			return "one-time"
		}
		return "set"
	}},
	{head: "CREATED", cell: func(u userLine) string { return shortTime(u.CreatedAt) }},
}

// userList prints an account's users, in the order they were created.
// Sign-ins are not recorded, so there is no last sign-in to show.
func userList(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("user list")
	account := fs.String("account", "", "the account id")
	out := e.output(fs)
	if _, err := parse(fs, args, "--account"); err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		if _, err := accounts.New(st, nil, nil).Account(ctx, *account); err != nil {
			return err
		}
		users, err := st.ListUsers(ctx, *account)
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		lines := make([]userLine, len(users))
		for i, u := range users {
			status := "active"
			if !u.Active {
				status = "inactive"
			}
			lines[i] = userLine{ID: u.ID, Email: u.Email, Role: string(u.Role), Status: status,
				MustChangePassword: u.MustChangePassword, CreatedAt: wire.Time(u.CreatedAt)}
		}
		return printList(out, lines, userColumns)
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
