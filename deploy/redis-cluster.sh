#!/usr/bin/env bash
# Run a throwaway local Redis Cluster for development and tests: three
# masters (no replicas) of Debian's redis-server (installed with apt-get when
# missing), each daemonized on 127.0.0.1 with `cluster-enabled yes` and no
# persistence, joined with `redis-cli --cluster create`; their pid files,
# logs, configs and cluster node files in one run dir. No Docker, and the
# system's service manager is not used.
#
# Usage: deploy/redis-cluster.sh [--tls] start|stop|status|url
#
#   start   install redis-server if missing, start the nodes that do not
#           run, create the cluster when its slots are not assigned yet,
#           and wait until every node's CLUSTER INFO says cluster_state:ok
#           (does nothing but wait and report if it already runs)
#   stop    SIGTERM every node, wait up to 20 s each, then SIGKILL; exit 0
#           if none runs. The next start makes a fresh, empty cluster.
#   status  exit 0 if every node runs and says cluster_state:ok
#   url     print the cluster's URL for the product and the tests:
#           redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
#           (docs/operating.md, "Redis Cluster")
#   --tls   (any command, or RL_REDIS_CLUSTER_TLS=1) the same cluster over TLS
#           only (clients and the cluster bus): its own ports and run dir
#           (defaults below), a throwaway CA and server certificate
#           (openssl) made at every fresh start in $RL_REDIS_CLUSTER_DIR/tls;
#           `url` prints rediss+cluster://…?ssl_ca_certs=<run dir>/tls/ca.pem
#
# Environment (all optional):
#   REDIS_CLUSTER_PORTS     the nodes' ports, default "7001 7002 7003"
#                           (--tls: "7101 7102 7103"; each node's cluster bus
#                           is its port + 10000)
#   RL_REDIS_CLUSTER_DIR    run dir, default /tmp/recurrence-ledger-redis-cluster
#                           (--tls: /tmp/recurrence-ledger-redis-cluster-tls)
#   REDIS_START_TIMEOUT     seconds to wait for cluster_state:ok, default 30
#   REDIS_STOP_TIMEOUT      seconds to wait after SIGTERM, default 20
#
# All messages go to stderr (`url` prints the URL on stdout).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
export RL_LOG_TAG="redis-cluster.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

# TLS mode: --tls anywhere on the command line, or RL_REDIS_CLUSTER_TLS=1.
TLS="${RL_REDIS_CLUSTER_TLS:-0}"
ARGS=()
for arg in "$@"; do
    if [[ $arg == --tls ]]; then
        TLS=1
    else
        ARGS+=("$arg")
    fi
done
set -- ${ARGS[@]+"${ARGS[@]}"}
[[ $TLS == 1 ]] || TLS=0

HOST="127.0.0.1"
if ((TLS)); then
    read -r -a PORTS <<<"${REDIS_CLUSTER_PORTS:-7101 7102 7103}"
    RUN_DIR="${RL_REDIS_CLUSTER_DIR:-/tmp/recurrence-ledger-redis-cluster-tls}"
else
    read -r -a PORTS <<<"${REDIS_CLUSTER_PORTS:-7001 7002 7003}"
    RUN_DIR="${RL_REDIS_CLUSTER_DIR:-/tmp/recurrence-ledger-redis-cluster}"
fi
((${#PORTS[@]} >= 3)) || die "REDIS_CLUSTER_PORTS needs at least three ports (a cluster of masters)"
TLS_DIR="$RUN_DIR/tls"
CLIENT_DIR="$RUN_DIR/client"
TLS_ARGS=()
((TLS)) && TLS_ARGS=(--tls --cacert "$TLS_DIR/ca.pem")
REDIS_START_TIMEOUT="${REDIS_START_TIMEOUT:-30}"
REDIS_STOP_TIMEOUT="${REDIS_STOP_TIMEOUT:-20}"
# _common.sh's service helpers read PID_FILE / LOG_FILE; set per node by use_node.
PID_FILE=""
LOG_FILE=""

# use_node PORT -> PID_FILE, LOG_FILE and CONF_FILE of that node.
use_node() {
    PID_FILE="$RUN_DIR/redis-$1.pid"
    LOG_FILE="$RUN_DIR/redis-$1.log"
    CONF_FILE="$RUN_DIR/redis-$1.conf"
}

running_pid() {
    service_pid "redis-server"
}

# node_pid PORT -> the pid of that node when it runs.
node_pid() {
    use_node "$1"
    running_pid
}

cluster_url() {
    local nodes=() port
    for port in "${PORTS[@]}"; do
        nodes+=("$HOST:$port")
    done
    local IFS=,
    if ((TLS)); then
        printf 'rediss+cluster://%s?ssl_ca_certs=%s\n' "${nodes[*]}" "$TLS_DIR/ca.pem"
    else
        printf 'redis+cluster://%s\n' "${nodes[*]}"
    fi
}

# cli ARGS... -> redis-cli, over TLS (the run dir's CA) in TLS mode.
cli() {
    redis-cli ${TLS_ARGS[@]+"${TLS_ARGS[@]}"} "$@"
}

# cluster_ok PORT -> 0 when that node says cluster_state:ok.
cluster_ok() {
    cli -h "$HOST" -p "$1" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'
}

all_ok() {
    local port
    for port in "${PORTS[@]}"; do
        cluster_ok "$port" || return 1
    done
}

# slots_assigned -> 0 when the first node knows every slot's owner.
slots_assigned() {
    cli -h "$HOST" -p "${PORTS[0]}" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_slots_assigned:16384'
}

write_config() {
    local port=$1
    {
        echo "# Written by deploy/redis-cluster.sh: one master of a local, disposable cluster, no persistence."
        redis_base_config "$HOST" "$port"
        printf '%s\n' "cluster-enabled yes" "cluster-config-file nodes-$port.conf" "cluster-node-timeout 5000"
        if ((TLS)); then
            # TLS only, for clients and the cluster bus; clients authenticate by password, not certificate.
            printf '%s\n' "port 0" "tls-port $port" "tls-cluster yes" "tls-cert-file $TLS_DIR/redis.pem" \
                "tls-key-file $TLS_DIR/redis.key" "tls-ca-cert-file $TLS_DIR/ca.pem" "tls-auth-clients no"
        fi
    } >"$CONF_FILE"
}

pong() {
    [[ "$(cli -h "$HOST" -p "$1" ping 2>/dev/null || true)" == "PONG" ]]
}

start_node() {
    local port=$1 start_s=$SECONDS
    use_node "$port"
    rm -f "$PID_FILE"
    if port_open "$HOST" "$port"; then
        die "port $HOST:$port is already in use by another process (set REDIS_CLUSTER_PORTS)"
    fi
    write_config "$port"
    if [[ -f $LOG_FILE ]]; then
        mv -f "$LOG_FILE" "$LOG_FILE.prev"
    fi
    log "starting cluster node on $HOST:$port"
    redis-server "$CONF_FILE" </dev/null >&2 {LIFECYCLE_LOCK_FD}>&- ||
        die "redis-server failed to start (see $LOG_FILE)"
    until pong "$port"; do
        if ((SECONDS - start_s >= REDIS_START_TIMEOUT)); then
            print_log_tail
            die "cluster node $HOST:$port did not answer PING within ${REDIS_START_TIMEOUT}s"
        fi
        sleep 0.1
    done
}

cmd_start() {
    local port running=0 missing=() start_s=$SECONDS
    for port in "${PORTS[@]}"; do
        if [[ -n "$(node_pid "$port")" ]]; then
            running=$((running + 1))
        else
            missing+=("$port")
        fi
    done
    if ((running == 0)); then
        # A fresh cluster: no node runs, so old node files describe nothing.
        ensure_redis_installed
        mkdir -p "$RUN_DIR"
        rm -f "$RUN_DIR"/nodes-*.conf
        if ((TLS)); then
            make_redis_tls_material
        fi
    fi
    for port in ${missing[@]+"${missing[@]}"}; do
        start_node "$port"
    done
    if ! slots_assigned; then
        local nodes=()
        for port in "${PORTS[@]}"; do
            nodes+=("$HOST:$port")
        done
        log "creating the cluster: ${nodes[*]} (masters only)"
        # Bounded: a cluster whose nodes cannot meet would wait forever.
        timeout "$REDIS_START_TIMEOUT" redis-cli ${TLS_ARGS[@]+"${TLS_ARGS[@]}"} --cluster create "${nodes[@]}" \
            --cluster-replicas 0 --cluster-yes >"$RUN_DIR/create.log" 2>&1 || {
            cat "$RUN_DIR/create.log" >&2
            die "redis-cli --cluster create failed"
        }
    fi
    until all_ok; do
        if ((SECONDS - start_s >= REDIS_START_TIMEOUT)); then
            cli -h "$HOST" -p "${PORTS[0]}" cluster info >&2 2>/dev/null || true
            die "the cluster did not reach cluster_state:ok within ${REDIS_START_TIMEOUT}s"
        fi
        sleep 0.2
    done
    if ((running == ${#PORTS[@]})); then
        log "already running on ${PORTS[*]}: $(cluster_url)"
    else
        log "redis cluster ready on ${PORTS[*]}: $(cluster_url)"
    fi
}

cmd_stop() {
    local port pid
    for port in "${PORTS[@]}"; do
        pid="$(node_pid "$port")"
        if [[ -n $pid ]]; then
            stop_pid "cluster node $port" "$pid" "$REDIS_STOP_TIMEOUT"
        fi
        rm -f "$PID_FILE"
    done
    log "stopped"
}

cmd_status() {
    local port rc=0
    for port in "${PORTS[@]}"; do
        if [[ -z "$(node_pid "$port")" ]]; then
            log "node $HOST:$port not running"
            rc=1
        elif ! cluster_ok "$port"; then
            log "node $HOST:$port runs but its cluster_state is not ok"
            rc=1
        fi
    done
    ((rc == 0)) && log "running on ${PORTS[*]}, cluster_state:ok: $(cluster_url)"
    return "$rc"
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
    url) cluster_url ;;
    -h | --help | help) usage ;;
    *)
        usage
        exit 2
        ;;
    esac
}

main "$@"
