-- Usage and request logs (docs/console.md, Usage and request logs). Every
-- /v1 request that identified a key leaves one request_logs row (never a
-- body, query string or header) and adds one to its key's count for its
-- minute and class in usage_minute; a sweep rolls minutes older than 48
-- hours into usage_hour and enforces retention. Instances add their counts
-- (count = count + excluded.count), so totals are exact across instances.
-- No foreign keys: rows are written in batches behind the requests, and a
-- batch must not fail on a key or account removed meanwhile.
CREATE TABLE request_logs (
	id          TEXT PRIMARY KEY, -- the request id (X-Request-Id)
	account_id  TEXT NOT NULL,
	key_id      TEXT NOT NULL,
	at          BIGINT NOT NULL,
	method      TEXT NOT NULL,
	route       TEXT NOT NULL,
	path        TEXT NOT NULL,
	status      INTEGER NOT NULL,
	class       TEXT NOT NULL, -- 2xx, 4xx, 429 or 5xx
	error_code  TEXT NOT NULL,
	duration_us BIGINT NOT NULL,
	client      TEXT NOT NULL
);
-- The Logs page: an account's requests newest first, alone or filtered by
-- key, class (a status code filters within its class) or route; the sweep's
-- time cut-off.
CREATE INDEX request_logs_account ON request_logs (account_id, at, id);
CREATE INDEX request_logs_key ON request_logs (key_id, at, id);
CREATE INDEX request_logs_class ON request_logs (account_id, class, at, id);
CREATE INDEX request_logs_route ON request_logs (account_id, route, at, id);
CREATE INDEX request_logs_at ON request_logs (at);

CREATE TABLE usage_minute (
	key_id     TEXT NOT NULL,
	minute     BIGINT NOT NULL, -- Unix milliseconds, a whole minute
	class      TEXT NOT NULL,
	account_id TEXT NOT NULL,
	count      BIGINT NOT NULL,
	PRIMARY KEY (key_id, minute, class)
);
CREATE INDEX usage_minute_account ON usage_minute (account_id, minute);
CREATE INDEX usage_minute_minute ON usage_minute (minute);

CREATE TABLE usage_hour (
	key_id     TEXT NOT NULL,
	hour       BIGINT NOT NULL, -- Unix milliseconds, a whole hour
	class      TEXT NOT NULL,
	account_id TEXT NOT NULL,
	count      BIGINT NOT NULL,
	PRIMARY KEY (key_id, hour, class)
);
CREATE INDEX usage_hour_hour ON usage_hour (hour);
