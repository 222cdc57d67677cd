// Package wire declares the /v1 objects as they travel: each JSON field in
// the contract's order, timestamps as the server writes them (RFC 3339, UTC,
// milliseconds, Z). The API renders them through encoding/json (internal/api)
// and the CLI's api commands print them, so each shape is declared once.
// Go programs read the same objects through the public client package,
// whose types carry time.Time; a test in internal/api decodes every API
// response into the client's types with unknown fields refused.
package wire

import (
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// TimeFormat is how every timestamp leaves the service: RFC 3339, UTC,
// millisecond precision (what the store keeps), ending in Z.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time formats t as TimeFormat says.
func Time(t time.Time) string { return t.UTC().Format(TimeFormat) }

// TimePtr formats *t; nil stays nil (JSON null).
func TimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Time(*t)
	return &s
}

// AgentItem is an agent in a list: exactly the contract's four fields.
type AgentItem struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Enabled   bool   `json:"enabled"`
	CreatedAt string `json:"created_at"`
}

// Agent is an agent in a single-agent response, with every field (empty
// instructions included).
type Agent struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Enabled      bool   `json:"enabled"`
	CreatedAt    string `json:"created_at"`
	Instructions string `json:"instructions"`
	UpdatedAt    string `json:"updated_at"`
}

// Key is the API key object's fields that every surface shows: what the
// CLI's `api me` prints, and the start of GET /me's object (Me) and of the
// operator's `key list` lines.
type Key struct {
	ID                 string         `json:"id"`
	Name               string         `json:"name"`
	Description        string         `json:"description"`
	Prefix             string         `json:"prefix"`
	Scopes             []domain.Scope `json:"scopes"`
	RateLimitPerMinute int            `json:"rate_limit_per_minute"`
	LastUsedAt         *string        `json:"last_used_at"`
	ExpiresAt          *string        `json:"expires_at"` // nil: the key does not expire
}

// Me is GET /me's key object: Key and the key's IP allowlist, [] when any
// address may use it.
type Me struct {
	Key
	AllowedIPs []string `json:"allowed_ips"`
}

// Stats is an agent's question statistics.
type Stats struct {
	AgentID            string  `json:"agent_id"`
	QuestionsTotal     int64   `json:"questions_total"`
	AnsweredTotal      int64   `json:"answered_total"`
	FailedTotal        int64   `json:"failed_total"`
	LastQuestionAt     *string `json:"last_question_at"`  // nil: never asked
	AverageAnswerMS    *int64  `json:"average_answer_ms"` // nil: nothing answered
	ConversationsTotal int64   `json:"conversations_total"`
}

// Answer is an answered question.
type Answer struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Question       string `json:"question"`
	Answer         string `json:"answer"`
	CreatedAt      string `json:"created_at"`
	AnswerMS       int64  `json:"answer_ms"`
}

// Meta is a collection page's meta object.
type Meta struct {
	Limit   int     `json:"limit"`
	Next    *string `json:"next"` // nil on the last page
	HasMore bool    `json:"has_more"`
}
