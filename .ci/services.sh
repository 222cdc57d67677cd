# shellcheck shell=bash
# Helpers for .ci/run: install, start and prepare the outside services the
# tests use (PostgreSQL, Redis, Chromium). Sourced, not executed.
#
# After ci_services_setup the following are exported:
#   AGENTAPI_TEST_POSTGRES_URL  a fresh database owned by a fresh superuser
#                               role, both dropped again by ci_services_cleanup
#   AGENTAPI_TEST_REDIS_URL     redis://127.0.0.1:6379/15, flushed
#   AGENTAPI_TEST_CHROMIUM      path of the chromium binary

CI_PG_HOST=127.0.0.1
CI_PG_PORT=5432
CI_REDIS_HOST=127.0.0.1
CI_REDIS_PORT=6379
CI_REDIS_DB=15
CI_WAIT_SECONDS=30
# Roles and databases named agentapi_ci_<epoch>_* older than this are the
# leftovers of killed runs and are dropped.
CI_STALE_SECONDS=$((3 * 3600))

ci_log() { printf '[services] %s\n' "$*"; }
ci_warn() { printf '[services] WARNING: %s\n' "$*" >&2; }
ci_die() {
	printf '[services] ERROR: %s\n' "$*" >&2
	exit 1
}

# ci_as_root CMD...: run CMD as root (directly, or through passwordless sudo).
ci_as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		ci_die "need root (or passwordless sudo) to run: $*"
	fi
}

# ci_tcp_open HOST PORT: whether something accepts TCP connections there.
ci_tcp_open() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

ci_pg_up() {
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -q -h "$CI_PG_HOST" -p "$CI_PG_PORT" -t 3
	else
		ci_tcp_open "$CI_PG_HOST" "$CI_PG_PORT"
	fi
}

ci_redis_up() {
	if command -v redis-cli >/dev/null 2>&1; then
		[ "$(timeout 5 redis-cli -h "$CI_REDIS_HOST" -p "$CI_REDIS_PORT" ping 2>/dev/null)" = PONG ]
	else
		# shellcheck disable=SC2016 # expanded by the inner bash
		timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "PING\r\n" >&3 && read -r l <&3 && [[ $l == +PONG* ]]' \
			_ "$CI_REDIS_HOST" "$CI_REDIS_PORT" 2>/dev/null
	fi
}

# ci_wait WHAT CHECK...: wait up to CI_WAIT_SECONDS for CHECK to succeed.
ci_wait() {
	local what=$1
	shift
	local i
	for ((i = 0; i < CI_WAIT_SECONDS; i++)); do
		if "$@"; then
			return 0
		fi
		sleep 1
	done
	"$@" || ci_die "$what did not come up within ${CI_WAIT_SECONDS}s"
}

# ci_install_missing: apt-get install whatever the run needs and lacks.
ci_install_missing() {
	local pkgs=()
	# Clients, needed even when the servers run elsewhere.
	command -v psql >/dev/null 2>&1 && command -v pg_isready >/dev/null 2>&1 || pkgs+=(postgresql-client)
	command -v redis-cli >/dev/null 2>&1 || pkgs+=(redis-tools)
	# Servers, only when nothing answers already.
	if ! ci_pg_up && ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
		pkgs+=(postgresql)
	fi
	# redis-server is needed even when a Redis answers: the cluster tests
	# start a 3-primary Redis Cluster of their own on loopback
	# (internal/testenv, RedisCluster).
	if ! command -v redis-server >/dev/null 2>&1; then
		pkgs+=(redis-server)
	fi
	command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
	command -v chromedriver >/dev/null 2>&1 || pkgs+=(chromium-driver)
	# go test -race needs cgo, hence a C compiler.
	command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev)

	if [ ${#pkgs[@]} -eq 0 ]; then
		ci_log "all packages present"
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 || ci_die "missing ${pkgs[*]} and no apt-get to install them"
	ci_log "installing: ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	ci_as_root apt-get -o DPkg::Lock::Timeout=120 update -qq
	ci_as_root apt-get -o DPkg::Lock::Timeout=120 install -y -qq "${pkgs[@]}" </dev/null
	hash -r
}

# ci_start_postgres: start the local Debian cluster when nothing answers.
ci_start_postgres() {
	if ci_pg_up; then
		ci_log "postgresql: already running on $CI_PG_HOST:$CI_PG_PORT"
		return 0
	fi
	command -v pg_lsclusters >/dev/null 2>&1 || ci_die "postgresql is not running and postgresql-common is not installed"
	local ver name port
	# Prefer a cluster on CI_PG_PORT, else the newest one.
	read -r ver name port < <(pg_lsclusters -h | awk -v p="$CI_PG_PORT" '$3 == p { print $1, $2, $3; exit }') || true
	if [ -z "${ver:-}" ]; then
		read -r ver name port < <(pg_lsclusters -h | sort -V | awk 'END { if (NF) print $1, $2, $3 }') || true
	fi
	if [ -z "${ver:-}" ]; then
		# shellcheck disable=SC2012 # version directories: plain names
		ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1 || true)
		# shellcheck disable=SC2012
		[ -n "$ver" ] || ver=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n1 || true)
		[ -n "$ver" ] || ci_die "no PostgreSQL version installed"
		ci_log "postgresql: creating cluster $ver/main"
		ci_as_root pg_createcluster "$ver" main
		name=main
		port=$(pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" { print $3 }')
	fi
	CI_PG_PORT=${port:-5432}
	ci_log "postgresql: starting cluster $ver/$name on port $CI_PG_PORT"
	ci_as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start ||
		ci_warn "pg_ctlcluster start failed; waiting anyway"
	ci_wait "postgresql" ci_pg_up
	ci_log "postgresql: up"
}

ci_start_redis() {
	if ci_redis_up; then
		ci_log "redis: already running on $CI_REDIS_HOST:$CI_REDIS_PORT"
		return 0
	fi
	command -v redis-server >/dev/null 2>&1 || ci_die "redis is not running and redis-server is not installed"
	ci_log "redis: starting"
	ci_as_root mkdir -p /var/lib/redis /var/log/redis
	ci_as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$CI_REDIS_PORT" \
		--save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
	ci_wait "redis" ci_redis_up
	ci_log "redis: up"
}

# ci_pg_admin ARGS...: psql as a superuser on the maintenance database,
# through whichever way in works (set by ci_pg_find_admin).
CI_PG_ADMIN=
ci_pg_admin() {
	case $CI_PG_ADMIN in
	tcp-postgres)
		PGCONNECT_TIMEOUT=5 psql -X -w -q -v ON_ERROR_STOP=1 \
			"postgresql://postgres@$CI_PG_HOST:$CI_PG_PORT/postgres?sslmode=disable" "$@"
		;;
	tcp-self)
		PGCONNECT_TIMEOUT=5 psql -X -w -q -v ON_ERROR_STOP=1 \
			-h "$CI_PG_HOST" -p "$CI_PG_PORT" -d postgres "$@"
		;;
	socket)
		(cd / && ci_as_root runuser -u postgres -- psql -X -w -q -v ON_ERROR_STOP=1 -p "$CI_PG_PORT" -d postgres "$@")
		;;
	*) ci_die "no PostgreSQL admin access" ;;
	esac
}

ci_pg_find_admin() {
	local how
	for how in tcp-postgres tcp-self socket; do
		CI_PG_ADMIN=$how
		if [ "$(ci_pg_admin -Atc 'SELECT rolsuper FROM pg_roles WHERE rolname = current_user' 2>/dev/null)" = t ]; then
			ci_log "postgresql: admin access via $how"
			return 0
		fi
	done
	CI_PG_ADMIN=
	ci_die "cannot connect to PostgreSQL on $CI_PG_HOST:$CI_PG_PORT as a superuser (tried postgres and $(id -un) over TCP without a password, and the postgres OS user over the local socket)"
}

# ci_pg_drop_role ROLE: drop every database ROLE owns, then ROLE.
ci_pg_drop_role() {
	local role=$1 db
	while read -r db; do
		[ -n "$db" ] || continue
		ci_pg_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || ci_warn "could not drop database $db"
	done < <(ci_pg_admin -Atc "SELECT datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = '$role'" || true)
	ci_pg_admin -c "DROP ROLE IF EXISTS \"$role\"" || ci_warn "could not drop role $role"
}

# ci_pg_drop_stale: drop the roles (and their databases) of earlier runs
# that were killed before they could clean up.
ci_pg_drop_stale() {
	local now role epoch
	now=$(date +%s)
	while read -r role; do
		epoch=${role#agentapi_ci_}
		epoch=${epoch%%_*}
		[[ $epoch =~ ^[0-9]+$ ]] || continue
		if ((now - epoch > CI_STALE_SECONDS)); then
			ci_log "postgresql: dropping stale $role"
			ci_pg_drop_role "$role"
		fi
	done < <(ci_pg_admin -Atc "SELECT rolname FROM pg_roles WHERE rolname ~ '^agentapi_ci_[0-9]+_'" || true)
}

CI_PG_ROLE=
CI_PG_URL_SHOWN=
ci_prepare_postgres() {
	ci_pg_find_admin
	ci_pg_drop_stale
	local id password
	id="$(date +%s)_$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
	password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	CI_PG_ROLE="agentapi_ci_$id"
	# A per-run superuser with a random password: works under trust as well
	# as under Debian's default scram-sha-256 for 127.0.0.1, and leaves no
	# lasting credential behind (ci_services_cleanup drops it).
	ci_pg_admin -c "CREATE ROLE \"$CI_PG_ROLE\" LOGIN SUPERUSER PASSWORD '$password'"
	ci_pg_admin -c "CREATE DATABASE \"$CI_PG_ROLE\" OWNER \"$CI_PG_ROLE\""
	export AGENTAPI_TEST_POSTGRES_URL="postgres://$CI_PG_ROLE:$password@$CI_PG_HOST:$CI_PG_PORT/$CI_PG_ROLE?sslmode=disable"
	CI_PG_URL_SHOWN="postgres://$CI_PG_ROLE:***@$CI_PG_HOST:$CI_PG_PORT/$CI_PG_ROLE?sslmode=disable"
	if ! PGCONNECT_TIMEOUT=5 psql -X -w -q "$AGENTAPI_TEST_POSTGRES_URL" -Atc 'SELECT 1' >/dev/null; then
		ci_log "pg_hba.conf rules:"
		ci_pg_admin -Atc "SELECT type, database, user_name, address, auth_method FROM pg_hba_file_rules" >&2 || true
		ci_die "cannot log in over TCP as $CI_PG_ROLE with its password; pg_hba.conf must allow password (scram-sha-256/md5) or trust for $CI_PG_HOST"
	fi
	ci_log "postgresql: database $CI_PG_ROLE ready"
}

ci_prepare_redis() {
	local out
	out=$(timeout 5 redis-cli -h "$CI_REDIS_HOST" -p "$CI_REDIS_PORT" -n "$CI_REDIS_DB" flushdb 2>&1) ||
		ci_die "redis FLUSHDB on db $CI_REDIS_DB failed: $out"
	[ "$out" = OK ] || ci_die "redis FLUSHDB on db $CI_REDIS_DB: $out"
	export AGENTAPI_TEST_REDIS_URL="redis://$CI_REDIS_HOST:$CI_REDIS_PORT/$CI_REDIS_DB"
	ci_log "redis: db $CI_REDIS_DB flushed"
}

ci_prepare_chromium() {
	local path
	path=$(command -v chromium) || ci_die "chromium not found after installation"
	export AGENTAPI_TEST_CHROMIUM=$path
	# Informative only: the tests report the real failure if it cannot start.
	if ! timeout 30 "$path" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
		--dump-dom about:blank >/dev/null 2>&1; then
		ci_warn "chromium at $path did not start headless (--no-sandbox --disable-gpu --disable-dev-shm-usage)"
	fi
}

ci_print_versions() {
	printf 'go:         %s\n' "$(go version)"
	printf 'postgresql: %s\n' "$(ci_pg_admin -Atc 'SELECT version()' 2>/dev/null | head -n1 || echo unknown)"
	printf 'redis:      %s\n' "$(timeout 5 redis-cli -h "$CI_REDIS_HOST" -p "$CI_REDIS_PORT" info server 2>/dev/null |
		tr -d '\r' | awk -F: '$1 == "redis_version" { print $2 }' || echo unknown)"
	printf 'chromium:   %s\n' "$(timeout 30 "$AGENTAPI_TEST_CHROMIUM" --version 2>/dev/null || echo unknown)"
	printf 'AGENTAPI_TEST_POSTGRES_URL=%s\n' "$CI_PG_URL_SHOWN"
	printf 'AGENTAPI_TEST_REDIS_URL=%s\n' "$AGENTAPI_TEST_REDIS_URL"
	printf 'AGENTAPI_TEST_CHROMIUM=%s\n' "$AGENTAPI_TEST_CHROMIUM"
}

ci_services_setup() {
	ci_install_missing
	ci_start_postgres
	ci_start_redis
	ci_prepare_postgres
	ci_prepare_redis
	ci_prepare_chromium
}

# ci_services_cleanup: drop this run's database and role. Never fails.
ci_services_cleanup() {
	if [ -n "$CI_PG_ROLE" ] && [ -n "$CI_PG_ADMIN" ]; then
		(ci_pg_drop_role "$CI_PG_ROLE") || true
		ci_log "postgresql: dropped $CI_PG_ROLE"
	fi
}
