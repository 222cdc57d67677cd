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
# env: ROUNDS (6), DUR (1s a phase), ALT (3 phases a variant in a block), CONN (16),
#   PGBASE, FLOOR (a floor's binary, given its address: the bench's own when unset;
#   the release's yardstick uses another, which encodes its body), LIST and PATCH (the variants, beside the
#   reference, also measured on GET /v1/ai-agents?limit=100 and on PATCH of an
#   agent), OUT (the per-round figures, TSV; a temporary file when unset)
# Every variant is measured on GET /v1/me, on SQLite and on PostgreSQL + Redis.
set -uo pipefail
ROUNDS=${ROUNDS:-6}; DUR=${DUR:-1s}; ALT=${ALT:-3}; CONN=${CONN:-16}; LIST=${LIST:-}; PATCH=${PATCH:-}
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
if [ -z "$floor" ]; then # the bench's own floor (go run ./bench's)
  go build -o "$tmp/bench" ./bench || exit 1
  floor="$tmp/bench -floor-bytes 450 --addr"
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
$floor 127.0.0.1:19099 & fpid=$!; pids="$pids $fpid"
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

# phase VARIANT ENGINE URL KEY LUA: wrk at VARIANT's serve for DUR; its requests,
# and the PostgreSQL and Redis CPU meanwhile, go to VARIANT's sums (block's).
phase() {
  local r0 r1 out
  r0=$(rcpu); pgsnap >"$tmp/pg0"
  out=$(wrk -t1 -c"$CONN" -d"$DUR" -H "Authorization: Bearer $4" ${5:+-s "$5"} "${3/@/${addr[$1-$2]}}")
  r1=$(rcpu); pgsnap >"$tmp/pg1"
  n[$1]=$((n[$1] + $(awk '/requests in/ {print $1}' <<<"$out")))
  bad[$1]=$((bad[$1] + $(awk '/Non-2xx/ {b = $NF} END {print b + 0}' <<<"$out")))
  pg[$1]=$((pg[$1] + $(pgdiff "$tmp/pg0" "$tmp/pg1"))); rd[$1]=$((rd[$1] + r1 - r0))
}

# block ROUND SCENARIO ENGINE URL KEY LUA VARIANT...: each variant's phase in
# turn, ALT times (the order reversed in even rounds), so that what the machine
# does meanwhile falls on all alike; then their deferred work (usage, last_used_at),
# which serve's own CPU counts wherever it falls, and PostgreSQL's and Redis's
# goes to the last. One TSV line a variant; its pair is the last variant named.
block() {
  local r=$1 s=$2 e=$3 url=$4 key=$5 lua=$6 v r0 r1; shift 6
  local vs=("$@") pair=${*: -1}
  local -A t0 n pg rd bad
  if [ $((r % 2)) = 0 ]; then mapfile -t vs < <(printf '%s\n' "$@" | tac); fi
  for v in "${vs[@]}"; do t0[$v]=$(ticks "${spid[$v-$e]}"); n[$v]=0; pg[$v]=0; rd[$v]=0; bad[$v]=0; done
  for _ in $(seq "$ALT"); do for v in "${vs[@]}"; do phase "$v" "$e" "$url" "$key" "$lua"; done; done
  r0=$(rcpu); pgsnap >"$tmp/pg0"; sleep 1.2; r1=$(rcpu); pgsnap >"$tmp/pg1"
  pg[$v]=$((pg[$v] + $(pgdiff "$tmp/pg0" "$tmp/pg1"))); rd[$v]=$((rd[$v] + r1 - r0))
  for v in "$@"; do
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$e" "$v" "$pair" "${n[$v]}" \
      $(($(ticks "${spid[$v-$e]}") - t0[$v])) "${pg[$v]}" "${rd[$v]}" "${bad[$v]}" >>"$OUT"
  done
}

in_list() { [[ " $1 " == *" $2 "* ]]; }
addr[floor-floor]=127.0.0.1:19099; spid[floor-floor]=$fpid
printf 'round\tscenario\tengine\tvariant\tpair\trequests\tserve_ticks\tpg_ticks\tredis_us\tnon2xx\n' >"$OUT"
for r in $(seq "$ROUNDS"); do
  block "$r" me floor "http://@/v1/me" x "" floor
  for e in sq pg; do
    k=key_$e; ag=${agent[0]}; [ $e = pg ] && ag=${agent[1]}
    for j in $(seq 1 $((${#names[@]} - 1))); do
      v=${names[$(((j + r) % (${#names[@]} - 1) + 1))]}
      block "$r" me $e "http://@/v1/me" "${!k}" "" "${names[0]}" "$v"
      if in_list "$LIST" "$v"; then block "$r" list $e "http://@/v1/ai-agents?limit=100" "${!k}" "" "${names[0]}" "$v"; fi
      if in_list "$PATCH" "$v"; then block "$r" patch $e "http://@/v1/ai-agents/$ag" "${!k}" "$tmp/patch.lua" "${names[0]}" "$v"; fi
    done
  done
  echo "round $r done" >&2
done
python3 "$(dirname "$0")/tricks.py" "${names[0]}" "$(getconf CLK_TCK)" "$OUT"
