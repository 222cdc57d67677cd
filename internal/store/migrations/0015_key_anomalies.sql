-- Key anomalies (docs/webhooks.md, Key anomalies): what the usage flush
-- and the last_used_at write-behind remember to notice a key that wanders,
-- spikes or returns after an idle month.
--
-- The networks (IPv4 /24, IPv6 /48) each key made a successful request
-- from, kept 30 days after they were last seen.
CREATE TABLE key_networks (
	key_id     TEXT NOT NULL,
	network    TEXT NOT NULL,
	first_seen BIGINT NOT NULL,
	last_seen  BIGINT NOT NULL,
	PRIMARY KEY (key_id, network)
);
CREATE INDEX key_networks_last_seen ON key_networks (last_seen);
-- Each key's requests per 10-minute bucket (its start, Unix ms), kept 7
-- days: the spike check's median.
CREATE TABLE key_buckets (
	key_id TEXT NOT NULL,
	bucket BIGINT NOT NULL,
	count  BIGINT NOT NULL,
	PRIMARY KEY (key_id, bucket)
);
CREATE INDEX key_buckets_bucket ON key_buckets (bucket);
-- The newest anomaly of each key and reason: its primary key makes the
-- event at most once a day however many instances detect it (a
-- conditional upsert, not a lock), and the row is the console's notice
-- until an Owner or Admin dismisses it.
CREATE TABLE key_anomalies (
	key_id       TEXT NOT NULL,
	reason       TEXT NOT NULL,
	account_id   TEXT NOT NULL,
	event_id     TEXT NOT NULL,
	details      TEXT NOT NULL,
	seen_at      BIGINT NOT NULL,
	dismissed_at BIGINT,
	dismissed_by TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (key_id, reason)
);
CREATE INDEX key_anomalies_account ON key_anomalies (account_id, seen_at);
