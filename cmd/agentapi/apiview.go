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
	{head: "ID", cell: func(a wire.AgentItem) string { return a.ID }},
	{head: "NAME", cell: func(a wire.AgentItem) string { return a.Name }},
	{head: "ENABLED", cell: func(a wire.AgentItem) string { return strconv.FormatBool(a.Enabled) }},
	{head: "CREATED", cell: func(a wire.AgentItem) string { return shortTime(a.CreatedAt) }},
}

var agentColumns = []column[wire.Agent]{
	{head: "ID", cell: func(a wire.Agent) string { return a.ID }},
	{head: "NAME", cell: func(a wire.Agent) string { return a.Name }},
	{head: "ENABLED", cell: func(a wire.Agent) string { return strconv.FormatBool(a.Enabled) }},
	{head: "INSTRUCTIONS", cell: func(a wire.Agent) string { return a.Instructions }},
	{head: "CREATED", cell: func(a wire.Agent) string { return shortTime(a.CreatedAt) }},
	{head: "UPDATED", cell: func(a wire.Agent) string { return shortTime(a.UpdatedAt) }},
}

var meColumns = []column[wire.Me]{
	{head: "ID", cell: func(k wire.Me) string { return k.ID }},
	{head: "NAME", cell: func(k wire.Me) string { return k.Name }},
	{head: "DESCRIPTION", cell: func(k wire.Me) string { return k.Description }},
	{head: "PREFIX", cell: func(k wire.Me) string { return k.Prefix }},
	{head: "ACCESS", cell: func(k wire.Me) string { return access(k.Scopes) }},
	{head: "SCOPES", cell: func(k wire.Me) string { return joinAny(k.Scopes) }},
	{head: "RATE LIMIT", cell: func(k wire.Me) string { return strconv.Itoa(k.RateLimitPerMinute) + " a minute" }},
	{head: "ALLOWED IPS", cell: func(k wire.Me) string { return orAny(k.AllowedIPs) }},
	{head: "EXPIRES", cell: func(k wire.Me) string { return timeOr(k.ExpiresAt, "never") }},
	{head: "LAST USED", cell: func(k wire.Me) string { return timeOr(k.LastUsedAt, "never") }},
}

var statsColumns = []column[wire.Stats]{
	{head: "AGENT", cell: func(s wire.Stats) string { return s.AgentID }},
	{head: "QUESTIONS", cell: func(s wire.Stats) string { return strconv.FormatInt(s.QuestionsTotal, 10) }},
	{head: "ANSWERED", cell: func(s wire.Stats) string { return strconv.FormatInt(s.AnsweredTotal, 10) }},
	{head: "FAILED", cell: func(s wire.Stats) string { return strconv.FormatInt(s.FailedTotal, 10) }},
	{head: "CONVERSATIONS", cell: func(s wire.Stats) string { return strconv.FormatInt(s.ConversationsTotal, 10) }},
	{head: "AVERAGE ANSWER", cell: func(s wire.Stats) string {
		if s.AverageAnswerMS == nil {
			return ""
		}
		return strconv.FormatInt(*s.AverageAnswerMS, 10) + " ms"
	}},
	{head: "LAST QUESTION", cell: func(s wire.Stats) string { return timeOr(s.LastQuestionAt, "never") }},
}

var answerColumns = []column[wire.Answer]{
	{head: "ID", cell: func(a wire.Answer) string { return a.ID }},
	{head: "CONVERSATION", cell: func(a wire.Answer) string { return a.ConversationID }},
	{head: "QUESTION", cell: func(a wire.Answer) string { return a.Question }},
	{head: "ANSWER", cell: func(a wire.Answer) string { return a.Answer }},
	{head: "TIME", cell: func(a wire.Answer) string { return strconv.FormatInt(a.AnswerMS, 10) + " ms" }},
	{head: "CREATED", cell: func(a wire.Answer) string { return shortTime(a.CreatedAt) }},
}

var eventColumns = []column[wire.Event]{
	{head: "ID", cell: func(e wire.Event) string { return e.ID }},
	{head: "TYPE", cell: func(e wire.Event) string { return string(e.Type) }},
	{head: "OBJECT", cell: eventObject},
	{head: "CREATED", cell: func(e wire.Event) string { return shortTime(e.CreatedAt) }},
	{head: "REQUEST", cell: func(e wire.Event) string { return orText(e.RequestID, "") }},
}

var eventDetail = []column[wire.Event]{
	{head: "ID", cell: func(e wire.Event) string { return e.ID }},
	{head: "TYPE", cell: func(e wire.Event) string { return string(e.Type) }},
	{head: "OBJECT", cell: eventObject},
	{head: "CREATED", cell: func(e wire.Event) string { return shortTime(e.CreatedAt) }},
	{head: "REQUEST", cell: func(e wire.Event) string { return orText(e.RequestID, "") }},
	{head: "ACTOR", cell: func(e wire.Event) string {
		if e.Actor == nil {
			return ""
		}
		return e.Actor.Type + " " + e.Actor.ID
	}},
	{head: "DATA", cell: func(e wire.Event) string { return string(e.Data) }},
	{head: "PREVIOUS", cell: func(e wire.Event) string { return string(e.PreviousAttributes) }, optional: true},
	{head: "REASON", cell: func(e wire.Event) string { return string(e.Reason) }, optional: true},
	{head: "SOURCE", cell: func(e wire.Event) string { return string(e.Source) }, optional: true},
	{head: "DETAILS", cell: func(e wire.Event) string { return string(e.Details) }, optional: true},
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
	{head: "ID", cell: func(w wire.WebhookEndpoint) string { return w.ID }},
	{head: "URL", cell: func(w wire.WebhookEndpoint) string { return w.URL }},
	{head: "STATUS", cell: endpointStatus},
	{head: "EVENTS", cell: func(w wire.WebhookEndpoint) string { return strings.Join(w.EnabledEvents, ",") }},
	{head: "DESCRIPTION", cell: func(w wire.WebhookEndpoint) string { return w.Description }},
}

var endpointDetail = []column[wire.WebhookEndpoint]{
	{head: "ID", cell: func(w wire.WebhookEndpoint) string { return w.ID }},
	{head: "URL", cell: func(w wire.WebhookEndpoint) string { return w.URL }},
	{head: "DESCRIPTION", cell: func(w wire.WebhookEndpoint) string { return w.Description }},
	{head: "EVENTS", cell: func(w wire.WebhookEndpoint) string { return strings.Join(w.EnabledEvents, ",") }},
	{head: "STATUS", cell: endpointStatus},
	{head: "CREATED", cell: func(w wire.WebhookEndpoint) string { return shortTime(w.CreatedAt) }},
	{head: "UPDATED", cell: func(w wire.WebhookEndpoint) string { return shortTime(w.UpdatedAt) }},
	// Only when created or rotated: shown this once.
	{head: "SECRET", cell: func(w wire.WebhookEndpoint) string { return w.Secret }, optional: true},
	{head: "OLD SECRET UNTIL", cell: func(w wire.WebhookEndpoint) string { return timeOr(w.OldSecretExpiresAt, "") }, optional: true},
}

// endpointStatus is an endpoint's status, with why when disabled.
func endpointStatus(w wire.WebhookEndpoint) string {
	if w.DisabledReason != nil {
		return w.Status + " (" + *w.DisabledReason + ")"
	}
	return w.Status
}

var attemptColumns = []column[wire.WebhookAttempt]{
	{head: "TIME", cell: func(a wire.WebhookAttempt) string { return shortTime(a.CreatedAt) }},
	{head: "EVENT", cell: func(a wire.WebhookAttempt) string { return a.EventID }},
	{head: "TYPE", cell: func(a wire.WebhookAttempt) string { return string(a.EventType) }},
	{head: "ATTEMPT", cell: func(a wire.WebhookAttempt) string { return strconv.Itoa(a.Attempt) }},
	{head: "STATUS", cell: func(a wire.WebhookAttempt) string { return a.Status }},
	{head: "ANSWER", cell: func(a wire.WebhookAttempt) string {
		if a.ResponseStatus != nil {
			return strconv.Itoa(*a.ResponseStatus)
		}
		return orText(a.Error, "")
	}},
	{head: "LATENCY", cell: func(a wire.WebhookAttempt) string { return strconv.FormatInt(a.LatencyMS, 10) + " ms" }},
	{head: "DELIVERY", cell: func(a wire.WebhookAttempt) string { return a.DeliveryStatus }},
	{head: "NEXT ATTEMPT", cell: func(a wire.WebhookAttempt) string { return timeOr(a.NextAttemptAt, "") }},
}

// orAny is a list with commas, or "any" when empty (no restriction).
func orAny(list []string) string {
	if len(list) == 0 {
		return "any"
	}
	return strings.Join(list, ",")
}
