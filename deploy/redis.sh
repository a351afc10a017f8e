#!/usr/bin/env bash
# Run a throwaway local Redis for development and tests: Debian's
# redis-server (installed with apt-get when missing), daemonized on
# 127.0.0.1 with no persistence, its pid file, log and config in a run dir.
# The system's service manager is not used.
#
# Usage: deploy/redis.sh [--secure] start|stop|status
#
#   start   install redis-server if missing, start it, wait for PONG
#           (does nothing but report if it already runs)
#   stop    SIGTERM, wait up to 20 s, then SIGKILL; exit 0 if not running
#   status  exit 0 if it runs and answers PING
#   --secure  (any command, or RL_REDIS_SECURE=1) the secured Redis: its own
#           ports and run dir (defaults below); at every start a throwaway CA
#           and server certificate (openssl) and random passwords;
#           requirepass for the default user (the admin), the ACL users
#           ledger (writes the view) and dashboard (reads it), both limited
#           to the rl:* keys and the commands the view uses; a TLS port
#           beside the password-protected plain one. The client material
#           goes to $RL_REDIS_RUN_DIR/client (printed at start;
#           client/secure.env has the exports)
#
# Environment (all optional):
#   REDIS_PORT            port, default 6379 (--secure: 16379, password only)
#   REDIS_TLS_PORT        --secure: the TLS port, default REDIS_PORT+1
#   RL_REDIS_RUN_DIR      run dir, default /tmp/recurrence-ledger-redis
#                         (--secure: /tmp/recurrence-ledger-redis-secure);
#                         use one per instance
#   REDIS_START_TIMEOUT   seconds to wait for PONG, default 20
#   REDIS_STOP_TIMEOUT    seconds to wait after SIGTERM, default 20
#
# All messages go to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
export RL_LOG_TAG="redis.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

# Secured mode: --secure anywhere on the command line, or RL_REDIS_SECURE=1.
SECURE="${RL_REDIS_SECURE:-0}"
ARGS=()
for arg in "$@"; do
    if [[ $arg == --secure ]]; then
        SECURE=1
    else
        ARGS+=("$arg")
    fi
done
set -- ${ARGS[@]+"${ARGS[@]}"}
[[ $SECURE == 1 ]] || SECURE=0

HOST="127.0.0.1"
if ((SECURE)); then
    REDIS_PORT="${REDIS_PORT:-16379}"
    REDIS_TLS_PORT="${REDIS_TLS_PORT:-$((REDIS_PORT + 1))}"
    RUN_DIR="${RL_REDIS_RUN_DIR:-/tmp/recurrence-ledger-redis-secure}"
else
    REDIS_PORT="${REDIS_PORT:-6379}"
    RUN_DIR="${RL_REDIS_RUN_DIR:-/tmp/recurrence-ledger-redis}"
fi
REDIS_START_TIMEOUT="${REDIS_START_TIMEOUT:-20}"
REDIS_STOP_TIMEOUT="${REDIS_STOP_TIMEOUT:-20}"
PID_FILE="$RUN_DIR/redis.pid"
LOG_FILE="$RUN_DIR/redis.log"
CONF_FILE="$RUN_DIR/redis.conf"
TLS_DIR="$RUN_DIR/tls"
CLIENT_DIR="$RUN_DIR/client"

# The ACL rules of the secured mode's two users (docs/results.md, "Redis with
# a password and TLS"): the view's keys only — rl:* covers every namespace
# (rl:scopes, rl:scope:…, rl:<prefix>:…) — and only the commands that
# recurrence_ledger.read.projection (RedisView), recurrence_ledger.read.reader (ViewReader),
# the view follower and the history read models (recurrence_ledger.read.history:
# their Lua scripts run EVALSHA, and SCRIPT LOAD / EXISTS when Redis lacks them)
# send. HELLO and AUTH need no grant; redis-py's CLIENT SETINFO is not
# granted (redis-py ignores the refusal).
# ledger, the writer: worker, view rebuild, view clear, rebuild --redis-url.
LEDGER_ACL="resetkeys ~rl:* resetchannels -@all +ping +select +multi +exec +discard +exists +del +unlink +get +set +hset +hdel +hincrby +hget +hmget +hgetall +hvals +zadd +zrem +zremrangebyrank +zscore +zcard +zcount +zrange +zrevrange +zrangebyscore +zrevrangebyscore +sadd +scard +smembers +scan +evalsha +eval +script|load +script|exists"
# dashboard, the reader: serve, rank, stats; read-only key access (%R~) but
# for the answers of idempotent review decisions (SET NX EX, DEL: %RW~ on
# the decision-request keys only; recurrence_ledger.api.idempotency).
DASHBOARD_ACL="resetkeys %R~rl:* %RW~rl:*:decision-request:* resetchannels -@all +ping +select +multi +exec +discard +get +set +del +hget +hmget +hgetall +smembers +scard +zrange +zrevrange +zrangebyscore +zrevrangebyscore +zcard +zcount +zscore +evalsha_ro +script|load +script|exists"

running_pid() {
    service_pid "redis-server"
}

# admin_cli ARGS... -> redis-cli as the admin (default user) of the secured
# Redis; the password goes through the environment, never a command line.
admin_cli() {
    REDISCLI_AUTH="$(cat "$TLS_DIR/default.password")" redis-cli --no-auth-warning "$@"
}

pong() {
    if ((SECURE)); then
        [[ -r $TLS_DIR/default.password ]] || return 1
        [[ "$(admin_cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)" == "PONG" ]] &&
            [[ "$(admin_cli --tls --cacert "$TLS_DIR/ca.pem" -h "$HOST" -p "$REDIS_TLS_PORT" ping 2>/dev/null || true)" == "PONG" ]]
    else
        [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)" == "PONG" ]]
    fi
}

# password_hash FILE -> the hex SHA-256 of the password in FILE: the ACL
# users' passwords are given to Redis as #<hash>, so redis.conf holds none
# of them in clear.
password_hash() {
    printf '%s' "$(cat "$1")" | sha256sum | cut -d ' ' -f 1
}

# write_client_files -> in $CLIENT_DIR (mode 600: the URLs carry passwords)
# the CA, each user's password, a redis:// (password port) and a rediss://
# (TLS port, the CA in ssl_ca_certs) URL per ACL user, and secure.env with
# the exports the tests read.
write_client_files() {
    local name password
    cp "$TLS_DIR/ca.pem" "$CLIENT_DIR/ca.pem"
    for name in default ledger dashboard; do
        cp "$TLS_DIR/$name.password" "$CLIENT_DIR/$name.password"
    done
    for name in ledger dashboard; do
        password="$(cat "$TLS_DIR/$name.password")"
        printf 'redis://%s:%s@%s:%s/0\n' "$name" "$password" "$HOST" "$REDIS_PORT" >"$CLIENT_DIR/$name.url"
        printf 'rediss://%s:%s@%s:%s/0?ssl_ca_certs=%s\n' "$name" "$password" "$HOST" "$REDIS_TLS_PORT" \
            "$CLIENT_DIR/ca.pem" >"$CLIENT_DIR/$name-tls.url"
    done
    cat >"$CLIENT_DIR/secure.env" <<EOF
export RL_SECURE_REDIS_DIR=$CLIENT_DIR
export RL_SECURE_REDIS_PORT=$REDIS_PORT
export RL_SECURE_REDIS_TLS_PORT=$REDIS_TLS_PORT
EOF
    chmod 600 "$CLIENT_DIR"/*
}

write_config() {
    {
        echo "# Written by deploy/redis.sh: local, disposable, no persistence."
        redis_base_config "$HOST" "$REDIS_PORT"
        echo "databases 16"
    } >"$CONF_FILE"
    if ((SECURE)); then
        chmod 600 "$CONF_FILE"
        cat >>"$CONF_FILE" <<EOF
# --secure: every client authenticates; TLS on its own port.
tls-port $REDIS_TLS_PORT
tls-cert-file $TLS_DIR/redis.pem
tls-key-file $TLS_DIR/redis.key
tls-ca-cert-file $TLS_DIR/ca.pem
# Clients authenticate with their ACL user's password, not a certificate.
tls-auth-clients no
# The default user (no user name) is the admin: every command, every key.
requirepass $(cat "$TLS_DIR/default.password")
user ledger on #$(password_hash "$TLS_DIR/ledger.password") $LEDGER_ACL
user dashboard on #$(password_hash "$TLS_DIR/dashboard.password") $DASHBOARD_ACL
EOF
    fi
}
wait_ready() {
    local pid=$1 start_s=$SECONDS
    until pong; do
        if [[ -n $pid ]] && ! pid_alive "$pid"; then
            tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
            rm -f "$PID_FILE"
            die "redis-server (pid $pid) died during startup"
        fi
        if ((SECONDS - start_s >= REDIS_START_TIMEOUT)); then
            tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
            die "redis-server did not answer PING on $HOST:$REDIS_PORT within ${REDIS_START_TIMEOUT}s"
        fi
        sleep 0.1
        # The daemonized child writes its pid file shortly after forking.
        [[ -n $pid ]] || pid="$(running_pid)"
    done
}

cmd_start() {
    local pid
    pid="$(running_pid)"
    if [[ -n $pid ]]; then
        wait_ready "$pid"
        log "already running (pid $pid) on $HOST:$REDIS_PORT"
        return 0
    fi
    rm -f "$PID_FILE"
    ensure_redis_installed
    if port_open "$HOST" "$REDIS_PORT"; then
        die "port $HOST:$REDIS_PORT is already in use by another process (set REDIS_PORT)"
    fi
    if ((SECURE)); then
        make_redis_tls_material
    fi
    write_config
    if [[ -f $LOG_FILE ]]; then
        mv -f "$LOG_FILE" "$LOG_FILE.prev"
    fi
    log "starting redis-server on $HOST:$REDIS_PORT, run dir $RUN_DIR"
    # daemonize yes: returns once the daemon has forked. Keep the run-dir
    # lock out of the daemon's inherited descriptors.
    redis-server "$CONF_FILE" </dev/null >&2 {LIFECYCLE_LOCK_FD}>&- ||
        die "redis-server failed to start (see $LOG_FILE)"
    wait_ready ""
    if ((SECURE)); then
        write_client_files
        log "secured redis ready (pid $(running_pid)): password on $HOST:$REDIS_PORT, TLS on $HOST:$REDIS_TLS_PORT"
        log "client material in $CLIENT_DIR: ca.pem, <user>.password, <user>.url and <user>-tls.url (ledger, dashboard), secure.env"
    else
        log "redis ready (pid $(running_pid)) on $HOST:$REDIS_PORT"
    fi
}

cmd_stop() {
    # save "" is configured, so SIGTERM does not write a dump.
    stop_service "redis-server" "$REDIS_STOP_TIMEOUT"
}

cmd_status() {
    report_status "$HOST:$REDIS_PORT" "does not answer PING" pong
}

main() {
    local cmd=${1:-}
    case $cmd in
    start)
        lock_lifecycle
        cmd_start
        ;;
    stop)
        lock_lifecycle
        cmd_stop
        ;;
    status) cmd_status ;;
    -h | --help | help) usage ;;
    *)
        usage
        exit 2
        ;;
    esac
}

main "$@"
