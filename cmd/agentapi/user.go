package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
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
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	u, err := accounts.New(st, accounts.Hash, nil).CreateUser(ctx, accounts.NewUser{
		AccountID: *account, Email: *email, Role: *role, Password: func() (string, error) { return readPassword(e) },
	})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(e.stdout, u.ID); err != nil {
		return fmt.Errorf("user %s was created, but its id could not be written: %w", u.ID, err)
	}
	return nil
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
