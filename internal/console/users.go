package console

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Users are the Owner's to manage: invite (create with a role and a
// one-time password, as there is no mail) and deactivate.

type userRow struct {
	ID, Email, Role string
	Active          bool
	Pending         bool // has not chosen a password yet
	CreatedAt       time.Time
	Self            bool
}

type usersPage struct {
	Users []userRow
	Pager pager
	Email string
	Role  string
	Roles []option
	// Error is what to fix in the invitation; Field its field.
	Error, Field string
}

// usersPage is a page of the account's users (pageSize, searched by
// email, by ?q= and ?after=) and the invitation form.
func (c *Console) usersPage(r *http.Request, s *session, email, role string) (usersPage, error) {
	lp, err := readList(r)
	if err != nil {
		return usersPage{}, err
	}
	us, next, err := c.store.UserPage(r.Context(), store.UserPageQuery{AccountID: s.user.AccountID, Search: lp.Search, After: lp.After, Limit: pageSize})
	if err != nil {
		return usersPage{}, err
	}
	if role == "" {
		role = string(domain.RoleAgent)
	}
	p := usersPage{Email: email, Role: role, Pager: pagerOf("/console/users", url.Values{"q": {lp.Search}}, lp, next)}
	for _, u := range us {
		p.Users = append(p.Users, userRow{ID: u.ID, Email: u.Email, Role: string(u.Role), Active: u.Active,
			Pending: u.MustChangePassword, CreatedAt: u.CreatedAt, Self: u.ID == s.user.ID})
	}
	for _, r := range []domain.Role{domain.RoleAgent, domain.RoleAdmin, domain.RoleOwner} {
		p.Roles = append(p.Roles, option{Value: string(r), Label: roleLabels[r], Checked: string(r) == role})
	}
	return p, nil
}

var roleLabels = map[domain.Role]string{
	domain.RoleOwner: "Owner — everything, including users",
	domain.RoleAdmin: "Admin — API keys and AI agents",
	domain.RoleAgent: "Agent — views AI agents",
}

func (c *Console) handleUsers(w http.ResponseWriter, r *http.Request, s *session) error {
	p, err := c.usersPage(r, s, "", "")
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "users", "Users", p)
	return nil
}

// showUsers is the users page again with the invitation as posted and
// what to fix.
func (c *Console) showUsers(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	p, err := c.usersPage(r, s, domain.NormalizeEmail(r.PostForm.Get("email")), r.PostForm.Get("role"))
	if err != nil {
		return err
	}
	p.Error, p.Field = e.Message, e.Field
	c.render(w, r, s, e.Status, "users", "Users", p)
	return nil
}

type invitedPage struct {
	Email, Role, Password string
}

// maxEmailLength is RFC 5321's limit on a path.
const maxEmailLength = 254

func (c *Console) handleInvite(w http.ResponseWriter, r *http.Request, s *session) error {
	email := domain.NormalizeEmail(r.PostForm.Get("email"))
	addr, err := mail.ParseAddress(email)
	// Checked as sent too: lower-casing turns bytes that are not UTF-8
	// into U+FFFD, which would pass as an address that was never given.
	if err != nil || addr.Address != email || addr.Name != "" || len(email) > maxEmailLength || !utf8.ValidString(r.PostForm.Get("email")) {
		return fieldError("email", "Give a plain email address, such as ann@example.com.")
	}
	role, ok := domain.ParseRole(r.PostForm.Get("role"))
	if !ok {
		return fieldError("role", "Choose a role.")
	}
	// There is no mail: the Owner hands this over, and the user must
	// replace it at first sign-in.
	oneTime := rand.Text()
	hash, err := c.passwords.Hash(r.Context(), oneTime)
	if busy(r, err) {
		return errBusy(busyHashing)
	}
	if err != nil {
		return err
	}
	now := c.now().UTC().Truncate(time.Millisecond)
	u := domain.User{
		ID: domain.NewID(domain.PrefixUser, now), AccountID: s.user.AccountID, Email: email, Role: role,
		PasswordHash: hash, MustChangePassword: true, Active: true, CreatedAt: now,
	}
	err = c.store.CreateUser(r.Context(), u)
	var dup *domain.DuplicateError
	if errors.As(err, &dup) {
		return fieldError("email", "A user with this email already exists.")
	}
	if err != nil {
		return err
	}
	c.log.Info("console user invited", "user_id", u.ID, "role", string(role), "by", s.user.ID)
	c.render(w, r, s, http.StatusCreated, "invited", "User invited", invitedPage{Email: email, Role: string(role), Password: oneTime})
	return nil
}

// target returns a user of the Owner's account that the Owner may
// deactivate, or why not.
func (c *Console) target(r *http.Request, s *session) (domain.User, error) {
	u, err := c.store.GetUser(r.Context(), r.PathValue("id"))
	if errors.Is(err, domain.ErrNotFound) || (err == nil && u.AccountID != s.user.AccountID) {
		return u, errNotFound
	}
	if err != nil {
		return u, err
	}
	if u.ID == s.user.ID {
		return u, &pageError{Status: http.StatusConflict, Message: "You cannot deactivate yourself. Another Owner can."}
	}
	return u, nil
}

func (c *Console) handleDeactivateForm(w http.ResponseWriter, r *http.Request, s *session) error {
	u, err := c.target(r, s)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "deactivate", "Deactivate "+u.Email,
		userRow{ID: u.ID, Email: u.Email, Role: string(u.Role), Active: u.Active})
	return nil
}

func (c *Console) handleDeactivate(w http.ResponseWriter, r *http.Request, s *session) error {
	u, err := c.target(r, s)
	if err != nil {
		return err
	}
	if err := c.store.DeactivateUser(r.Context(), s.user.AccountID, u.ID); err != nil {
		return err
	}
	c.log.Info("console user deactivated", "user_id", u.ID, "by", s.user.ID)
	http.Redirect(w, r, "/console/users?done=deactivated", http.StatusSeeOther)
	return nil
}
