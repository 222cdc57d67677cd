// Package accounts owns accounts and their users (every change to a user
// recorded in the audit trail; an account keeps at least one active Owner)
// and the first start's account and Owner. The operator CLI, the console and
// serve's first start go through Service; the password hash comes from
// whatever the caller passes, so the console can keep its capped gate.
package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/password"
	"github.com/agentapi/agentapi/internal/store"
)

// MaxEmailLength is RFC 5321's limit on a path.
const MaxEmailLength = 254

// Hasher turns a password into the encoded hash stored for it:
// (*password.Gate).Hash, or Hash.
type Hasher func(ctx context.Context, pw string) (string, error)

// Hash is password.Hash as a Hasher, for callers without a gate.
func Hash(_ context.Context, pw string) (string, error) { return password.Hash(pw) }

// Service creates and changes accounts and users.
type Service struct {
	store *store.Store
	hash  Hasher
	now   func() time.Time
}

// New returns a Service; hash is Hash when nil, now time.Now when nil.
func New(st *store.Store, hash Hasher, now func() time.Time) *Service {
	if hash == nil {
		hash = Hash
	}
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, hash: hash, now: now}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

// CheckAccountName applies the name rule to an account's name and returns
// it as stored; the CLI asks before it creates a database for the account.
func CheckAccountName(name string) (string, error) {
	n, problem := domain.CheckName(name)
	if problem != domain.NameOK {
		return "", domain.Errorf(domain.CodeInvalidValue, "an account name is 1 to %d characters of text, with a visible character and no control characters", domain.MaxNameLength)
	}
	return n, nil
}

// CreateAccount makes an active account named name (the name rule applies).
func (s *Service) CreateAccount(ctx context.Context, name string) (domain.Account, error) {
	n, err := CheckAccountName(name)
	if err != nil {
		return domain.Account{}, err
	}
	now := s.stamp()
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: n, Active: true, CreatedAt: now}
	if err := s.store.CreateAccount(ctx, a); err != nil {
		return domain.Account{}, fmt.Errorf("create account: %w", err)
	}
	return a, nil
}

// Account returns the account with its features; not_found otherwise.
func (s *Service) Account(ctx context.Context, id string) (domain.Account, error) {
	a, err := s.store.GetAccount(ctx, id)
	return a, accountErr(id, "get account", err)
}

// accountErr is not_found for a store's ErrNotFound about account id, and
// any other store error wrapped with what was being done.
func accountErr(id, doing string, err error) error {
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return domain.Errorf(domain.CodeNotFound, "no account %q", id)
	case err != nil:
		return fmt.Errorf("%s: %w", doing, err)
	}
	return nil
}

// SetActive activates or deactivates an account: its keys stop (or start
// again) authenticating on their next request.
func (s *Service) SetActive(ctx context.Context, id string, active bool) error {
	return accountErr(id, "set account active", s.store.SetAccountActive(ctx, id, active))
}

// SetFeature switches a feature of the account on or off; the name must
// be one of domain.Features.
func (s *Service) SetFeature(ctx context.Context, id, feature string, on bool) error {
	f := domain.Feature(feature)
	if !slices.Contains(domain.Features, f) {
		return domain.Errorf(domain.CodeInvalidValue, "unknown feature %q (known: ai-answers)", feature)
	}
	return accountErr(id, "set feature", s.store.SetAccountFeature(ctx, id, f, on))
}

// Rename gives account id a new name (the name rule of CreateAccount
// applies), audited with the old and the new name. by is the console's
// Owner of that account; nil is the CLI (support), shown as "support".
// Anyone else gets access_denied. It returns the name as stored.
func (s *Service) Rename(ctx context.Context, by *domain.User, id, name string) (string, error) {
	if by != nil && (!by.Active || by.Role != domain.RoleOwner || by.AccountID != id) {
		return "", domain.Errorf(domain.CodeAccessDenied, "only the account's Owners rename it")
	}
	n, err := CheckAccountName(name)
	if err != nil {
		return "", err
	}
	_, err = s.store.RenameAccount(ctx, id, n, func(old string) domain.AuditEvent {
		return s.event(by, "support", domain.User{AccountID: id}, domain.AuditAccountRenamed,
			strconv.Quote(old)+" → "+strconv.Quote(n))
	})
	return n, accountErr(id, "rename account", err)
}

// CheckEmail is the email rule, in this order: UTF-8 as sent, then
// trimmed, a bare address (no display name, nothing around it) of at most
// MaxEmailLength bytes. It returns the normalized form users are stored
// and found by. Checking before lower-casing matters: lower-casing turns
// bytes that are not UTF-8 into U+FFFD, an address never given.
func CheckEmail(s string) (string, error) {
	t := strings.TrimSpace(s)
	a, err := mail.ParseAddress(t)
	if !utf8.ValidString(s) || err != nil || a.Name != "" || a.Address != t || len(t) > MaxEmailLength {
		return "", domain.FieldErr(domain.CodeInvalidValue, "email", fmt.Sprintf("%q is not an email address", strings.ToValidUTF8(t, "\uFFFD")))
	}
	return domain.NormalizeEmail(t), nil
}

// NewUser describes a user to create.
type NewUser struct {
	AccountID string
	Email     string
	Role      string
	// Password is asked for only once the role and email are known to be
	// good (the CLI reads it from standard input); it must pass
	// password.Check.
	Password func() (string, error)
	// MustChangePassword makes the user choose a password at first sign-in.
	MustChangePassword bool
	// events, when set, makes the audit events stored with the user.
	events func(domain.User) []domain.AuditEvent
}

// CreateUser checks role, email and password in that order, then the
// account, and creates an active user; duplicate_value (with the holder's
// id) when the email is taken, in any account.
func (s *Service) CreateUser(ctx context.Context, u NewUser) (domain.User, error) {
	role, ok := domain.ParseRole(u.Role)
	if !ok {
		return domain.User{}, domain.FieldErr(domain.CodeInvalidValue, "role", "role must be owner, admin or agent")
	}
	email, err := CheckEmail(u.Email)
	if err != nil {
		return domain.User{}, err
	}
	pw, err := u.Password()
	if err != nil {
		return domain.User{}, err
	}
	if err := password.Check(pw); err != nil {
		return domain.User{}, domain.Errorf(domain.CodeInvalidValue, "%s", err.Error())
	}
	hash, err := s.hash(ctx, pw)
	if err != nil {
		return domain.User{}, fmt.Errorf("hash password: %w", err)
	}
	if _, err := s.Account(ctx, u.AccountID); err != nil {
		return domain.User{}, err
	}
	now := s.stamp()
	user := domain.User{
		ID: domain.NewID(domain.PrefixUser, now), AccountID: u.AccountID, Email: email,
		Role: role, PasswordHash: hash, MustChangePassword: u.MustChangePassword, Active: true, CreatedAt: now,
	}
	var events []domain.AuditEvent
	if u.events != nil {
		events = u.events(user)
	}
	err = s.store.CreateUser(ctx, user, events...)
	var dup *domain.DuplicateError
	if errors.As(err, &dup) {
		e := domain.FieldErr(domain.CodeDuplicateValue, "email", fmt.Sprintf("a user with email %s already exists (%s)", email, dup.ExistingID))
		e.ExistingID = dup.ExistingID
		return domain.User{}, e
	}
	if err != nil {
		return domain.User{}, fmt.Errorf("create user: %w", err)
	}
	return user, nil
}

// Invite creates a user with a one-time password, returned once, which
// they must replace at first sign-in: there is no mail, so whoever invites
// hands it over. The invitation joins the account's audit trail, by by
// (nil: the system, at first start).
func (s *Service) Invite(ctx context.Context, by *domain.User, accountID, email, role string) (domain.User, string, error) {
	if err := checkOwner(by, accountID); err != nil {
		return domain.User{}, "", err
	}
	oneTime := rand.Text()
	u, err := s.CreateUser(ctx, NewUser{
		AccountID: accountID, Email: email, Role: role, MustChangePassword: true,
		Password: func() (string, error) { return oneTime, nil },
		events: func(u domain.User) []domain.AuditEvent {
			return []domain.AuditEvent{s.event(by, system, u, domain.AuditUserInvited, u.Email+" as "+string(u.Role))}
		},
	})
	if err != nil {
		return domain.User{}, "", err
	}
	return u, oneTime, nil
}

// Who changed a user, when not a signed-in user: the operator CLI, or the
// first start.
const (
	support = "support"
	system  = "system"
)

// event is an audit event of u's account, by by (else nobody, shown as
// what), naming no key.
func (s *Service) event(by *domain.User, what string, u domain.User, action domain.AuditAction, detail string) domain.AuditEvent {
	now := s.stamp()
	ev := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, now), AccountID: u.AccountID,
		Action: action, Actor: what, Detail: detail, CreatedAt: now}
	if by != nil {
		ev.ActorID, ev.Actor = by.ID, by.Email
	}
	return ev
}

// checkOwner lets an active Owner of the account (or the CLI: by nil)
// manage its users; anyone else gets access_denied.
func checkOwner(by *domain.User, accountID string) error {
	if by != nil && (!by.Active || by.Role != domain.RoleOwner || by.AccountID != accountID) {
		return domain.Errorf(domain.CodeAccessDenied, "only the account's Owners manage its users")
	}
	return nil
}

// User returns a user of the account; not_found for anyone else.
func (s *Service) User(ctx context.Context, accountID, userID string) (domain.User, error) {
	u, err := s.store.GetUser(ctx, userID)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && u.AccountID != accountID) {
		return domain.User{}, noUser(accountID, userID)
	}
	if err != nil {
		return domain.User{}, fmt.Errorf("get user: %w", err)
	}
	return u, nil
}

// MayChange is nil when by may make the change called what to the user:
// by is an Owner of the account (or nil, the CLI) and not that user, as
// another Owner must deactivate them, reset their password or change
// their role. The console asks it before it offers the change.
func MayChange(by *domain.User, accountID, userID, what string) error {
	if err := checkOwner(by, accountID); err != nil {
		return err
	}
	if by != nil && by.ID == userID {
		return domain.Errorf(domain.CodeInconsistentState, "you cannot %s yourself; another Owner can", what)
	}
	return nil
}

func noUser(accountID, userID string) error {
	return domain.Errorf(domain.CodeNotFound, "no user %q in account %s", userID, accountID)
}

// update applies ch to a user of the account, recording action with
// detail(before) by by (nil: support), and returns the user as they were.
// A change that would leave no active Owner is inconsistent_state on field.
func (s *Service) update(ctx context.Context, by *domain.User, accountID, userID string, ch store.UserChange,
	action domain.AuditAction, detail func(before domain.User) string, field string) (domain.User, error) {
	before, err := s.store.UpdateUser(ctx, accountID, userID, ch, func(before domain.User) domain.AuditEvent {
		return s.event(by, support, before, action, detail(before))
	})
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return before, noUser(accountID, userID)
	case errors.Is(err, store.ErrLastOwner):
		return before, domain.FieldErr(domain.CodeInconsistentState, field,
			"an account keeps at least one active Owner: make another user Owner first")
	case err != nil:
		return before, fmt.Errorf("update user: %w", err)
	}
	return before, nil
}

// SetRole gives a user of the account another role (owner, admin or
// agent); the account keeps at least one active Owner. It returns the
// user as they were.
func (s *Service) SetRole(ctx context.Context, by *domain.User, accountID, userID, role string) (domain.User, error) {
	r, ok := domain.ParseRole(role)
	if !ok {
		return domain.User{}, domain.FieldErr(domain.CodeInvalidValue, "role", "role must be owner, admin or agent")
	}
	if err := MayChange(by, accountID, userID, "change the role of"); err != nil {
		return domain.User{}, err
	}
	// A deactivated user comes back with the role they had (ReactivateUser).
	if err := s.mustBeActive(ctx, accountID, userID); err != nil {
		return domain.User{}, err
	}
	return s.update(ctx, by, accountID, userID, store.UserChange{Role: r}, domain.AuditUserRoleChanged,
		func(u domain.User) string { return fmt.Sprintf("%s: %s → %s", u.Email, u.Role, r) }, "role")
}

// DeactivateUser stops a user of the account from signing in and ends
// their sessions; not_found unless the user is in the account, and the
// account keeps at least one active Owner.
func (s *Service) DeactivateUser(ctx context.Context, by *domain.User, accountID, userID string) error {
	if err := MayChange(by, accountID, userID, "deactivate"); err != nil {
		return err
	}
	off := false
	_, err := s.update(ctx, by, accountID, userID, store.UserChange{Active: &off}, domain.AuditUserDeactivated,
		func(u domain.User) string { return u.Email }, "")
	return err
}

// ReactivateUser lets a deactivated user of the account sign in again,
// with the role and password they had.
func (s *Service) ReactivateUser(ctx context.Context, by *domain.User, accountID, userID string) error {
	if err := checkOwner(by, accountID); err != nil {
		return err
	}
	on := true
	_, err := s.update(ctx, by, accountID, userID, store.UserChange{Active: &on}, domain.AuditUserReactivated,
		func(u domain.User) string { return u.Email }, "")
	return err
}

// mustBeActive is inconsistent_state when the user of the account is
// deactivated: what changes them waits until they are reactivated.
func (s *Service) mustBeActive(ctx context.Context, accountID, userID string) error {
	u, err := s.User(ctx, accountID, userID)
	if err == nil && !u.Active {
		// Not the email: a message may be capitalised, and the email is
		// the user's text, shown only where it can be isolated.
		err = domain.Errorf(domain.CodeInconsistentState, "this user is deactivated: reactivate them first")
	}
	return err
}

// ResetPassword gives an active user of the account a new one-time
// password, returned once, which they must replace at next sign-in (as an
// invitation's); their sessions end and the old password stops working.
func (s *Service) ResetPassword(ctx context.Context, by *domain.User, accountID, userID string) (domain.User, string, error) {
	if err := MayChange(by, accountID, userID, "reset the password of"); err != nil {
		return domain.User{}, "", err
	}
	if err := s.mustBeActive(ctx, accountID, userID); err != nil {
		return domain.User{}, "", err
	}
	oneTime := rand.Text()
	hash, err := s.hash(ctx, oneTime)
	if err != nil {
		return domain.User{}, "", fmt.Errorf("hash password: %w", err)
	}
	u, err := s.update(ctx, by, accountID, userID, store.UserChange{PasswordHash: hash}, domain.AuditUserPasswordReset,
		func(u domain.User) string { return u.Email + ": new one-time password" }, "")
	if err != nil {
		return domain.User{}, "", err
	}
	return u, oneTime, nil
}

// ResetPasswordByEmail is ResetPassword for the operator CLI, which names
// the user by email; not_found unless that user is in the account.
func (s *Service) ResetPasswordByEmail(ctx context.Context, accountID, email string) (domain.User, string, error) {
	e, err := CheckEmail(email)
	if err != nil {
		return domain.User{}, "", err
	}
	u, err := s.store.GetUserByEmail(ctx, e)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && u.AccountID != accountID) {
		return domain.User{}, "", domain.Errorf(domain.CodeNotFound, "no user %s in account %s", e, accountID)
	}
	if err != nil {
		return domain.User{}, "", fmt.Errorf("get user: %w", err)
	}
	return s.ResetPassword(ctx, nil, accountID, u.ID)
}

// FirstOwnerEmail signs in to the console on a fresh install.
const FirstOwnerEmail = "owner@localhost"

// First is what the first start created: the account, its Owner, and the
// Owner's one-time password, which exists only here. NoAccount is a
// PostgreSQL store without any account, where nothing is created.
type First struct {
	Account   domain.Account
	Owner     domain.User
	Password  string
	NoAccount bool
}

// Bootstrap makes a fresh SQLite database usable: when it has no account
// it creates one and its Owner (FirstOwnerEmail) with a one-time password.
// Instances starting together on one empty database agree on a single
// winner; the others, and any start on a database with accounts, get
// false. A PostgreSQL store is production's: no one-time password may
// reach its logs, so nothing is created there (operators use the CLI) and
// an empty one is reported as First.NoAccount.
func (s *Service) Bootstrap(ctx context.Context) (First, bool, error) {
	n, err := s.store.CountAccounts(ctx)
	if err != nil {
		return First{}, false, fmt.Errorf("count accounts: %w", err)
	}
	if n > 0 {
		return First{}, false, nil
	}
	if s.store.Engine() == store.EnginePostgres {
		return First{NoAccount: true}, false, nil
	}
	won, err := s.store.Claim(ctx, "bootstrap")
	if err != nil || !won {
		return First{}, false, err
	}
	acct, err := s.CreateAccount(ctx, "My account")
	if err != nil {
		return First{}, false, fmt.Errorf("create first account: %w", err)
	}
	owner, pw, err := s.Invite(ctx, nil, acct.ID, FirstOwnerEmail, string(domain.RoleOwner))
	if err != nil {
		return First{}, false, fmt.Errorf("create first owner: %w", err)
	}
	return First{Account: acct, Owner: owner, Password: pw}, true, nil
}
