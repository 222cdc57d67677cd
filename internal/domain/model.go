package domain

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Role is a console user's role within an account.
type Role string

const (
	RoleOwner Role = "owner"
	RoleAdmin Role = "admin"
	RoleAgent Role = "agent"
)

// ParseRole accepts exactly the three role names.
func ParseRole(s string) (Role, bool) {
	switch r := Role(s); r {
	case RoleOwner, RoleAdmin, RoleAgent:
		return r, true
	}
	return "", false
}

// CanManageKeys reports whether the role may see Settings → Developers.
func (r Role) CanManageKeys() bool { return r == RoleOwner || r == RoleAdmin }

// Feature names a per-account switch flipped by support.
type Feature string

// FeatureAIAnswers gates asking AI agents questions.
const FeatureAIAnswers Feature = "ai-answers"

// Features lists the switches support can flip.
var Features = []Feature{FeatureAIAnswers}

// Account is the parent entity of users, keys and AI agents. Deactivating it
// disables every key beneath it at once.
type Account struct {
	ID        string
	Name      string
	Active    bool
	Features  []Feature
	CreatedAt time.Time
}

// HasFeature reports whether support switched f on for the account.
func (a Account) HasFeature(f Feature) bool { return slices.Contains(a.Features, f) }

// User is a person who signs in to the console.
type User struct {
	ID           string
	AccountID    string
	Email        string
	Role         Role
	PasswordHash string
	// MustChangePassword is set for a one-time password (the first Owner).
	MustChangePassword bool
	Active             bool
	CreatedAt          time.Time
}

// NormalizeEmail is the form emails are stored and compared in.
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// Env is the credential's environment segment.
type Env string

const (
	EnvLive Env = "live"
	EnvTest Env = "test"
)

// ParseEnv accepts exactly live and test.
func ParseEnv(s string) (Env, bool) {
	switch e := Env(s); e {
	case EnvLive, EnvTest:
		return e, true
	}
	return "", false
}

// DefaultRateLimitPerMinute is the ceiling of a new key (docs/api.md).
const DefaultRateLimitPerMinute = 120

// MaxRateLimitPerMinute bounds what support may set, so arithmetic on it never overflows.
const MaxRateLimitPerMinute = 100_000_000

// APIKey is a key as stored: never the credential, only its prefix and hash.
type APIKey struct {
	ID          string
	AccountID   string
	Name        string
	Description string
	Prefix      string
	Env         Env
	// Hash is the SHA-256 of the whole credential text.
	Hash               []byte
	Scopes             []Scope
	AgentIDs           []string  // empty: not restricted
	AllowedIPs         AllowList // empty: any client address
	RateLimitPerMinute int
	LastUsedAt         *time.Time
	ExpiresAt          *time.Time
	CreatedAt          time.Time
	CreatedBy          string // user id; empty when created by support tooling
	RevokedAt          *time.Time
	RevokedBy          string
	// RotatedFrom is the id of the key this one was made to replace, if any.
	RotatedFrom string
}

// KeyStatus is the lifecycle state shown in the console and CLI.
type KeyStatus string

const (
	KeyActive  KeyStatus = "active"
	KeyRevoked KeyStatus = "revoked"
	KeyExpired KeyStatus = "expired"
)

// Status is the key's state at time now.
func (k APIKey) Status(now time.Time) KeyStatus {
	switch {
	case k.RevokedAt != nil:
		return KeyRevoked
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return KeyExpired
	}
	return KeyActive
}

// Restricted reports whether the key is limited to certain AI agents.
func (k APIKey) Restricted() bool { return len(k.AgentIDs) > 0 }

// AllowsAgent reports whether the key may address agent id.
func (k APIKey) AllowsAgent(id string) bool {
	return !k.Restricted() || slices.Contains(k.AgentIDs, id)
}

// HasScope reports whether the key holds s. There is no inheritance.
func (k APIKey) HasScope(s Scope) bool { return slices.Contains(k.Scopes, s) }

// Agent is an AI agent. Agents are never deleted, only disabled.
type Agent struct {
	ID           string
	AccountID    string
	Name         string
	Instructions string
	Enabled      bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Limits on an agent's text (docs/api.md, Limits), in Unicode code points; the
// API and the console both apply them.
const (
	MaxAgentNameLength    = MaxNameLength
	MaxInstructionsLength = 10_000
	MaxQuestionLength     = 4_000
)

// TextProblem is what makes free text (instructions, a question) unacceptable.
type TextProblem int

const (
	TextOK      TextProblem = iota
	TextTooLong             // more code points than allowed
	TextControl             // a control character other than a line break or a tab
)

// CheckText applies the rule for free text that may span lines: at most
// max code points, and no control character but \n, \r and \t. Each caller
// words the problem its own way.
func CheckText(s string, max int) TextProblem {
	switch {
	case utf8.RuneCountInString(s) > max:
		return TextTooLong
	case strings.IndexFunc(s, IsTextControl) >= 0:
		return TextControl
	}
	return TextOK
}

// IsTextControl reports whether r is a control character free text may not
// hold: any but \n, \r and \t.
func IsTextControl(r rune) bool {
	return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t'
}

// AgentStats are an agent's question counters.
type AgentStats struct {
	AgentID            string
	QuestionsTotal     int64
	AnsweredTotal      int64
	FailedTotal        int64
	LastQuestionAt     *time.Time
	AverageAnswerMS    *int64
	ConversationsTotal int64
}

// Question is one asked question and its answer, a turn of a conversation.
type Question struct {
	ID             string
	AccountID      string
	AgentID        string
	ConversationID string
	Question       string
	Answer         string
	CreatedAt      time.Time
	AnswerMS       int64
}

// AuditAction is what an audit event records. Events are written with
// these constants only (internal/keys, internal/accounts), never a free
// string.
type AuditAction string

// The audit trail's actions.
const (
	AuditCreated            AuditAction = "created"
	AuditRotated            AuditAction = "rotated"
	AuditRevoked            AuditAction = "revoked"
	AuditRenamed            AuditAction = "renamed"
	AuditDescriptionChanged AuditAction = "description_changed"
	AuditExpiredInUse       AuditAction = "expired_in_use"
	AuditRateLimitChanged   AuditAction = "rate_limit_changed"
	AuditAllowedIPsChanged  AuditAction = "allowed_ips_changed"
	// AuditAccessChanged: scopes, agent restriction or expiry, each
	// changed one with its before and after.
	AuditAccessChanged AuditAction = "access_changed"
	// AuditAnomaly: the service noticed a key used from a new network, in
	// a spike or after an idle month (docs/webhooks.md, Key anomalies);
	// AuditNoticeDismissed: an Owner or Admin dismissed its notice.
	AuditAnomaly         AuditAction = "anomaly"
	AuditNoticeDismissed AuditAction = "notice_dismissed"

	// A user's events (internal/accounts): they name no key.
	AuditUserInvited       AuditAction = "user_invited"
	AuditUserRoleChanged   AuditAction = "user_role_changed"
	AuditUserDeactivated   AuditAction = "user_deactivated"
	AuditUserReactivated   AuditAction = "user_reactivated"
	AuditUserPasswordReset AuditAction = "user_password_reset"

	// AuditAccountRenamed: the account's name changed (console or CLI);
	// the detail holds the old and the new name.
	AuditAccountRenamed AuditAction = "account_renamed"

	// A webhook endpoint's events (internal/webhooks): they name no key;
	// the detail starts with the endpoint's id.
	AuditWebhookCreated       AuditAction = "webhook_endpoint_created"
	AuditWebhookUpdated       AuditAction = "webhook_endpoint_updated"
	AuditWebhookDeleted       AuditAction = "webhook_endpoint_deleted"
	AuditWebhookSecretRotated AuditAction = "webhook_endpoint_secret_rotated"
	AuditWebhookDisabled      AuditAction = "webhook_endpoint_disabled"

	// AuditKeyPolicyUpdated: the account's key policy changed; it names no
	// key, and the detail says each changed part's old → new.
	AuditKeyPolicyUpdated AuditAction = "key_policy_updated"
)

// WebhookAuditActions lists the AuditActions of webhook endpoints.
var WebhookAuditActions = []AuditAction{
	AuditWebhookCreated, AuditWebhookUpdated, AuditWebhookDeleted, AuditWebhookSecretRotated, AuditWebhookDisabled,
}

// UserAuditActions lists the AuditActions of users, not keys.
var UserAuditActions = []AuditAction{
	AuditUserInvited, AuditUserRoleChanged, AuditUserDeactivated, AuditUserReactivated, AuditUserPasswordReset,
}

// AuditActions lists every AuditAction.
var AuditActions = append([]AuditAction{
	AuditCreated, AuditRotated, AuditRevoked, AuditRenamed, AuditDescriptionChanged,
	AuditExpiredInUse, AuditRateLimitChanged, AuditAllowedIPsChanged, AuditAccessChanged, AuditKeyPolicyUpdated,
	AuditAnomaly, AuditNoticeDismissed,
}, append(UserAuditActions, WebhookAuditActions...)...)

// AuditEvent records something that happened to a key or a user, for the
// console. KeyID is "" for a user's event.
type AuditEvent struct {
	ID        string
	AccountID string
	KeyID     string
	Action    AuditAction
	ActorID   string // user id; empty for support tooling or the system
	Actor     string // display form: the user's email, "support" or "system"
	Detail    string
	CreatedAt time.Time
}

// Session is a signed-in console user. Only the SHA-256 of the session
// token is stored, so a leaked database yields no usable session.
type Session struct {
	TokenHash []byte
	UserID    string
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
	// AccountName and AccountFeatures are the user's account's, read with
	// the session for the console's header and Overview.
	AccountName     string
	AccountFeatures []Feature
}
