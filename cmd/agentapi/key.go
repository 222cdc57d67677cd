package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/wire"
)

func keyCmd(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: key needs a subcommand: create, revoke, set-rate-limit or list", errUsage)
	}
	switch args[0] {
	case "create":
		return keyCreate(ctx, e, args[1:])
	case "revoke":
		return keyRevoke(ctx, e, args[1:])
	case "set-rate-limit":
		return keySetRateLimit(ctx, e, args[1:])
	case "list":
		return keyList(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: unknown key subcommand %q", errUsage, args[0])
}

func keyCreate(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key create")
	account := fs.String("account", "", "the account id")
	as := fs.String("as", "", "email of an Owner or Admin of the account, on whose behalf the key is created")
	name := fs.String("name", "", "the key's label")
	desc := fs.String("description", "", "free text")
	preset := fs.String("preset", "", "aiagent-read, aiagent-query or full-access")
	scopes := fs.String("scopes", "", "comma-separated scopes (instead of --preset)")
	agents := fs.String("agents", "", "comma-separated AI agent ids the key is restricted to")
	allowedIPs := fs.String("allowed-ips", "", "comma-separated IP addresses and CIDR prefixes the key may be used from (at most 50; default: any)")
	expires := fs.String("expires-at", "", "RFC 3339 time at which the key expires")
	rate := fs.Int("rate-limit", domain.DefaultRateLimitPerMinute, "requests per minute")
	envName := fs.String("env", "live", "credential environment: live or test")
	asJSON := fs.Bool("json", false, "print one JSON object with id, prefix and credential")
	_, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := required(fs, "account", "as", "name"); err != nil {
		return err
	}
	if (*preset == "") == (*scopes == "") {
		return fmt.Errorf("%w: key create needs exactly one of --preset or --scopes", errUsage)
	}
	p := keys.CreateParams{AccountID: *account, Name: *name, Description: *desc, RateLimit: *rate}
	if *preset != "" {
		pr, ok := domain.PresetByID(*preset)
		if !ok {
			return domain.Errorf(domain.CodeInvalidValue, "unknown preset %q (aiagent-read, aiagent-query, full-access)", *preset)
		}
		p.Scopes = pr.Scopes
	} else {
		sc, err := domain.ParseScopes(*scopes)
		if err != nil {
			return err
		}
		p.Scopes = sc
	}
	// --agents given, even empty, asks for a restriction: an empty list
	// ("--agents ''", a shell variable that was not set) is refused by
	// validation rather than read as no restriction at all.
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "agents" {
			p.AgentIDs = strings.Split(*agents, ",")
		}
	})
	if p.AllowedIPs, err = allowedIPsFlag(fs, *allowedIPs); err != nil {
		return err
	}
	if *expires != "" {
		t, err := time.Parse(time.RFC3339Nano, *expires)
		if err != nil {
			return domain.Errorf(domain.CodeInvalidValue, "--expires-at must be an RFC 3339 time such as 2027-01-02T15:04:05Z")
		}
		p.ExpiresAt = &t
	}
	ev, ok := domain.ParseEnv(*envName)
	if !ok {
		return domain.Errorf(domain.CodeInvalidValue, "--env must be live or test")
	}
	p.Env = ev
	if *rate < 1 {
		return domain.Errorf(domain.CodeInvalidValue, "--rate-limit must be a positive number of requests a minute")
	}

	return asManager(ctx, *db, *account, *as, func(svc *keys.Service, actor keys.Actor) error {
		c, err := svc.Create(ctx, actor, p)
		if err != nil {
			return err
		}
		if *asJSON {
			err = json.NewEncoder(e.stdout).Encode(map[string]string{"id": c.Key.ID, "prefix": c.Key.Prefix, "credential": c.Credential})
		} else {
			_, err = fmt.Fprintln(e.stdout, c.Credential)
		}
		if err != nil {
			// Nobody received the credential: an active key that no one
			// holds must not stay behind (and a script that retries
			// would make another).
			if rerr := svc.Revoke(ctx, actor, *account, c.Key.ID); rerr != nil {
				return fmt.Errorf("the credential could not be written (%v), and key %s could not be revoked (%v): revoke it", err, c.Key.ID, rerr)
			}
			return fmt.Errorf("the credential could not be written (%v); key %s was revoked, as nobody received it", err, c.Key.ID)
		}
		return nil
	})
}

// allowedIPsFlag reads --allowed-ips; a bad entry, more than 50, or the
// flag given with nothing in it (a shell variable that was not set must not
// leave the key usable from anywhere) is a usage error (exit 2).
func allowedIPsFlag(fs *flag.FlagSet, value string) (domain.AllowList, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "allowed-ips" })
	if !given {
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

// asManager opens the store and runs fn as the account's Owner or Admin
// named by email; anyone else is refused by keys.Service.Manager.
func asManager(ctx context.Context, db, account, email string, fn func(*keys.Service, keys.Actor) error) error {
	st, err := openExisting(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	svc := keys.New(st, nil)
	u, err := svc.Manager(ctx, account, email)
	if err != nil {
		return err
	}
	return fn(svc, keys.Actor{User: &u})
}

func keyRevoke(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key revoke")
	account := fs.String("account", "", "the account id")
	as := fs.String("as", "", "email of an Owner or Admin of the account")
	pos, err := parse(fs, args, "KEY_ID")
	if err != nil {
		return err
	}
	if err := required(fs, "account", "as"); err != nil {
		return err
	}
	return asManager(ctx, *db, *account, *as, func(svc *keys.Service, actor keys.Actor) error {
		return svc.Revoke(ctx, actor, *account, pos[0])
	})
}

func keySetRateLimit(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key set-rate-limit")
	pos, err := parse(fs, args, "KEY_ID", "N")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil {
		return domain.Errorf(domain.CodeInvalidValue, "N must be a whole number of requests a minute, not %q", pos[1])
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	return keys.New(st, nil).SetRateLimit(ctx, pos[0], n)
}

// keyLine is a key as `key list` prints it: the contract's key object, plus
// what support needs to see. Never the credential or its hash.
type keyLine struct {
	wire.Key
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

func keyList(ctx context.Context, e env, args []string) error {
	fs, db := e.flags("key list")
	account := fs.String("account", "", "the account id")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "account"); err != nil {
		return err
	}
	st, err := openExisting(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	ks, err := keys.New(st, nil).List(ctx, *account)
	if err != nil {
		return err
	}
	acct, err := st.GetAccount(ctx, *account)
	if err != nil {
		return fmt.Errorf("get account: %w", err)
	}
	enc := json.NewEncoder(e.stdout)
	now := time.Now()
	for _, k := range ks {
		agents := k.AgentIDs
		if agents == nil {
			agents = []string{}
		}
		if err := enc.Encode(keyLine{
			Key: wire.Key{ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix, Scopes: k.Scopes,
				RateLimitPerMinute: k.RateLimitPerMinute, LastUsedAt: timePtr(k.LastUsedAt), ExpiresAt: timePtr(k.ExpiresAt)},
			Env: k.Env, AgentIDs: agents, AllowedIPs: k.AllowedIPs.Strings(), Status: string(k.Status(now)), AccountActive: acct.Active, CreatedAt: formatTime(k.CreatedAt), RevokedAt: timePtr(k.RevokedAt),
		}); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// formatTime matches the API's timestamps: RFC 3339, UTC, milliseconds, Z.
func formatTime(t time.Time) string { return wire.Time(t) }

func timePtr(t *time.Time) *string { return wire.TimePtr(t) }
