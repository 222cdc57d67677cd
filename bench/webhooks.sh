#!/usr/bin/env bash
# Webhook isolation (docs/webhooks.md, Delivery): GET /v1/me's CPU per
# request, serve's own, with 1,000,000 deliveries waiting for an endpoint
# that accepts connections and never answers (a black hole), beside the
# same with none waiting; and how long a healthy endpoint's delivery takes
# to arrive meanwhile; then the same alternated, the black hole enabled
# (the worker busy) and disabled (the worker idle). SQLite, or PostgreSQL
# with PG set to a server's base URL; loopback only; needs wrk, sqlite3 or
# psql, python3.
#
# usage (from the project root): bench/webhooks.sh
#   env: ROUNDS (3), DUR (5s), CONN (16), BACKLOG (1000000), PG (such as postgres://postgres@127.0.0.1:5432)
set -euo pipefail
ROUNDS=${ROUNDS:-3}; DUR=${DUR:-5s}; CONN=${CONN:-16}; BACKLOG=${BACKLOG:-1000000}
for c in wrk sqlite3 python3 curl; do command -v $c >/dev/null || { echo "$c missing"; exit 2; }; done
tmp=$(mktemp -d); pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; [ -n "${KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/agentapi" ./cmd/agentapi
A="$tmp/agentapi"; db="$tmp/hooks.db"; addr=127.0.0.1:18287; api=http://$addr/v1
sql() { sqlite3 "$db"; }
if [ -n "${PG:-}" ]; then
  dbn="hooks_$(date +%s)_$$"; psql "$PG/postgres" -qc "create database $dbn" >/dev/null
  db="$PG/$dbn?sslmode=disable"
  sql() { psql -qAt "$db"; }
  trap 'cleanup; psql "$PG/postgres" -qc "drop database if exists $dbn with (force)" >/dev/null 2>&1' EXIT
fi
hole=18288; good=18289

# The black hole accepts and reads, never answers; the healthy receiver
# writes each delivery's arrival time (ms) and id to a file.
python3 - "$hole" <<'EOF' &
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(512)
held = []
while True:
    c, _ = s.accept(); held.append(c)
EOF
pids="$pids $!"
python3 - "$good" "$tmp/arrived" <<'EOF' &
import http.server, sys, time, json
out = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        b = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(out, "a") as f: f.write("%d %s\n" % (time.time()*1000, json.loads(b)["type"]))
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
pids="$pids $!"

acc=$($A account create --db "$db" --name Hooks)
echo pw-hooks-123456789 | $A user create --db "$db" --account "$acc" --email o@hooks.test --role owner >/dev/null
key=$($A key create --db "$db" --account "$acc" --as o@hooks.test --name bench --preset full-access --rate-limit 100000000 | head -1)

start() {
  $A serve --db "$db" --addr $addr --webhook-allow 127.0.0.0/8 >"$tmp/serve.log" 2>&1 & spid=$!
  for i in $(seq 100); do curl -s -o /dev/null "http://$addr/healthz" && return; sleep 0.1; done
  echo "serve did not start"; cat "$tmp/serve.log"; exit 1
}
stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; }
post() { curl -sf -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d "$2" "$api/$1"; }
pgcpu() { local t=0 p v; [ -n "${PG:-}" ] || { echo 0; return; }
  for p in $(pgrep -u postgres); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null) && t=$((t+v)); done; echo $t; }
measure() { # label: serve's (and PostgreSQL's) CPU µs per GET /v1/me over ROUNDS runs
  local n=0 c=0 g=0 c0 c1 g0 g1 r
  for r in $(seq "$ROUNDS"); do
    c0=$(awk '{print $14+$15}' /proc/$spid/stat); g0=$(pgcpu)
    r=$(wrk -t1 -c"$CONN" -d"$DUR" -H "Authorization: Bearer $key" "$api/me" | awk '/requests in/ {print $1}')
    c1=$(awk '{print $14+$15}' /proc/$spid/stat); g1=$(pgcpu); n=$((n+r)); c=$((c+c1-c0)); g=$((g+g1-g0))
  done
  awk -v n=$n -v c=$c -v g=$g -v t="$(getconf CLK_TCK)" -v l="$1" 'BEGIN { printf "%-28s %9d requests  %6.1f µs CPU a request (serve)  %5.1f (PostgreSQL)\n", l, n, c/t/n*1e6, g/t/n*1e6 }'
}
healthy() { # label: time from an agent's creation to its delivery
  : >"$tmp/arrived"; local t0; t0=$(date +%s%3N)
  post ai-agents "{\"name\":\"probe $RANDOM$RANDOM\"}" >/dev/null
  for i in $(seq 300); do grep -q ai_agent.created "$tmp/arrived" 2>/dev/null && break; sleep 0.05; done
  local t1; t1=$(awk '/ai_agent.created/ {print $1; exit}' "$tmp/arrived")
  if [ -z "$t1" ]; then echo "$1: the healthy endpoint's delivery did not arrive in 15 s"; return 1; fi
  echo "$1: healthy endpoint's delivery arrived $((t1 - t0)) ms after the write"
}

start
$A account feature --db "$db" --enable ai-answers "$acc" >/dev/null 2>&1 || true
post webhook-endpoints "{\"url\":\"http://127.0.0.1:$good/hook\",\"enabled_events\":[\"ai_agent.*\"]}" >/dev/null
hole_id=$(post webhook-endpoints "{\"url\":\"http://127.0.0.1:$hole/hook\",\"enabled_events\":[\"api_key.*\"]}" | grep -o 'we_[0-9a-z]*' | head -1)
measure "no backlog"
healthy "no backlog"
[ -n "${KEEP:-}" ] && echo "kept: $tmp"
stop

echo "seeding $BACKLOG deliveries to the black hole ($hole_id)"
now=$(date +%s%3N)
if [ -n "${PG:-}" ]; then
sql <<EOF >/dev/null
BEGIN;
INSERT INTO events (id, account_id, seq, type, created_at, data)
  SELECT 'evt_bench' || lpad(i::text, 18, '0'), '$acc', 1000000000 + i, 'api_key.updated', $now, '{}' FROM generate_series(1, $BACKLOG) i;
INSERT INTO webhook_deliveries (endpoint_id, event_id, account_id, status, next_attempt_at, created_at)
  SELECT '$hole_id', id, account_id, 'pending', $now, $now FROM events WHERE id LIKE 'evt_bench%';
COMMIT;
ANALYZE;
EOF
else
sql <<EOF >/dev/null
PRAGMA journal_mode = WAL;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $BACKLOG)
INSERT INTO events (id, account_id, seq, type, created_at, data)
  SELECT printf('evt_bench%018d', i), '$acc', 1000000000 + i, 'api_key.updated', $now, '{}' FROM n;
INSERT INTO webhook_deliveries (endpoint_id, event_id, account_id, status, next_attempt_at, created_at)
  SELECT '$hole_id', id, account_id, 'pending', $now, $now FROM events WHERE id LIKE 'evt_bench%';
COMMIT;
EOF
fi
start
sleep 3 # the worker has its black-hole attempts in flight
measure "$BACKLOG waiting, black hole"
healthy "$BACKLOG waiting, black hole"
echo "deliveries still pending: $(echo "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending';" | sql)"
stop
# Alternated: the black hole disabled (the worker idle) and enabled.
for state in disabled enabled disabled enabled; do
  echo "UPDATE webhook_endpoints SET status = '$state' WHERE id = '$hole_id';" | sql >/dev/null
  start; sleep 3; measure "black hole $state"; stop
done
