-- key_epoch is one counter that moves, in the same transaction, with every
-- write that can make a key held in an instance's memory wrong: revoking a
-- key, changing its rate limit, deactivating or activating its account.
-- Instances keep keys in memory and trust them only while this row has not
-- moved since (on SQLite they read it only when PRAGMA data_version says
-- that anything at all was committed), so revocation stays immediate on
-- every instance and for the CLI in another process.
CREATE TABLE key_epoch (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	epoch BIGINT NOT NULL
);
INSERT INTO key_epoch (id, epoch) VALUES (1, 0);
