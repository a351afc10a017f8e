#!/usr/bin/env bash
# Run a throwaway local Prometheus for development and tests: Debian's
# prometheus (installed with apt-get when missing), on 127.0.0.1 with
# deploy/prometheus/prometheus.yml (scrape and evaluation every second) and
# deploy/prometheus/rules.yml, both copied into a run dir with its TSDB, pid
# file and log. Scrape targets are JSON files dropped into the run dir's
# targets/ folder (file service discovery): targets/worker-*.json for workers,
# targets/view-*.json for view followers, targets/api-*.json for serve. The system's service manager is not
# used.
#
# Usage: deploy/prometheus.sh start|stop|status|url|targets
#
#   start    install prometheus if missing, start it, wait until /-/ready
#            (does nothing but report if it already runs; the config and rules
#            are copied again and reloaded)
#   stop     SIGTERM, wait up to 20 s, then SIGKILL; exit 0 if not running
#   status   exit 0 if it runs and answers /-/ready
#   url      print its base URL (http://127.0.0.1:PORT)
#   targets  print the folder that takes the target files
#
# Environment (all optional):
#   PROMETHEUS_PORT          port, default 9090
#   RL_PROMETHEUS_RUN_DIR    run dir, default /tmp/recurrence-ledger-prometheus
#   PROMETHEUS_START_TIMEOUT seconds to wait for /-/ready, default 60
#
# All messages go to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
export RL_LOG_TAG="prometheus.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

HOST="127.0.0.1"
PROMETHEUS_PORT="${PROMETHEUS_PORT:-9090}"
PROMETHEUS_START_TIMEOUT="${PROMETHEUS_START_TIMEOUT:-60}"
RUN_DIR="${RL_PROMETHEUS_RUN_DIR:-/tmp/recurrence-ledger-prometheus}"
PID_FILE="$RUN_DIR/prometheus.pid"
LOG_FILE="$RUN_DIR/prometheus.log"
URL="http://$HOST:$PROMETHEUS_PORT"

ensure_installed() {
    if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
        return 0
    fi
    log "prometheus not found; installing Debian's prometheus"
    apt_install prometheus
    command -v prometheus >/dev/null 2>&1 || die "prometheus still missing after apt-get install"
}

running_pid() {
    service_pid "prometheus"
}

ready() {
    curl -fsS --max-time 2 "$URL/-/ready" >/dev/null 2>&1
}

copy_config() {
    mkdir -p "$RUN_DIR/targets" "$RUN_DIR/data"
    cp "$SCRIPT_DIR/prometheus/prometheus.yml" "$SCRIPT_DIR/prometheus/rules.yml" "$RUN_DIR/"
    promtool check config "$RUN_DIR/prometheus.yml" >&2 || die "promtool check config failed"
}

wait_ready() {
    local pid=$1 start_s=$SECONDS
    until ready; do
        if ! pid_alive "$pid"; then
            tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
            rm -f "$PID_FILE"
            die "prometheus (pid $pid) died during startup"
        fi
        if ((SECONDS - start_s >= PROMETHEUS_START_TIMEOUT)); then
            tail -n 30 "$LOG_FILE" >&2 2>/dev/null || true
            die "prometheus did not answer $URL/-/ready within ${PROMETHEUS_START_TIMEOUT}s"
        fi
        sleep 0.2
    done
}

cmd_start() {
    local pid
    pid="$(running_pid)"
    ensure_installed
    copy_config
    if [[ -n $pid ]]; then
        kill -HUP "$pid"  # reload the config and rules just copied
        wait_ready "$pid"
        log "already running (pid $pid) on $URL; configuration reloaded"
        return 0
    fi
    rm -f "$PID_FILE"
    if port_open "$HOST" "$PROMETHEUS_PORT"; then
        die "port $HOST:$PROMETHEUS_PORT is already in use by another process (set PROMETHEUS_PORT)"
    fi
    if [[ -f $LOG_FILE ]]; then
        mv -f "$LOG_FILE" "$LOG_FILE.prev"
    fi
    log "starting prometheus on $URL, run dir $RUN_DIR"
    (
        cd "$RUN_DIR"
        setsid prometheus \
            --config.file="$RUN_DIR/prometheus.yml" \
            --storage.tsdb.path="$RUN_DIR/data" \
            --storage.tsdb.retention.time=1d \
            --web.listen-address="$HOST:$PROMETHEUS_PORT" \
            --web.enable-lifecycle \
            </dev/null >"$LOG_FILE" 2>&1 {LIFECYCLE_LOCK_FD}>&- &
        echo $! >"$PID_FILE"
    )
    pid="$(read_pid "$PID_FILE")"
    wait_ready "$pid"
    log "prometheus ready (pid $pid) on $URL; targets in $RUN_DIR/targets"
}

cmd_stop() {
    stop_service "prometheus" 20
}

cmd_status() {
    report_status "$URL" "does not answer /-/ready" ready
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
    url) echo "$URL" ;;
    targets) echo "$RUN_DIR/targets" ;;
    -h | --help | help) usage ;;
    *)
        usage
        exit 2
        ;;
    esac
}

main "$@"
