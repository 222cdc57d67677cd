package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/agentapi/agentapi/internal/accounts"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Users are the Owner's to manage: invite (create with a role and a
// one-time password, as there is no mail), change a role, deactivate and
// reactivate, and issue a new one-time password. Every rule (an account
// keeps an active Owner; nobody changes these of their own) is
// accounts.Service's; these handlers decode, call it and render.

type userRow struct {
	ID, Email, Role string
	Active          bool
	Pending         bool // has not chosen a password yet
	CreatedAt       time.Time
	Self            bool
}

func rowOf(u domain.User, s *session) userRow {
	return userRow{ID: u.ID, Email: u.Email, Role: string(u.Role), Active: u.Active,
		Pending: u.MustChangePassword, CreatedAt: u.CreatedAt, Self: u.ID == s.user.ID}
}

type usersPage struct {
	Users []userRow
	Pager pager
	Email string
	Roles []option
	// formError: what to fix in the invitation.
	formError
}

var roleChoices = []option{
	{Value: string(domain.RoleAgent), Label: "Agent — views AI agents"},
	{Value: string(domain.RoleAdmin), Label: "Admin — API keys and AI agents"},
	{Value: string(domain.RoleOwner), Label: "Owner — everything, including users"},
}

// showUsers is a page of the account's users (pageSize, searched by
// email, by ?q= and ?after=) and the invitation form, as posted.
func (c *Console) showUsers(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	us, next, err := c.Store.UserPage(r.Context(), store.UserPageQuery{AccountID: s.user.AccountID, Search: lp.Search, After: lp.After, Limit: pageSize})
	if err != nil {
		return err
	}
	at := func(u domain.User) (time.Time, string) { return u.CreatedAt, u.ID }
	p := usersPage{Email: domain.NormalizeEmail(r.PostForm.Get("email")),
		Roles: choose(roleChoices, cmp.Or(r.PostForm.Get("role"), string(domain.RoleAgent))),
		Pager: pagerBoth("/console/users", url.Values{"q": {lp.Search}}, lp, next, us, at)}
	for _, u := range us {
		p.Users = append(p.Users, rowOf(u, s))
	}
	return c.renderForm(w, r, s, e, "users", "Users", &p)
}

// oneTimePage shows a one-time password once: an invitation's (Invited)
// or a reset's.
type oneTimePage struct {
	ID, Email, Role, Password string
	Invited                   bool
}

func (c *Console) handleInvite(w http.ResponseWriter, r *http.Request, s *session) error {
	u, pw, err := c.accounts.Invite(r.Context(), &s.user, s.user.AccountID, r.PostForm.Get("email"), r.PostForm.Get("role"))
	if err != nil {
		return consoleUserError(r, err)
	}
	c.Log.Info("console user invited", "user_id", u.ID, "role", string(u.Role), "by", s.user.ID)
	return c.render(w, r, s, http.StatusCreated, "invited", "User invited",
		oneTimePage{ID: u.ID, Email: u.Email, Role: string(u.Role), Password: pw, Invited: true})
}

// consoleUserError is the console's wording of what the service refused:
// a busy password gate is 503; a taken email does not name its holder, who
// may be in another account.
func consoleUserError(r *http.Request, err error) error {
	switch {
	case busy(r, err):
		return errBusy(busyHashing)
	case domain.IsCode(err, domain.CodeDuplicateValue):
		return fieldError("email", "A user with this email already exists.")
	case domain.IsCode(err, domain.CodeInvalidValue) && fieldOf(err) == "email":
		return fieldError("email", "Give a plain email address, such as ann@example.com.")
	case domain.IsCode(err, domain.CodeInvalidValue) && fieldOf(err) == "role":
		return fieldError("role", "Choose a role.")
	}
	return err
}

func fieldOf(err error) string {
	var de *domain.Error
	if errors.As(err, &de) && len(de.Fields) > 0 {
		return de.Fields[0].Field
	}
	return ""
}

// userPage is one user of the account and what an Owner may do to them.
type userPage struct {
	User  userRow
	Roles []option
	// formError: what to fix in the role form (Field "role") or why the
	// last change was refused.
	formError
}

func (c *Console) showUser(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	u, err := c.accounts.User(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	p := userPage{User: rowOf(u, s), Roles: choose(roleChoices, string(u.Role))}
	return c.renderForm(w, r, s, e, "user", isolate(u.Email), &p)
}

func (c *Console) handleSetRole(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if _, err := c.accounts.SetRole(r.Context(), &s.user, s.user.AccountID, id, r.PostForm.Get("role")); err != nil {
		return consoleUserError(r, err)
	}
	c.Log.Info("console user role changed", "user_id", id, "role", r.PostForm.Get("role"), "by", s.user.ID)
	return seeOther("/console/users/" + id + "?done=role")
}

func (c *Console) handleReactivate(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if err := c.accounts.ReactivateUser(r.Context(), &s.user, s.user.AccountID, id); err != nil {
		return err
	}
	c.Log.Info("console user reactivated", "user_id", id, "by", s.user.ID)
	return seeOther("/console/users/" + id + "?done=reactivated")
}

// handleResetPassword issues a new one-time password and shows it once
// (like an invitation's: the answer to the POST, never stored).
func (c *Console) handleResetPassword(w http.ResponseWriter, r *http.Request, s *session) error {
	u, pw, err := c.accounts.ResetPassword(r.Context(), &s.user, s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return consoleUserError(r, err)
	}
	c.Log.Info("console user password reset", "user_id", u.ID, "by", s.user.ID)
	return c.render(w, r, s, http.StatusCreated, "invited", "New one-time password",
		oneTimePage{ID: u.ID, Email: u.Email, Role: string(u.Role), Password: pw})
}

func (c *Console) handleDeactivateForm(w http.ResponseWriter, r *http.Request, s *session) error {
	u, err := c.accounts.User(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := accounts.MayChange(&s.user, s.user.AccountID, u.ID, "deactivate"); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "deactivate", "Deactivate "+isolate(u.Email), rowOf(u, s))
}

func (c *Console) handleDeactivate(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if err := c.accounts.DeactivateUser(r.Context(), &s.user, s.user.AccountID, id); err != nil {
		return err
	}
	c.Log.Info("console user deactivated", "user_id", id, "by", s.user.ID)
	return seeOther("/console/users?done=deactivated")
}
