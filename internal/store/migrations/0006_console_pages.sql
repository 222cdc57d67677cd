-- The console's pages. Its lists (keys, the audit trail, users, the agent
-- picker) are keyset pages on the indexes that already order them
-- (api_keys_account, audit_events_account, users_account,
-- agents_name_key); what was missing is a key's page finding the keys that
-- replace it without reading every key of the account, and a rotation
-- finding whether a name is taken.
CREATE INDEX api_keys_rotated_from ON api_keys (rotated_from);
CREATE INDEX api_keys_account_name ON api_keys (account_id, name);
