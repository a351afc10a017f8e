#!/usr/bin/env bash
# Start or stop the local services the project needs (one Kafka broker via
# deploy/kafka.sh, one Redis via deploy/redis.sh, a 3-master Redis Cluster
# via deploy/redis-cluster.sh, one Schema Registry via
# deploy/registry.sh, one Prometheus via deploy/prometheus.sh), for
# development and CI.
#
# Usage: deploy/services.sh up|down|status
#
#   up      install missing tools, start the five services, then print to
#           stdout the lines to export, so that a caller can do:
#               eval "$(deploy/services.sh up)"
#           which sets KAFKA_BOOTSTRAP_SERVERS, REDIS_URL, REDIS_CLUSTER_URL,
#           REDIS_CLUSTER_TLS_URL (the same cluster over TLS, redis-cluster.sh --tls),
#           SCHEMA_REGISTRY_URL, PROMETHEUS_URL and RL_PROMETHEUS_TARGETS (the
#           folder that takes Prometheus's scrape target files). The registry is built on first use (a few
#           minutes from an empty Maven cache; cached afterwards). Under set -e,
#           eval hides a failure of the command substitution; to fail fast:
#               env_lines="$(deploy/services.sh up)"; eval "$env_lines"
#   down    stop all five (exit 0 when they were not running)
#   status  exit 0 only if all five run and answer
#
# Ports and run dirs come from the same environment variables as kafka.sh,
# redis.sh, redis-cluster.sh, registry.sh and prometheus.sh (KAFKA_PORT,
# KAFKA_CONTROLLER_PORT, REDIS_PORT, REDIS_CLUSTER_PORTS, RL_REDIS_CLUSTER_DIR, SCHEMA_REGISTRY_PORT, PROMETHEUS_PORT, RL_RUN_DIR,
# RL_REDIS_RUN_DIR, RL_REGISTRY_RUN_DIR, RL_PROMETHEUS_RUN_DIR, RL_CACHE_DIR). Everything but the export lines goes to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
export RL_LOG_TAG="services.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

KAFKA_PORT="${KAFKA_PORT:-9092}"
REDIS_PORT="${REDIS_PORT:-6379}"
SCHEMA_REGISTRY_PORT="${SCHEMA_REGISTRY_PORT:-8081}"
export KAFKA_PORT REDIS_PORT SCHEMA_REGISTRY_PORT

cmd_up() {
    local start_s=$SECONDS
    bash "$SCRIPT_DIR/ensure-tools.sh" >&2
    bash "$SCRIPT_DIR/kafka.sh" start >&2
    bash "$SCRIPT_DIR/redis.sh" start >&2
    bash "$SCRIPT_DIR/redis-cluster.sh" start >&2
    bash "$SCRIPT_DIR/redis-cluster.sh" --tls start >&2
    bash "$SCRIPT_DIR/registry.sh" start >&2
    bash "$SCRIPT_DIR/prometheus.sh" start >&2
    log "services up in $((SECONDS - start_s))s"
    printf 'export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:%s\n' "$KAFKA_PORT"
    printf 'export REDIS_URL=redis://127.0.0.1:%s/0\n' "$REDIS_PORT"
    printf 'export REDIS_CLUSTER_URL=%s\n' "$(bash "$SCRIPT_DIR/redis-cluster.sh" url)"
    printf 'export REDIS_CLUSTER_TLS_URL=%s\n' "$(bash "$SCRIPT_DIR/redis-cluster.sh" --tls url)"
    printf 'export SCHEMA_REGISTRY_URL=%s\n' "$(bash "$SCRIPT_DIR/registry.sh" url)"
    printf 'export PROMETHEUS_URL=%s\n' "$(bash "$SCRIPT_DIR/prometheus.sh" url)"
    printf 'export RL_PROMETHEUS_TARGETS=%s\n' "$(bash "$SCRIPT_DIR/prometheus.sh" targets)"
}

cmd_down() {
    local rc=0
    bash "$SCRIPT_DIR/prometheus.sh" stop >&2 || rc=1
    bash "$SCRIPT_DIR/registry.sh" stop >&2 || rc=1
    bash "$SCRIPT_DIR/redis-cluster.sh" --tls stop >&2 || rc=1
    bash "$SCRIPT_DIR/redis-cluster.sh" stop >&2 || rc=1
    bash "$SCRIPT_DIR/redis.sh" stop >&2 || rc=1
    bash "$SCRIPT_DIR/kafka.sh" stop >&2 || rc=1
    ((rc == 0)) || die "could not stop every service"
    log "services down"
}

cmd_status() {
    local rc=0
    bash "$SCRIPT_DIR/kafka.sh" status >&2 || rc=1
    bash "$SCRIPT_DIR/redis.sh" status >&2 || rc=1
    bash "$SCRIPT_DIR/redis-cluster.sh" status >&2 || rc=1
    bash "$SCRIPT_DIR/redis-cluster.sh" --tls status >&2 || rc=1
    bash "$SCRIPT_DIR/registry.sh" status >&2 || rc=1
    bash "$SCRIPT_DIR/prometheus.sh" status >&2 || rc=1
    return "$rc"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
-h | --help | help) usage ;;
*)
    usage
    exit 2
    ;;
esac
