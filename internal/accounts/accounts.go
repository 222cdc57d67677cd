// Package accounts owns accounts and their users: creating an account,
// switching it on and off and its features, creating and inviting users
// with the email rule applied in one order, deactivating them, and the
// first start's account and Owner. The operator CLI and serve's first start
// go through Service (the console will too); the password hash comes from
// whatever the caller passes, so the console can keep its capped gate.
package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/mail"
	"slices"
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
	if errors.Is(err, domain.ErrNotFound) {
		return a, notFound(id)
	}
	if err != nil {
		return a, fmt.Errorf("get account: %w", err)
	}
	return a, nil
}

func notFound(id string) error { return domain.Errorf(domain.CodeNotFound, "no account %q", id) }

// SetActive activates or deactivates an account: its keys stop (or start
// again) authenticating on their next request.
func (s *Service) SetActive(ctx context.Context, id string, active bool) error {
	err := s.store.SetAccountActive(ctx, id, active)
	if errors.Is(err, domain.ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("set account active: %w", err)
	}
	return nil
}

// SetFeature switches a feature of the account on or off; the name must
// be one of domain.Features.
func (s *Service) SetFeature(ctx context.Context, id, feature string, on bool) error {
	f := domain.Feature(feature)
	if !slices.Contains(domain.Features, f) {
		return domain.Errorf(domain.CodeInvalidValue, "unknown feature %q (known: ai-answers)", feature)
	}
	err := s.store.SetAccountFeature(ctx, id, f, on)
	if errors.Is(err, domain.ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("set feature: %w", err)
	}
	return nil
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
		msg := fmt.Sprintf("%q is not an email address", strings.ToValidUTF8(t, "\uFFFD"))
		return "", &domain.Error{Code: domain.CodeInvalidValue, Message: msg,
			Fields: []domain.FieldError{{Field: "email", Code: domain.CodeInvalidValue, Message: msg}}}
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
}

// CreateUser checks role, email and password in that order, then the
// account, and creates an active user; duplicate_value (with the holder's
// id) when the email is taken, in any account.
func (s *Service) CreateUser(ctx context.Context, u NewUser) (domain.User, error) {
	role, ok := domain.ParseRole(u.Role)
	if !ok {
		return domain.User{}, domain.Errorf(domain.CodeInvalidValue, "role must be owner, admin or agent")
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
	err = s.store.CreateUser(ctx, user)
	var dup *domain.DuplicateError
	if errors.As(err, &dup) {
		msg := fmt.Sprintf("a user with email %s already exists (%s)", email, dup.ExistingID)
		return domain.User{}, &domain.Error{Code: domain.CodeDuplicateValue, Message: msg, ExistingID: dup.ExistingID,
			Fields: []domain.FieldError{{Field: "email", Code: domain.CodeDuplicateValue, Message: msg}}}
	}
	if err != nil {
		return domain.User{}, fmt.Errorf("create user: %w", err)
	}
	return user, nil
}

// Invite creates a user with a one-time password, returned once, which
// they must replace at first sign-in: there is no mail, so whoever invites
// hands it over.
func (s *Service) Invite(ctx context.Context, accountID, email, role string) (domain.User, string, error) {
	oneTime := rand.Text()
	u, err := s.CreateUser(ctx, NewUser{
		AccountID: accountID, Email: email, Role: role, MustChangePassword: true,
		Password: func() (string, error) { return oneTime, nil },
	})
	if err != nil {
		return domain.User{}, "", err
	}
	return u, oneTime, nil
}

// DeactivateUser stops a user of the account from signing in and ends
// their sessions; not_found unless the user is in the account.
func (s *Service) DeactivateUser(ctx context.Context, accountID, userID string) error {
	err := s.store.DeactivateUser(ctx, accountID, userID)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Errorf(domain.CodeNotFound, "no user %q in account %s", userID, accountID)
	}
	if err != nil {
		return fmt.Errorf("deactivate user: %w", err)
	}
	return nil
}

// FirstOwnerEmail signs in to the console on a fresh install.
const FirstOwnerEmail = "owner@localhost"

// First is what the first start created: the account, its Owner, and the
// Owner's one-time password, which exists only here.
type First struct {
	Account  domain.Account
	Owner    domain.User
	Password string
}

// Bootstrap makes a fresh database usable: when it has no account it
// creates one and its Owner (FirstOwnerEmail) with a one-time password.
// Instances starting together on one empty database agree on a single
// winner; the others, and any start on a database with accounts, get
// false.
func (s *Service) Bootstrap(ctx context.Context) (First, bool, error) {
	n, err := s.store.CountAccounts(ctx)
	if err != nil {
		return First{}, false, fmt.Errorf("count accounts: %w", err)
	}
	if n > 0 {
		return First{}, false, nil
	}
	won, err := s.store.Claim(ctx, "bootstrap")
	if err != nil || !won {
		return First{}, false, err
	}
	acct, err := s.CreateAccount(ctx, "My account")
	if err != nil {
		return First{}, false, fmt.Errorf("create first account: %w", err)
	}
	owner, pw, err := s.Invite(ctx, acct.ID, FirstOwnerEmail, string(domain.RoleOwner))
	if err != nil {
		return First{}, false, fmt.Errorf("create first owner: %w", err)
	}
	return First{Account: acct, Owner: owner, Password: pw}, true, nil
}
