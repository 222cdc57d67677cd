-- Notice emails (docs/webhooks.md, Email): one row per mailed event,
-- written in the transaction of the event itself (the outbox), only while
-- serve sends mail (--smtp-url). An instance claims due rows with a lease
-- (lease_until) and a token, resolves the recipients (the account's active
-- Owners and Admins) when it sends, and notes in sent_to each user mailed,
-- so that a retry mails only those not yet reached. Rows are deleted with
-- the events, after 30 days.
CREATE TABLE mail_deliveries (
	event_id        TEXT PRIMARY KEY,
	account_id      TEXT NOT NULL,
	status          TEXT NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at BIGINT NOT NULL,
	lease_until     BIGINT NOT NULL DEFAULT 0,
	lease_token     TEXT NOT NULL DEFAULT '',
	sent_to         TEXT NOT NULL DEFAULT '',
	last_error      TEXT NOT NULL DEFAULT '',
	created_at      BIGINT NOT NULL
);
CREATE INDEX mail_deliveries_due ON mail_deliveries (status, next_attempt_at);
CREATE INDEX mail_deliveries_created ON mail_deliveries (created_at);
