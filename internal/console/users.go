package console

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/mail"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
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
	Email string
	Role  string
	Roles []option
	Error string
}

func (c *Console) usersPage(r *http.Request, s *session, email, role string) (usersPage, error) {
	us, err := c.store.ListUsers(r.Context(), s.user.AccountID)
	if err != nil {
		return usersPage{}, err
	}
	if role == "" {
		role = string(domain.RoleAgent)
	}
	p := usersPage{Email: email, Role: role}
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

func (c *Console) handleUsers(w http.ResponseWriter, r *http.Request, s *session) {
	p, err := c.usersPage(r, s, "", "")
	if err != nil {
		c.serverError(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "users", "Users", p)
}

type invitedPage struct {
	Email, Role, Password string
}

// maxEmailLength is RFC 5321's limit on a path.
const maxEmailLength = 254

func (c *Console) handleInvite(w http.ResponseWriter, r *http.Request, s *session) {
	email := domain.NormalizeEmail(r.PostForm.Get("email"))
	roleText := r.PostForm.Get("role")
	fail := func(msg string) {
		p, err := c.usersPage(r, s, email, roleText)
		if err != nil {
			c.serverError(w, r, s, err)
			return
		}
		p.Error = msg
		c.render(w, r, s, http.StatusUnprocessableEntity, "users", "Users", p)
	}
	addr, err := mail.ParseAddress(email)
	// Checked as sent too: lower-casing turns bytes that are not UTF-8
	// into U+FFFD, which would pass as an address that was never given.
	if err != nil || addr.Address != email || addr.Name != "" || len(email) > maxEmailLength || !utf8.ValidString(r.PostForm.Get("email")) {
		fail("Give a plain email address, such as ann@example.com.")
		return
	}
	role, ok := domain.ParseRole(roleText)
	if !ok {
		fail("Choose a role.")
		return
	}
	// There is no mail: the Owner hands this over, and the user must
	// replace it at first sign-in.
	oneTime := rand.Text()
	hash, err := c.passwords.Hash(r.Context(), oneTime)
	if busy(r, err) {
		p, err := c.usersPage(r, s, email, roleText)
		if err != nil {
			c.serverError(w, r, s, err)
			return
		}
		p.Error = busyHashing
		w.Header().Set("Retry-After", busyRetry)
		c.render(w, r, s, http.StatusServiceUnavailable, "users", "Users", p)
		return
	}
	if err != nil {
		c.serverError(w, r, s, err)
		return
	}
	now := c.now().UTC().Truncate(time.Millisecond)
	u := domain.User{
		ID: domain.NewID(domain.PrefixUser, now), AccountID: s.user.AccountID, Email: email, Role: role,
		PasswordHash: hash, MustChangePassword: true, Active: true, CreatedAt: now,
	}
	err = c.store.CreateUser(r.Context(), u)
	var dup *domain.DuplicateError
	if errors.As(err, &dup) {
		fail("A user with this email already exists.")
		return
	}
	if err != nil {
		c.serverError(w, r, s, err)
		return
	}
	c.log.Info("console user invited", "user_id", u.ID, "role", string(role), "by", s.user.ID)
	c.render(w, r, s, http.StatusCreated, "invited", "User invited", invitedPage{Email: email, Role: string(role), Password: oneTime})
}

// target returns a user of the Owner's account that the Owner may
// deactivate, or renders why not and returns false.
func (c *Console) target(w http.ResponseWriter, r *http.Request, s *session) (domain.User, bool) {
	u, err := c.store.GetUser(r.Context(), r.PathValue("id"))
	if errors.Is(err, domain.ErrNotFound) || (err == nil && u.AccountID != s.user.AccountID) {
		c.notFound(w, r, s)
		return u, false
	}
	if err != nil {
		c.serverError(w, r, s, err)
		return u, false
	}
	if u.ID == s.user.ID {
		c.renderError(w, r, s, http.StatusConflict, "You cannot deactivate yourself. Another Owner can.")
		return u, false
	}
	return u, true
}

func (c *Console) handleDeactivateForm(w http.ResponseWriter, r *http.Request, s *session) {
	u, ok := c.target(w, r, s)
	if !ok {
		return
	}
	c.render(w, r, s, http.StatusOK, "deactivate", "Deactivate "+u.Email,
		userRow{ID: u.ID, Email: u.Email, Role: string(u.Role), Active: u.Active})
}

func (c *Console) handleDeactivate(w http.ResponseWriter, r *http.Request, s *session) {
	u, ok := c.target(w, r, s)
	if !ok {
		return
	}
	if err := c.store.DeactivateUser(r.Context(), s.user.AccountID, u.ID); err != nil {
		c.serverError(w, r, s, err)
		return
	}
	c.log.Info("console user deactivated", "user_id", u.ID, "by", s.user.ID)
	http.Redirect(w, r, "/console/users?done=deactivated", http.StatusSeeOther)
}
