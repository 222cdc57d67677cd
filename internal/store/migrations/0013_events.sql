-- Events and webhook delivery (docs/webhooks.md). An event is written in the
-- transaction of the change it records (the outbox), with one delivery row
-- for each of the account's enabled endpoints that subscribes to its type.
-- seq is the account's commit order: a writer takes the next number from
-- event_counters as the last thing it does before committing, holding that
-- row until the commit, so a later number never commits before an earlier
-- one and GET /v1/events' cursor (account, seq) misses nothing.
CREATE TABLE events (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL,
	seq        BIGINT NOT NULL,
	type       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	request_id TEXT NOT NULL DEFAULT '',
	actor_type TEXT NOT NULL DEFAULT '',
	actor_id   TEXT NOT NULL DEFAULT '',
	agent_id   TEXT NOT NULL DEFAULT '',
	data       TEXT NOT NULL,
	previous   TEXT NOT NULL DEFAULT '',
	extra      TEXT NOT NULL DEFAULT '',
	test       BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE UNIQUE INDEX events_account_seq ON events (account_id, seq);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE event_counters (
	account_id TEXT PRIMARY KEY,
	seq        BIGINT NOT NULL
);

CREATE TABLE webhook_endpoints (
	id                    TEXT PRIMARY KEY,
	account_id            TEXT NOT NULL REFERENCES accounts (id),
	url                   TEXT NOT NULL,
	description           TEXT NOT NULL,
	enabled_events        TEXT NOT NULL,
	status                TEXT NOT NULL,
	disabled_reason       TEXT NOT NULL DEFAULT '',
	secret                TEXT NOT NULL,
	old_secret            TEXT NOT NULL DEFAULT '',
	old_secret_expires_at BIGINT,
	failing_since         BIGINT,
	created_at            BIGINT NOT NULL,
	updated_at            BIGINT NOT NULL
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at, id);

-- One row per (endpoint, event): its state and the lease of the attempt in
-- flight. An instance claims due rows with a lease (lease_until) and a
-- token; an instance killed mid-attempt leaves the lease to run out.
CREATE TABLE webhook_deliveries (
	endpoint_id     TEXT NOT NULL,
	event_id        TEXT NOT NULL,
	account_id      TEXT NOT NULL,
	status          TEXT NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at BIGINT NOT NULL,
	lease_until     BIGINT NOT NULL DEFAULT 0,
	lease_token     TEXT NOT NULL DEFAULT '',
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, status, next_attempt_at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

CREATE TABLE webhook_attempts (
	id              TEXT PRIMARY KEY,
	endpoint_id     TEXT NOT NULL,
	event_id        TEXT NOT NULL,
	attempt         INTEGER NOT NULL,
	status          TEXT NOT NULL,
	response_status INTEGER NOT NULL,
	error           TEXT NOT NULL,
	latency_ms      BIGINT NOT NULL,
	response_body   TEXT NOT NULL,
	created_at      BIGINT NOT NULL
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, created_at, id);
CREATE INDEX webhook_attempts_event ON webhook_attempts (endpoint_id, event_id, created_at);
