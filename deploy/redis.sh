#!/usr/bin/env bash
# Run a throwaway local Redis for development and tests: Debian's
# redis-server (installed with apt-get when missing), daemonized on
# 127.0.0.1 with no persistence, its pid file, log and config in a run dir.
# The system's service manager is not used.
#
# Usage: deploy/redis.sh start|stop|status
#
#   start   install redis-server if missing, start it, wait for PONG
#           (does nothing but report if it already runs)
#   stop    SIGTERM, wait up to 20 s, then SIGKILL; exit 0 if not running
#   status  exit 0 if it runs and answers PING
#
# Environment (all optional):
#   REDIS_PORT            port, default 6379
#   RL_REDIS_RUN_DIR      run dir, default /tmp/recurrence-ledger-redis;
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

HOST="127.0.0.1"
REDIS_PORT="${REDIS_PORT:-6379}"
REDIS_START_TIMEOUT="${REDIS_START_TIMEOUT:-20}"
REDIS_STOP_TIMEOUT="${REDIS_STOP_TIMEOUT:-20}"
RUN_DIR="${RL_REDIS_RUN_DIR:-/tmp/recurrence-ledger-redis}"
PID_FILE="$RUN_DIR/redis.pid"
LOG_FILE="$RUN_DIR/redis.log"
CONF_FILE="$RUN_DIR/redis.conf"

usage() {
    awk 'NR == 1 { next } /^# shellcheck|^[^#]/ { exit } { sub(/^# ?/, ""); print }' \
        "${BASH_SOURCE[0]}" >&2
}

ensure_installed() {
    if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
        return 0
    fi
    log "redis-server not found; installing Debian's redis-server"
    apt_install redis-server
    command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after apt-get install"
}

running_pid() {
    service_pid "redis-server"
}

pong() {
    [[ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)" == "PONG" ]]
}

write_config() {
    cat >"$CONF_FILE" <<EOF
# Written by deploy/redis.sh: local, disposable, no persistence.
bind $HOST
port $REDIS_PORT
protected-mode yes
daemonize yes
supervised no
pidfile $PID_FILE
logfile $LOG_FILE
loglevel notice
dir $RUN_DIR
save ""
appendonly no
databases 16
EOF
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
    ensure_installed
    if port_open "$HOST" "$REDIS_PORT"; then
        die "port $HOST:$REDIS_PORT is already in use by another process (set REDIS_PORT)"
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
    log "redis ready (pid $(running_pid)) on $HOST:$REDIS_PORT"
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
