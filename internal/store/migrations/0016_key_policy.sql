-- An account's key policy (docs/console.md, Key policy): the maximum
-- lifetime of new keys in days (NULL: none) and whether new keys must name
-- allowed addresses. No row: the account never set one, which asks nothing.
CREATE TABLE key_policies (
	account_id            TEXT PRIMARY KEY REFERENCES accounts (id),
	max_key_lifetime_days INTEGER,
	require_allowed_ips   BOOLEAN NOT NULL DEFAULT FALSE,
	updated_at            BIGINT NOT NULL
);
