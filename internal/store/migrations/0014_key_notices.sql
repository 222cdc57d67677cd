-- Time-based key events (docs/webhooks.md, Event types): one row per key
-- and notice (expiring_7d, expiring_1d, expired) once its event is written,
-- so that however many instances sweep, each is written exactly once: the
-- primary key, not a lock, decides.
CREATE TABLE key_notices (
	key_id     TEXT NOT NULL,
	kind       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (key_id, kind)
);
CREATE INDEX api_keys_expires ON api_keys (expires_at);
