-- The first schema. One file serves both engines, so it keeps to what
-- SQLite and PostgreSQL read alike: TEXT, BIGINT, BOOLEAN and BYTEA.
-- SQLite gives BOOLEAN and BYTEA numeric affinity, which stores the 0/1
-- integers and the blobs the store binds unchanged.
--
-- Every time is BIGINT Unix milliseconds, UTC. Lists that are read whole
-- with their row (key scopes, account features) are space-separated TEXT;
-- a key's agent restriction is a table because queries filter by it.

CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	active     BOOLEAN NOT NULL,
	features   TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL
);

CREATE TABLE users (
	id                   TEXT PRIMARY KEY,
	account_id           TEXT NOT NULL REFERENCES accounts (id),
	email                TEXT NOT NULL UNIQUE,
	role                 TEXT NOT NULL,
	password_hash        TEXT NOT NULL,
	must_change_password BOOLEAN NOT NULL,
	active               BOOLEAN NOT NULL,
	created_at           BIGINT NOT NULL
);
CREATE INDEX users_account ON users (account_id, created_at, id);

CREATE TABLE console_sessions (
	token_hash BYTEA PRIMARY KEY,
	user_id    TEXT NOT NULL REFERENCES users (id),
	csrf       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);

CREATE TABLE agents (
	id           TEXT PRIMARY KEY,
	account_id   TEXT NOT NULL REFERENCES accounts (id),
	name         TEXT NOT NULL,
	-- domain.AgentNameKey(name): names are unique per account in this form.
	name_key     TEXT NOT NULL,
	instructions TEXT NOT NULL,
	enabled      BOOLEAN NOT NULL,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX agents_name_key ON agents (account_id, name_key);
-- Keyset pagination: WHERE account_id = $1 AND (created_at, id) > ($2, $3).
CREATE INDEX agents_page ON agents (account_id, created_at, id);

CREATE TABLE api_keys (
	id                    TEXT PRIMARY KEY,
	account_id            TEXT NOT NULL REFERENCES accounts (id),
	name                  TEXT NOT NULL,
	description           TEXT NOT NULL,
	-- The authentication hot path looks keys up by prefix.
	prefix                TEXT NOT NULL UNIQUE,
	env                   TEXT NOT NULL,
	hash                  BYTEA NOT NULL,
	scopes                TEXT NOT NULL,
	rate_limit_per_minute BIGINT NOT NULL,
	last_used_at          BIGINT,
	expires_at            BIGINT,
	created_at            BIGINT NOT NULL,
	created_by            TEXT NOT NULL,
	revoked_at            BIGINT,
	revoked_by            TEXT NOT NULL,
	rotated_from          TEXT NOT NULL
);
CREATE INDEX api_keys_account ON api_keys (account_id, created_at, id);

-- A key restricted to some agents has one row per agent; pos keeps the
-- order they were given in.
CREATE TABLE api_key_agents (
	key_id   TEXT NOT NULL REFERENCES api_keys (id),
	agent_id TEXT NOT NULL REFERENCES agents (id),
	pos      BIGINT NOT NULL,
	PRIMARY KEY (key_id, agent_id)
);

CREATE TABLE audit_events (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	key_id     TEXT NOT NULL,
	action     TEXT NOT NULL,
	actor_id   TEXT NOT NULL,
	actor      TEXT NOT NULL,
	detail     TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX audit_events_account ON audit_events (account_id, created_at, id);

CREATE TABLE conversations (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	agent_id   TEXT NOT NULL REFERENCES agents (id),
	created_at BIGINT NOT NULL
);
CREATE INDEX conversations_agent ON conversations (agent_id);

CREATE TABLE questions (
	id              TEXT PRIMARY KEY,
	account_id      TEXT NOT NULL REFERENCES accounts (id),
	agent_id        TEXT NOT NULL REFERENCES agents (id),
	-- NULL for a failed first question: its conversation was never created.
	conversation_id TEXT REFERENCES conversations (id),
	question        TEXT NOT NULL,
	answer          TEXT NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('answered', 'failed')),
	answer_ms       BIGINT NOT NULL,
	created_at      BIGINT NOT NULL
);
CREATE INDEX questions_agent ON questions (agent_id, created_at, id);
CREATE INDEX questions_conversation ON questions (conversation_id, created_at, id);

CREATE TABLE server_secrets (
	name  TEXT PRIMARY KEY,
	value BYTEA NOT NULL
);

-- One-time jobs (such as the first start's bootstrap) that exactly one
-- instance may run.
CREATE TABLE claims (
	name       TEXT PRIMARY KEY,
	claimed_at BIGINT NOT NULL
);
