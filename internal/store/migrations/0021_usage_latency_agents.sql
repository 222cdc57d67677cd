-- Latency histograms and AI agents' counts (docs/console.md, Usage and
-- request logs). The usage recorder counts each request's latency in a bin
-- (requestlog.LatencyBin) beside its count, and each request to an AI
-- agent's routes per agent. The histograms are stored per key and hour
-- from the start, one row each (no chart shows latency per minute, and a
-- row per minute, or per bin, made a 30-day read slow:
-- BenchmarkLatencySource); the agents' counts, like
-- usage_minute, per minute for 48 hours, then per hour. Both are kept 90
-- days. The charts read p50 and p95 from the bins, and the overview its
-- busiest agents, not from the request logs, which are kept 7 days.

CREATE TABLE usage_latency_hour (
	key_id     TEXT NOT NULL,
	hour       BIGINT NOT NULL, -- Unix milliseconds, a whole hour
	account_id TEXT NOT NULL,
	hist       TEXT NOT NULL, -- requests by latency bin, "bin:count ..." (requestlog.AppendHist)
	PRIMARY KEY (key_id, hour)
);
CREATE INDEX usage_latency_hour_account ON usage_latency_hour (account_id, hour);
CREATE INDEX usage_latency_hour_hour ON usage_latency_hour (hour);

CREATE TABLE usage_agent_minute (
	agent_id   TEXT NOT NULL,
	minute     BIGINT NOT NULL,
	class      TEXT NOT NULL,
	account_id TEXT NOT NULL,
	count      BIGINT NOT NULL,
	PRIMARY KEY (agent_id, minute, class)
);
CREATE INDEX usage_agent_minute_account ON usage_agent_minute (account_id, minute);
CREATE INDEX usage_agent_minute_minute ON usage_agent_minute (minute);

CREATE TABLE usage_agent_hour (
	agent_id   TEXT NOT NULL,
	hour       BIGINT NOT NULL,
	class      TEXT NOT NULL,
	account_id TEXT NOT NULL,
	count      BIGINT NOT NULL,
	PRIMARY KEY (agent_id, hour, class)
);
CREATE INDEX usage_agent_hour_account ON usage_agent_hour (account_id, hour);
CREATE INDEX usage_agent_hour_hour ON usage_agent_hour (hour);
