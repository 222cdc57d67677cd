-- Idempotency-Key (docs/api.md, Idempotent requests): one row per key an
-- account sent on POST /v1/ai-agents or POST .../questions, kept 24 hours
-- (expires_at) and then swept.
--
-- A row is first a reservation (status 0): the request holding owner runs,
-- and lease_until bounds how long a reservation left behind by an instance
-- that died may block its key. It then holds the saved response (status,
-- location, body) that later requests with the same key and request_hash
-- (SHA-256 of method, path and body) get back; streamed marks the outcome
-- of a streamed question, replayed as events rather than as JSON.
CREATE TABLE idempotency_keys (
	account_id   TEXT NOT NULL REFERENCES accounts (id),
	idem_key     TEXT NOT NULL,
	request_hash BYTEA NOT NULL,
	owner        TEXT NOT NULL,
	lease_until  BIGINT NOT NULL,
	status       BIGINT NOT NULL,
	location     TEXT NOT NULL,
	body         BYTEA NOT NULL,
	streamed     BOOLEAN NOT NULL,
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	PRIMARY KEY (account_id, idem_key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
