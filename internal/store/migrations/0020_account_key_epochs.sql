-- Per-account key epochs (docs/production.md, Key epochs): every write
-- that can make a held key wrong still raises key_epoch, which numbers the
-- changes, and records that number against the key's account here. An
-- instance that sees key_epoch move reads which accounts changed since and
-- re-reads only their keys.
--
-- per_account is the key_epoch of the last change recorded here; legacy the
-- highest key_epoch raised by an instance that does not record accounts
-- (1.2, during a rolling upgrade). A change numbered above per_account, or
-- a legacy above what an instance has read, names no account: that instance
-- drops every key it holds, as 1.2 does.
ALTER TABLE key_epoch ADD COLUMN per_account BIGINT NOT NULL DEFAULT 0;
ALTER TABLE key_epoch ADD COLUMN legacy BIGINT NOT NULL DEFAULT 0;
UPDATE key_epoch SET per_account = epoch, legacy = epoch;
CREATE TABLE account_key_epochs (
	account_id TEXT PRIMARY KEY,
	epoch      BIGINT NOT NULL
);
CREATE INDEX account_key_epochs_epoch ON account_key_epochs (epoch);
