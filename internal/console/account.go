package console

import (
	"net/http"
	"strconv"

	"github.com/agentapi/agentapi/internal/domain"
)

// The account's page (docs/console.md, Account): its name, id and
// whether AI answers are on, for Owners and Admins; Owners rename it,
// audited like every change the console makes.

type accountPage struct {
	Account   domain.Account
	AIAnswers bool
	// CanRename: the user is an Owner. Name is the rename form's value.
	CanRename bool
	Name      string
	formError
}

// showAccount is the account's page, with the rename form as posted (e
// set) or as the account's name.
func (c *Console) showAccount(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	a, err := c.accounts.Account(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	p := accountPage{Account: a, AIAnswers: a.HasFeature(domain.FeatureAIAnswers),
		CanRename: s.user.Role == domain.RoleOwner, Name: a.Name}
	if r.Method == http.MethodPost {
		p.Name = r.PostForm.Get("name")
	}
	return c.renderForm(w, r, s, e, "account", "Account", &p)
}

// handleRenameAccount renames the user's account (Owners only: the route
// and accounts.Rename both check).
func (c *Console) handleRenameAccount(w http.ResponseWriter, r *http.Request, s *session) error {
	if _, err := c.accounts.Rename(r.Context(), &s.user, s.user.AccountID, r.PostForm.Get("name")); err != nil {
		if domain.IsCode(err, domain.CodeInvalidValue) {
			return fieldError("name", "An account name is 1 to "+strconv.Itoa(domain.MaxNameLength)+" characters of text, with a visible character and no control characters.")
		}
		return err
	}
	c.Log.Info("console account renamed", "account_id", s.user.AccountID, "user_id", s.user.ID)
	return seeOther("/console/account?done=account-renamed")
}
