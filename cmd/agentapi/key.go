package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

func keyCreate(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key create")
	account := fs.String("account", "", "the account id")
	as := fs.String("as", "", "email of an Owner or Admin of the account, on whose behalf the key is created")
	name := fs.String("name", "", "the key's label")
	desc := fs.String("description", "", "free text")
	preset := fs.String("preset", "", "aiagent-read, aiagent-query or full-access")
	scopes := fs.String("scopes", "", "comma-separated scopes (instead of --preset)")
	agentIDs := fs.String("agents", "", "comma-separated AI agent ids the key is restricted to")
	allowedIPs := fs.String("allowed-ips", "", "comma-separated IP addresses and CIDR prefixes the key may be used from (at most 50; default: any; required when the account's key policy says so)")
	expires := fs.String("expires-at", "", "RFC 3339 time at which the key expires (required, within its maximum, when the account's key policy sets a maximum lifetime)")
	rate := fs.Int("rate-limit", domain.DefaultRateLimitPerMinute, "requests per minute")
	credEnv := fs.String("env", "live", "credential environment: live or test")
	asJSON := fs.Bool("json", false, "print one JSON object with id, prefix and credential")
	if _, err := parse(fs, args, "--account", "--as", "--name"); err != nil {
		return err
	}
	// The flags are checked in the order of the command's help.
	p := keys.CreateParams{AccountID: *account, Name: *name, Description: *desc, RateLimit: *rate}
	var err error
	if p.Scopes, err = scopesFlags(*preset, *scopes); err != nil {
		return err
	}
	// --agents given, even empty, asks for a restriction: an empty list
	// ("--agents ''", a shell variable that was not set) is refused by
	// validation rather than read as no restriction at all.
	if given(fs, "agents") {
		p.AgentIDs = strings.Split(*agentIDs, ",")
	}
	if p.AllowedIPs, err = allowedIPsFlag(fs, *allowedIPs); err != nil {
		return err
	}
	if p.ExpiresAt, err = expiresFlag(*expires); err != nil {
		return err
	}
	ev, ok := domain.ParseEnv(*credEnv)
	if !ok {
		return fmt.Errorf("%w: --env must be live or test (got %q)", errUsage, *credEnv)
	}
	p.Env = ev
	if *rate < 1 || *rate > domain.MaxRateLimitPerMinute {
		return badValue("rate-limit", strconv.Itoa(*rate))
	}
	return asManager(ctx, e.openExisting, *db, *account, *as, func(svc *keys.Service, actor keys.Actor) error {
		c, err := svc.Create(ctx, actor, p)
		if err != nil {
			return flagsOf(err)
		}
		return handOver(ctx, e, svc, actor, c, *asJSON)
	})
}

// createFlags are key create's flags by the field a refusal names.
var createFlags = map[string]string{"expires_at": "--expires-at", "allowed_ips": "--allowed-ips"}

// flagsOf words a refusal of the fields of createFlags (the account's key
// policy: docs/operator-cli.md, Key policy) by flag, on one line:
// "--expires-at: a key needs an expiry within 90 days (…)". Any other
// error is returned as it is.
func flagsOf(err error) error {
	var de *domain.Error
	if !errors.As(err, &de) || len(de.Fields) == 0 {
		return err
	}
	parts := make([]string, 0, len(de.Fields))
	for _, f := range de.Fields {
		flag, ok := createFlags[f.Field]
		if !ok {
			return err
		}
		parts = append(parts, flag+": "+f.Message)
	}
	out := *de
	out.Message = strings.Join(parts, "; ")
	return &out
}

// scopesFlags reads --preset or --scopes: giving both or neither, an
// unknown preset or scope, is a usage error (exit 2).
func scopesFlags(preset, scopes string) ([]domain.Scope, error) {
	if (preset == "") == (scopes == "") {
		return nil, fmt.Errorf("%w: needs exactly one of --preset (aiagent-read, aiagent-query or full-access) or --scopes (comma-separated scopes)", errUsage)
	}
	if scopes != "" {
		list, err := domain.ParseScopes(scopes)
		if err != nil {
			return nil, fmt.Errorf("%w: --scopes: %s (got %q)", errUsage, oneLine(err), scopes)
		}
		return list, nil
	}
	pr, ok := domain.PresetByID(preset)
	if !ok {
		return nil, fmt.Errorf("%w: --preset must be aiagent-read, aiagent-query or full-access (got %q)", errUsage, preset)
	}
	return pr.Scopes, nil
}

// expiresFlag reads --expires-at: nil when it is empty.
func expiresFlag(value string) (*time.Time, error) {
	if value == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return nil, fmt.Errorf("%w: --expires-at must be an RFC 3339 time such as 2027-01-02T15:04:05Z (got %q)", errUsage, value)
	}
	return &t, nil
}

// handOver prints a created key's credential (or, as JSON, its id, prefix
// and credential). Nobody received a credential that could not be written:
// an active key that no one holds must not stay behind (and a script that
// retries would make another), so it is revoked.
func handOver(ctx context.Context, e env, svc *keys.Service, actor keys.Actor, c keys.Created, asJSON bool) error {
	var err error
	if asJSON {
		err = printJSON(e.stdout, map[string]string{"id": c.Key.ID, "prefix": c.Key.Prefix, "credential": c.Credential})
	} else {
		_, err = fmt.Fprintln(e.stdout, c.Credential)
	}
	if err == nil {
		return nil
	}
	if rerr := svc.Revoke(ctx, actor, c.Key.AccountID, c.Key.ID); rerr != nil {
		return fmt.Errorf("the credential could not be written (%v), and key %s could not be revoked (%v): revoke it", err, c.Key.ID, rerr)
	}
	return fmt.Errorf("the credential could not be written (%v); key %s was revoked, as nobody received it", err, c.Key.ID)
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// allowedIPsFlag reads --allowed-ips; a bad entry, more than 50, or the
// flag given with nothing in it (a shell variable that was not set must not
// leave the key usable from anywhere) is a usage error (exit 2).
func allowedIPsFlag(fs *flag.FlagSet, value string) (domain.AllowList, error) {
	if !given(fs, "allowed-ips") {
		return nil, nil
	}
	l, err := domain.ParseAllowList(value)
	if err != nil {
		return nil, fmt.Errorf("%w: --allowed-ips: %s", errUsage, oneLine(err))
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("%w: --allowed-ips is empty; leave the flag out to allow any address", errUsage)
	}
	return l, nil
}

// asManager opens the store with open and runs fn as the account's Owner
// or Admin named by email; anyone else is refused by keys.Service.Manager.
func asManager(ctx context.Context, open func(context.Context, string) (*store.Store, error), db, account, email string, fn func(*keys.Service, keys.Actor) error) error {
	return withStore(ctx, open, db, func(st *store.Store) error {
		svc := keys.New(st, nil)
		u, err := svc.Manager(ctx, account, email)
		if err != nil {
			return err
		}
		return fn(svc, keys.Actor{User: &u})
	})
}

func keyRevoke(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key revoke")
	account := fs.String("account", "", "the account id")
	as := fs.String("as", "", "email of an Owner or Admin of the account")
	pos, err := parse(fs, args, "--account", "--as", "KEY_ID")
	if err != nil {
		return err
	}
	return asManager(ctx, e.openForKeys, *db, *account, *as, func(svc *keys.Service, actor keys.Actor) error {
		if err := svc.Revoke(ctx, actor, *account, pos[0]); err != nil {
			return err
		}
		return changed(e, pos[0], "revoked")
	})
}

func keySetRateLimit(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key set-rate-limit")
	pos, err := parse(fs, args, "KEY_ID", "N")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 1 || n > domain.MaxRateLimitPerMinute {
		return fmt.Errorf("%w: N must be %s (got %q)", errUsage, flagForms["rate-limit"], pos[1])
	}
	return withStore(ctx, e.openForKeys, *db, func(st *store.Store) error {
		if err := keys.New(st, nil).SetRateLimit(ctx, pos[0], n); err != nil {
			return err
		}
		return changed(e, pos[0], "rate_limit_per_minute", strconv.Itoa(n))
	})
}

// keyLine is a key as `key list` prints it: the contract's key object, plus
// what support needs to see. Never the credential or its hash.
type keyLine struct {
	wire.Key
	AccountID  string     `json:"account_id"`
	Env        domain.Env `json:"env"`
	AgentIDs   []string   `json:"agent_ids"`
	AllowedIPs []string   `json:"allowed_ips"`
	Status     string     `json:"status"`
	// AccountActive is false while the account is deactivated: its keys
	// are refused (401) whatever their own status says.
	AccountActive bool    `json:"account_active"`
	CreatedAt     string  `json:"created_at"`
	RevokedAt     *string `json:"revoked_at"`
}

// keyColumns are key list's table; keyDetail is key show's.
var (
	keyColumns = []column[keyLine]{
		{head: "ID", cell: func(k keyLine) string { return k.ID }},
		{head: "NAME", cell: func(k keyLine) string { return k.Name }},
		{head: "PREFIX", cell: func(k keyLine) string { return k.Prefix }},
		{head: "ENV", cell: func(k keyLine) string { return string(k.Env) }},
		{head: "ACCESS", cell: func(k keyLine) string { return access(k.Scopes) }},
		{head: "EXPIRES", cell: func(k keyLine) string { return timeOr(k.ExpiresAt, "never") }},
		{head: "LAST USED", cell: func(k keyLine) string { return timeOr(k.LastUsedAt, "never") }},
		{head: "STATUS", cell: keyStatus},
	}
	keyDetail = []column[keyLine]{
		{head: "ID", cell: func(k keyLine) string { return k.ID }},
		{head: "ACCOUNT", cell: func(k keyLine) string { return k.AccountID }},
		{head: "NAME", cell: func(k keyLine) string { return k.Name }},
		{head: "DESCRIPTION", cell: func(k keyLine) string { return k.Description }},
		{head: "PREFIX", cell: func(k keyLine) string { return k.Prefix }},
		{head: "ENV", cell: func(k keyLine) string { return string(k.Env) }},
		{head: "ACCESS", cell: func(k keyLine) string { return access(k.Scopes) }},
		{head: "SCOPES", cell: func(k keyLine) string { return joinAny(k.Scopes) }},
		{head: "AGENTS", cell: func(k keyLine) string { return orAny(k.AgentIDs) }},
		{head: "ALLOWED IPS", cell: func(k keyLine) string { return orAny(k.AllowedIPs) }},
		{head: "RATE LIMIT", cell: func(k keyLine) string { return strconv.Itoa(k.RateLimitPerMinute) + " a minute" }},
		{head: "EXPIRES", cell: func(k keyLine) string { return timeOr(k.ExpiresAt, "never") }},
		{head: "LAST USED", cell: func(k keyLine) string { return timeOr(k.LastUsedAt, "never") }},
		{head: "STATUS", cell: keyStatus},
		{head: "CREATED", cell: func(k keyLine) string { return shortTime(k.CreatedAt) }},
		{head: "REVOKED", cell: func(k keyLine) string { return timeOr(k.RevokedAt, "") }},
	}
)

// keyStatus is a key's status as a table shows it: an active key of a
// deactivated account is refused all the same, which it says.
func keyStatus(k keyLine) string {
	if !k.AccountActive {
		return k.Status + " (account inactive)"
	}
	return k.Status
}

// newKeyLine is k as key list and key show print it, at now.
func newKeyLine(k domain.APIKey, accountActive bool, now time.Time) keyLine {
	return keyLine{
		Key: wire.Key{ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix, Scopes: k.Scopes,
			RateLimitPerMinute: k.RateLimitPerMinute, LastUsedAt: wire.TimePtr(k.LastUsedAt), ExpiresAt: wire.TimePtr(k.ExpiresAt)},
		AccountID: k.AccountID, Env: k.Env, AgentIDs: nonNil(k.AgentIDs), AllowedIPs: k.AllowedIPs.Strings(), Status: string(k.Status(now)),
		AccountActive: accountActive, CreatedAt: wire.Time(k.CreatedAt), RevokedAt: wire.TimePtr(k.RevokedAt),
	}
}

func keyList(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key list")
	account := fs.String("account", "", "the account id")
	out := e.output(fs)
	if _, err := parse(fs, args, "--account"); err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		ks, err := keys.New(st, nil).List(ctx, *account)
		if err != nil {
			return err
		}
		acct, err := st.GetAccount(ctx, *account)
		if err != nil {
			return fmt.Errorf("get account: %w", err)
		}
		now := time.Now()
		lines := make([]keyLine, len(ks))
		for i, k := range ks {
			lines[i] = newKeyLine(k, acct.Active, now)
		}
		return printList(out, lines, keyColumns)
	})
}

// keyShow prints one key, found by its id alone (support has it from a
// log line or an event): everything key list shows, never a secret.
func keyShow(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key show")
	out := e.output(fs)
	pos, err := parse(fs, args, "KEY_ID")
	if err != nil {
		return err
	}
	return withStore(ctx, e.openExisting, *db, func(st *store.Store) error {
		k, err := st.GetKeyByID(ctx, pos[0])
		if errors.Is(err, domain.ErrNotFound) {
			return domain.Errorf(domain.CodeNotFound, "no API key %q (agentapi key list --account ID lists an account's keys)", pos[0])
		}
		if err != nil {
			return fmt.Errorf("get key: %w", err)
		}
		acct, err := st.GetAccount(ctx, k.AccountID)
		if err != nil {
			return fmt.Errorf("get account: %w", err)
		}
		return printOne(out, newKeyLine(k, acct.Active, time.Now()), keyDetail)
	})
}
