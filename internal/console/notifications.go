package console

import (
	"net/http"

	"github.com/agentapi/agentapi/internal/domain"
)

// notificationsPath is the signed-in user's page of which notices reach
// them by email (docs/console.md, Email notices).
const notificationsPath = "/console/notifications"

// mailKind is one mailed notice as the page lists it.
type mailKind struct {
	Type domain.EventType
	What string
}

// mailKinds are the notices emailed to Owners and Admins, in the words of
// docs/webhooks.md, Email.
var mailKinds = []mailKind{
	{domain.EventKeyLeaked, "An API key was found in public by GitHub secret scanning, and revoked."},
	{domain.EventKeyAnomaly, "An API key was used unusually: from a new network, in a burst, or after 30 days unused."},
	{domain.EventKeyExpiring, "An API key expires in 7 days."},
	{domain.EventWebhookEndpointDisabled, "A webhook endpoint was disabled after it kept failing or answered 410 Gone."},
}

type notificationsPage struct {
	Email       string
	Role        domain.Role
	Receives    bool // an Owner or Admin
	MailEnabled bool
	Kinds       []mailKind
}

func (c *Console) handleNotifications(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.render(w, r, s, http.StatusOK, "notifications", "Email notices", notificationsPage{
		Email: s.user.Email, Role: s.user.Role, Receives: s.user.Role.CanManageKeys(), MailEnabled: c.MailEnabled, Kinds: mailKinds})
}
