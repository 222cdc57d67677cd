package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// The `agentapi api events` and `agentapi api webhooks` commands
// (docs/client.md): events and webhook endpoints, with webhooks:manage.

// event is e as the API sent it.
func event(e client.Event) wire.Event {
	out := wire.Event{ID: e.ID, Type: domain.EventType(e.Type), CreatedAt: wire.Time(e.CreatedAt), Data: e.Data,
		PreviousAttributes: e.PreviousAttributes, Details: e.Details, RequestID: e.RequestID}
	if e.Source != nil {
		out.Source, _ = json.Marshal(e.Source)
	}
	if e.Reason != "" {
		out.Reason, _ = json.Marshal(e.Reason)
	}
	if e.Actor != nil {
		out.Actor = &domain.EventActor{Type: e.Actor.Type, ID: e.Actor.ID}
	}
	return out
}

// endpoint is e as the API sent it (its secret only when it came).
func endpoint(e client.WebhookEndpoint) wire.WebhookEndpoint {
	return wire.WebhookEndpoint{ID: e.ID, URL: e.URL, Description: e.Description, EnabledEvents: nonNil(e.EnabledEvents),
		Status: e.Status, DisabledReason: e.DisabledReason, CreatedAt: wire.Time(e.CreatedAt), UpdatedAt: wire.Time(e.UpdatedAt),
		Secret: e.Secret, OldSecretExpiresAt: wire.TimePtr(e.OldSecretExpiresAt)}
}

func attempt(a client.WebhookAttempt) wire.WebhookAttempt {
	return wire.WebhookAttempt{ID: a.ID, EventID: a.EventID, EventType: domain.EventType(a.EventType), Attempt: a.Attempt,
		Status: a.Status, ResponseStatus: a.ResponseStatus, Error: a.Error, LatencyMS: a.LatencyMS, ResponseBody: a.ResponseBody,
		CreatedAt: wire.Time(a.CreatedAt), DeliveryStatus: a.DeliveryStatus, NextAttemptAt: wire.TimePtr(a.NextAttemptAt)}
}

// printPage prints a page's items (a table with cols, or a JSON object a
// line), and on stderr the --next that follows it.
func printPage[T, W any](a *apiCommand, p client.ListPage[T], shape func(T) W, cols []column[W], what string) error {
	items := make([]W, len(p.Items))
	for i, it := range p.Items {
		items[i] = shape(it)
	}
	if err := printList(a.out, items, cols); err != nil {
		return err
	}
	if p.HasMore {
		fmt.Fprintf(a.e.stderr, "agentapi: more %s: --next %s\n", what, p.Next)
	}
	return nil
}

// eventListParams reads api events list's flags.
func eventListParams(types, since string, limit int, next string) (client.EventListParams, error) {
	p := client.EventListParams{Limit: limit, Next: next}
	if limit < 0 || limit > 100 {
		return p, badValue("limit", strconv.Itoa(limit))
	}
	if types != "" {
		p.Types = strings.Split(types, ",")
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return p, fmt.Errorf("%w: --since must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q)", errUsage, since)
		}
		p.CreatedSince = t
	}
	return p, nil
}

// apiEventsList prints one page of events, oldest first, and on stderr the
// --next that follows it; --all follows every page.
func apiEventsList(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("events list")
	types := a.fs.String("type", "", "only these event types or families, comma separated (ai_agent.created,api_key.*)")
	since := a.fs.String("since", "", "only events created at or after this RFC 3339 time")
	limit := a.fs.Int("limit", 0, "page size (1-100; default: the server's, 30)")
	next := a.fs.String("next", "", "the page after the one that printed this cursor")
	all := a.fs.Bool("all", false, "print every page")
	if _, err := a.parse(args); err != nil {
		return err
	}
	p, err := eventListParams(*types, *since, *limit, *next)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if *all {
		return printAll(a, c.Events(ctx, p), event, eventColumns)
	}
	page, err := c.ListEvents(ctx, p)
	if err != nil {
		return callErr(err)
	}
	return printPage(a, page, event, eventColumns, "events")
}

// oneID is an `api` command under group that takes one id and prints what
// get returns, in its wire shape.
func oneID[T, W any](group, name string, get func(*client.Client, context.Context, string) (T, error), shape func(T) W, cols []column[W]) command {
	return command{name: name, run: func(ctx context.Context, e env, args []string) error {
		a := e.apiCommand(group + " " + name)
		pos, err := a.parse(args, "ID")
		if err != nil {
			return err
		}
		return callPrint(a, func(c *client.Client) (W, error) {
			v, err := get(c, ctx, pos[0])
			return shape(v), err
		}, cols)
	}}
}

func apiWebhooksList(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("webhooks list")
	if _, err := a.parse(args); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	// An account has at most 16 endpoints: one page of 30 holds them.
	page, err := c.ListWebhookEndpoints(ctx, 0, "")
	if err != nil {
		return callErr(err)
	}
	return printPage(a, page, endpoint, endpointColumns, "endpoints")
}

func apiWebhooksCreate(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("webhooks create")
	// The endpoint's address is an argument: --url is the API's, as in
	// every api command.
	events := a.fs.String("events", "", "event types or families to deliver, comma separated, or * for all")
	desc := a.fs.String("description", "", "free text")
	pos, err := a.parse(args, "URL", "--events")
	if err != nil {
		return err
	}
	p := client.NewWebhookEndpoint{URL: pos[0], EnabledEvents: strings.Split(*events, ","), Description: *desc}
	return callPrint(a, func(c *client.Client) (wire.WebhookEndpoint, error) {
		ep, err := c.CreateWebhookEndpoint(ctx, p)
		return endpoint(ep), err
	}, endpointDetail)
}

func apiWebhooksDelete(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("webhooks delete")
	pos, err := a.parse(args, "ID")
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	return callErr(c.DeleteWebhookEndpoint(ctx, pos[0]))
}

func apiWebhooksRotate(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("webhooks rotate-secret")
	overlap := a.fs.Duration("overlap", 24*time.Hour, "how long the old secret keeps signing deliveries beside the new one (0 to 168h)")
	pos, err := a.parse(args, "ID")
	if err != nil {
		return err
	}
	if *overlap < 0 || *overlap > 168*time.Hour || *overlap%time.Second != 0 {
		return badValue("overlap", overlap.String())
	}
	return callPrint(a, func(c *client.Client) (wire.WebhookEndpoint, error) {
		ep, err := c.RotateWebhookSecret(ctx, pos[0], *overlap)
		return endpoint(ep), err
	}, endpointDetail)
}

func apiWebhooksDeliveries(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("webhooks deliveries")
	status := a.fs.String("status", "", "only attempts that succeeded or failed")
	eventID := a.fs.String("event", "", "only the attempts at delivering this event")
	limit := a.fs.Int("limit", 0, "page size (1-100; default: the server's, 30)")
	next := a.fs.String("next", "", "the page after the one that printed this cursor")
	pos, err := a.parse(args, "ID")
	if err != nil {
		return err
	}
	if *limit < 0 || *limit > 100 {
		return badValue("limit", strconv.Itoa(*limit))
	}
	if *status != "" && *status != "succeeded" && *status != "failed" {
		return fmt.Errorf("%w: --status must be succeeded or failed (got %q)", errUsage, *status)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	page, err := c.ListDeliveries(ctx, pos[0], client.DeliveryListParams{Status: *status, EventID: *eventID, Limit: *limit, Next: *next})
	if err != nil {
		return callErr(err)
	}
	return printPage(a, page, attempt, attemptColumns, "attempts")
}

func apiWebhooksResend(ctx context.Context, e env, args []string) error {
	a := e.apiCommand("webhooks resend")
	pos, err := a.parse(args, "ID", "EVENT_ID")
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	return callErr(c.ResendDelivery(ctx, pos[0], pos[1]))
}

// eventsCommands and webhooksCommands are the api events and api webhooks
// groups.
func eventsCommands() command {
	return command{name: "events", subs: []command{
		{name: "list", run: apiEventsList},
		oneID("events", "get", (*client.Client).GetEvent, event, eventDetail),
	}}
}

func webhooksCommands() command {
	return command{name: "webhooks", subs: []command{
		{name: "list", run: apiWebhooksList},
		{name: "create", run: apiWebhooksCreate},
		oneID("webhooks", "get", (*client.Client).GetWebhookEndpoint, endpoint, endpointDetail),
		{name: "delete", run: apiWebhooksDelete},
		oneID("webhooks", "test", (*client.Client).SendTestEvent, event, eventDetail),
		{name: "rotate-secret", run: apiWebhooksRotate},
		{name: "deliveries", run: apiWebhooksDeliveries},
		{name: "resend", run: apiWebhooksResend},
	}}
}
