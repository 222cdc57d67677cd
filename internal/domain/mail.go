package domain

import "encoding/json"

// Mailed reports whether an event is emailed to its account's Owners and
// Admins when serve sends mail (docs/webhooks.md, Email): api_key.leaked,
// api_key.anomaly, the 7-day api_key.expiring (extra's details say
// expires_in 7d) and webhook_endpoint.disabled.
func Mailed(typ EventType, extra json.RawMessage) bool {
	switch typ {
	case EventKeyLeaked, EventKeyAnomaly, EventWebhookEndpointDisabled:
		return true
	case EventKeyExpiring:
		var x struct {
			Details struct {
				ExpiresIn string `json:"expires_in"`
			} `json:"details"`
		}
		return json.Unmarshal(extra, &x) == nil && x.Details.ExpiresIn == "7d"
	}
	return false
}

// MailedTypes are the event types that may be emailed, in the order the
// console lists them.
var MailedTypes = []EventType{EventKeyLeaked, EventKeyAnomaly, EventKeyExpiring, EventWebhookEndpointDisabled}
