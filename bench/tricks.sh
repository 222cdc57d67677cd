#!/usr/bin/env bash
# CPU per request, by process (serve, PostgreSQL's backends of the bench database,
# a private Redis), of several builds of agentapi against each other in one run,
# interleaved round by round, beside the bare floor. What decides a trick's
# place (STYLE.md, "the yardstick"): build the service with the trick removed,
# and compare it here with the unchanged build.
#
# usage (from the project root):
#   bench/tricks.sh ref=/path/to/agentapi gc=/path/to/agentapi,--gc-headroom-mib,0 enc=/tmp/enc ...
#   A variant is NAME=BINARY[,EXTRA-SERVE-ARG...]; the first is the reference.
# env: ROUNDS (6), DUR (3s), CONN (16), PGBASE, FLOOR (the floor's binary: built from
#   ../shared/bench/baseline when unset), LIST and PATCH (the variants, beside the
#   reference, also measured on GET /v1/ai-agents?limit=100 and on PATCH of an
#   agent), OUT (the per-round figures, TSV; a temporary file when unset)
# Every variant is measured on GET /v1/me, on SQLite and on PostgreSQL + Redis.
set -uo pipefail
ROUNDS=${ROUNDS:-6}; DUR=${DUR:-3s}; CONN=${CONN:-16}; LIST=${LIST:-}; PATCH=${PATCH:-}
PGBASE=${PGBASE:-postgres://postgres@127.0.0.1:5432}
command -v wrk >/dev/null || { echo "wrk missing (apt-get install wrk)"; exit 2; }
tmp=$(mktemp -d); dbn="tricks_$(date +%s)_$$"; OUT=${OUT:-$tmp/rounds.tsv}; pids=""
rport=$((20000 + $$ % 10000))
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  psql "$PGBASE/postgres" -qc "drop database if exists $dbn with (force)" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

names=(); bins=(); extras=()
for v in "$@"; do
  IFS=, read -r -a parts <<<"${v#*=}"
  names+=("${v%%=*}"); bins+=("${parts[0]}"); extras+=("${parts[*]:1}")
done
[ ${#names[@]} -ge 1 ] || { sed -n 2,15p "$0"; exit 2; }
ref=${bins[0]}

floor=${FLOOR:-}
if [ -z "$floor" ]; then
  floor=$tmp/floor
  (cd "$(dirname "$0")/../../shared/bench/baseline" 2>/dev/null && go build -o "$floor" .) || { echo "set FLOOR"; exit 1; }
fi
redis-server --port $rport --save "" --appendonly no >"$tmp/redis.log" 2>&1 & pids="$pids $!"
REDIS=redis://127.0.0.1:$rport/0
psql "$PGBASE/postgres" -qc "create database $dbn" >/dev/null || { echo "cannot create database"; exit 1; }
pg="$PGBASE/$dbn?sslmode=disable"; sq="$tmp/bench.db"

mkkey() { # db -> key
  local acc; acc=$($ref account create --db "$1" --name Bench) || return 1
  echo pw-bench-123456789 | $ref user create --db "$1" --account "$acc" --email o@bench.test --role owner >/dev/null || return 1
  $ref key create --db "$1" --account "$acc" --as o@bench.test --name bench --preset full-access --rate-limit 100000000 | head -1
}
sleep 0.5
key_pg=$(AGENTAPI_REDIS_URL=$REDIS mkkey "$pg") || { echo "setup on PostgreSQL failed"; exit 1; }
key_sq=$(AGENTAPI_REDIS_URL= mkkey "$sq") || { echo "setup on SQLite failed"; exit 1; }

# One serve per variant and engine, on ports from 19100.
declare -A addr spid
port=19100
for i in "${!names[@]}"; do
  for e in sq pg; do
    a=127.0.0.1:$port; port=$((port + 1))
    if [ $e = sq ]; then db=$sq; more=""; else db=$pg; more="--redis $REDIS"; fi
    # shellcheck disable=SC2086
    env -u AGENTAPI_REDIS_URL "${bins[$i]}" serve --addr $a --db "$db" $more ${extras[$i]} >/dev/null 2>"$tmp/${names[$i]}-$e.log" &
    spid[${names[$i]}-$e]=$!; addr[${names[$i]}-$e]=$a; pids="$pids $!"
  done
done
"$floor" 127.0.0.1:19099 & fpid=$!; pids="$pids $fpid"
for a in "${addr[@]}" 127.0.0.1:19099; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://$a/v1/me" && break; sleep 0.1; done
done

# 150 agents in each account: a full page of 100 and a next.
agent=()
for e in sq pg; do
  k=key_$e; a=${addr[${names[0]}-$e]}
  for n in $(seq 150); do
    curl -s -X POST -H "Authorization: Bearer ${!k}" -H 'Content-Type: application/json' \
      -d "{\"name\":\"bench agent $n\"}" "http://$a/v1/ai-agents" >"$tmp/agent.json"
  done
  agent+=("$(sed -E 's/.*"id":"([^"]+)".*/\1/' "$tmp/agent.json")")
done
printf 'wrk.method = "PATCH"\nwrk.body = "{\\"name\\":\\"bench agent 150\\",\\"instructions\\":\\"Answer briefly.\\"}"\nwrk.headers["Content-Type"] = "application/json"\n' >"$tmp/patch.lua"

ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
pgsnap() { # pid ticks, one line per backend of the bench database
  local p
  for p in $(psql "$PGBASE/postgres" -Atc "select pid from pg_stat_activity where datname = '$dbn'"); do
    echo "$p $(ticks "$p")"
  done
}
pgdiff() { # before-file after-file -> ticks spent (a new backend counts whole)
  awk 'NR==FNR {b[$1]=$2; next} {d=$2-($1 in b ? b[$1] : 0); if (d > 0) s+=d} END {print s+0}' "$1" "$2"
}
rcpu() { redis-cli -p $rport info cpu | awk -F: '/used_cpu_(sys|user):/ {s+=$2} END {printf "%.0f", s*1e6}'; }

# measure ROUND SCENARIO ENGINE VARIANT URL KEY [LUA] -> one TSV line
measure() {
  local p=${spid[$4-$3]:-$fpid} s0 s1 r0 r1 out n bad
  s0=$(ticks "$p"); r0=$(rcpu); pgsnap >"$tmp/pg0"
  out=$(wrk -t1 -c"$CONN" -d"$DUR" -H "Authorization: Bearer $6" ${7:+-s "$7"} "$5")
  sleep 1.2 # the deferred work of these requests (usage, last_used_at) is theirs
  s1=$(ticks "$p"); r1=$(rcpu); pgsnap >"$tmp/pg1"
  n=$(awk '/requests in/ {print $1}' <<<"$out"); bad=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$n" $((s1 - s0)) "$(pgdiff "$tmp/pg0" "$tmp/pg1")" $((r1 - r0)) "${bad:-0}" >>"$OUT"
}

in_list() { [[ " $1 " == *" $2 "* ]]; }
rotated() { # the variants, starting at the round's
  local r=$1 n=${#names[@]}; for j in $(seq 0 $((n - 1))); do echo "${names[$(((j + r) % n))]}"; done
}
printf 'round\tscenario\tengine\tvariant\trequests\tserve_ticks\tpg_ticks\tredis_us\tnon2xx\n' >"$OUT"
for r in $(seq "$ROUNDS"); do
  measure "$r" me floor floor http://127.0.0.1:19099/v1/me x
  for e in sq pg; do
    k=key_$e; ag=${agent[0]}; [ $e = pg ] && ag=${agent[1]}
    for v in $(rotated "$r"); do measure "$r" me $e "$v" "http://${addr[$v-$e]}/v1/me" "${!k}"; done
    for v in $(rotated "$r"); do
      [ "$v" = "${names[0]}" ] || in_list "$LIST" "$v" || continue
      measure "$r" list $e "$v" "http://${addr[$v-$e]}/v1/ai-agents?limit=100" "${!k}"
    done
    for v in $(rotated "$r"); do
      [ "$v" = "${names[0]}" ] || in_list "$PATCH" "$v" || continue
      measure "$r" patch $e "$v" "http://${addr[$v-$e]}/v1/ai-agents/$ag" "${!k}" "$tmp/patch.lua"
    done
  done
  echo "round $r done" >&2
done
python3 "$(dirname "$0")/tricks.py" "$OUT" "${names[0]}" "$(getconf CLK_TCK)"
