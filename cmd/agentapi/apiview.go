package main

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentapi/agentapi/internal/wire"
)

// The tables of the api commands (output.go): the columns a person scans
// a list by, and every field when one thing is shown. JSON keeps the
// API's shapes whole.

var agentItemColumns = []column[wire.AgentItem]{
	{"ID", func(a wire.AgentItem) string { return a.ID }},
	{"NAME", func(a wire.AgentItem) string { return a.Name }},
	{"ENABLED", func(a wire.AgentItem) string { return strconv.FormatBool(a.Enabled) }},
	{"CREATED", func(a wire.AgentItem) string { return shortTime(a.CreatedAt) }},
}

var agentColumns = []column[wire.Agent]{
	{"ID", func(a wire.Agent) string { return a.ID }},
	{"NAME", func(a wire.Agent) string { return a.Name }},
	{"ENABLED", func(a wire.Agent) string { return strconv.FormatBool(a.Enabled) }},
	{"INSTRUCTIONS", func(a wire.Agent) string { return a.Instructions }},
	{"CREATED", func(a wire.Agent) string { return shortTime(a.CreatedAt) }},
	{"UPDATED", func(a wire.Agent) string { return shortTime(a.UpdatedAt) }},
}

var meColumns = []column[wire.Me]{
	{"ID", func(k wire.Me) string { return k.ID }},
	{"NAME", func(k wire.Me) string { return k.Name }},
	{"DESCRIPTION", func(k wire.Me) string { return k.Description }},
	{"PREFIX", func(k wire.Me) string { return k.Prefix }},
	{"ACCESS", func(k wire.Me) string { return access(k.Scopes) }},
	{"SCOPES", func(k wire.Me) string { return joinAny(k.Scopes) }},
	{"RATE LIMIT", func(k wire.Me) string { return strconv.Itoa(k.RateLimitPerMinute) + " a minute" }},
	{"ALLOWED IPS", func(k wire.Me) string { return orAny(k.AllowedIPs) }},
	{"EXPIRES", func(k wire.Me) string { return timeOr(k.ExpiresAt, "never") }},
	{"LAST USED", func(k wire.Me) string { return timeOr(k.LastUsedAt, "never") }},
}

var statsColumns = []column[wire.Stats]{
	{"AGENT", func(s wire.Stats) string { return s.AgentID }},
	{"QUESTIONS", func(s wire.Stats) string { return strconv.FormatInt(s.QuestionsTotal, 10) }},
	{"ANSWERED", func(s wire.Stats) string { return strconv.FormatInt(s.AnsweredTotal, 10) }},
	{"FAILED", func(s wire.Stats) string { return strconv.FormatInt(s.FailedTotal, 10) }},
	{"CONVERSATIONS", func(s wire.Stats) string { return strconv.FormatInt(s.ConversationsTotal, 10) }},
	{"AVERAGE ANSWER", func(s wire.Stats) string {
		if s.AverageAnswerMS == nil {
			return ""
		}
		return strconv.FormatInt(*s.AverageAnswerMS, 10) + " ms"
	}},
	{"LAST QUESTION", func(s wire.Stats) string { return timeOr(s.LastQuestionAt, "never") }},
}

var answerColumns = []column[wire.Answer]{
	{"ID", func(a wire.Answer) string { return a.ID }},
	{"CONVERSATION", func(a wire.Answer) string { return a.ConversationID }},
	{"QUESTION", func(a wire.Answer) string { return a.Question }},
	{"ANSWER", func(a wire.Answer) string { return a.Answer }},
	{"TIME", func(a wire.Answer) string { return strconv.FormatInt(a.AnswerMS, 10) + " ms" }},
	{"CREATED", func(a wire.Answer) string { return shortTime(a.CreatedAt) }},
}

var eventColumns = []column[wire.Event]{
	{"ID", func(e wire.Event) string { return e.ID }},
	{"TYPE", func(e wire.Event) string { return string(e.Type) }},
	{"OBJECT", eventObject},
	{"CREATED", func(e wire.Event) string { return shortTime(e.CreatedAt) }},
	{"REQUEST", func(e wire.Event) string { return orText(e.RequestID, "") }},
}

var eventDetail = []column[wire.Event]{
	{"ID", func(e wire.Event) string { return e.ID }},
	{"TYPE", func(e wire.Event) string { return string(e.Type) }},
	{"OBJECT", eventObject},
	{"CREATED", func(e wire.Event) string { return shortTime(e.CreatedAt) }},
	{"REQUEST", func(e wire.Event) string { return orText(e.RequestID, "") }},
	{"ACTOR", func(e wire.Event) string {
		if e.Actor == nil {
			return ""
		}
		return e.Actor.Type + " " + e.Actor.ID
	}},
	{"DATA", func(e wire.Event) string { return string(e.Data) }},
	{"PREVIOUS", func(e wire.Event) string { return string(e.PreviousAttributes) }},
	{"REASON", func(e wire.Event) string { return string(e.Reason) }},
	{"SOURCE", func(e wire.Event) string { return string(e.Source) }},
	{"DETAILS", func(e wire.Event) string { return string(e.Details) }},
}

// eventObject is the id of the object an event's data holds.
func eventObject(e wire.Event) string {
	var obj struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(e.Data, &obj)
	return obj.ID
}

var endpointColumns = []column[wire.WebhookEndpoint]{
	{"ID", func(w wire.WebhookEndpoint) string { return w.ID }},
	{"URL", func(w wire.WebhookEndpoint) string { return w.URL }},
	{"STATUS", endpointStatus},
	{"EVENTS", func(w wire.WebhookEndpoint) string { return strings.Join(w.EnabledEvents, ",") }},
	{"DESCRIPTION", func(w wire.WebhookEndpoint) string { return w.Description }},
}

var endpointDetail = []column[wire.WebhookEndpoint]{
	{"ID", func(w wire.WebhookEndpoint) string { return w.ID }},
	{"URL", func(w wire.WebhookEndpoint) string { return w.URL }},
	{"DESCRIPTION", func(w wire.WebhookEndpoint) string { return w.Description }},
	{"EVENTS", func(w wire.WebhookEndpoint) string { return strings.Join(w.EnabledEvents, ",") }},
	{"STATUS", endpointStatus},
	{"CREATED", func(w wire.WebhookEndpoint) string { return shortTime(w.CreatedAt) }},
	{"UPDATED", func(w wire.WebhookEndpoint) string { return shortTime(w.UpdatedAt) }},
	// Only when created or rotated: shown this once.
	{"SECRET", func(w wire.WebhookEndpoint) string { return w.Secret }},
	{"OLD SECRET UNTIL", func(w wire.WebhookEndpoint) string { return timeOr(w.OldSecretExpiresAt, "") }},
}

// endpointStatus is an endpoint's status, with why when disabled.
func endpointStatus(w wire.WebhookEndpoint) string {
	if w.DisabledReason != nil {
		return w.Status + " (" + *w.DisabledReason + ")"
	}
	return w.Status
}

var attemptColumns = []column[wire.WebhookAttempt]{
	{"TIME", func(a wire.WebhookAttempt) string { return shortTime(a.CreatedAt) }},
	{"EVENT", func(a wire.WebhookAttempt) string { return a.EventID }},
	{"TYPE", func(a wire.WebhookAttempt) string { return string(a.EventType) }},
	{"ATTEMPT", func(a wire.WebhookAttempt) string { return strconv.Itoa(a.Attempt) }},
	{"STATUS", func(a wire.WebhookAttempt) string { return a.Status }},
	{"ANSWER", func(a wire.WebhookAttempt) string {
		if a.ResponseStatus != nil {
			return strconv.Itoa(*a.ResponseStatus)
		}
		return orText(a.Error, "")
	}},
	{"LATENCY", func(a wire.WebhookAttempt) string { return strconv.FormatInt(a.LatencyMS, 10) + " ms" }},
	{"DELIVERY", func(a wire.WebhookAttempt) string { return a.DeliveryStatus }},
	{"NEXT ATTEMPT", func(a wire.WebhookAttempt) string { return timeOr(a.NextAttemptAt, "") }},
}

// orAny is a list with commas, or "any" when empty (no restriction).
func orAny(list []string) string {
	if len(list) == 0 {
		return "any"
	}
	return strings.Join(list, ",")
}
