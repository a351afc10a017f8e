#!/usr/bin/env bash
# Install the project with its test extras and run the fast suite (the
# tests that need no service: pytest -m "not services", on FAST_WORKERS
# pytest-xdist workers); then start the local Kafka broker, Redis, Schema
# Registry and Prometheus (deploy/services.sh), the secured broker
# (deploy/kafka.sh --secure) and the secured Redis (deploy/redis.sh
# --secure), run the service tests against them (pytest -m services, on
# SERVICE_WORKERS workers: they mostly wait on brokers and worker
# processes), and stop the services again — whatever the outcome. Every
# test runs once. This is the README's test command and what .ci/run calls.
#
# Usage: bash deploy/test.sh [pytest args…]   (given to both runs; a run
#        that the arguments leave without a test is skipped, not failed)
#
# Environment: PYTHON (default python3); REDIS_CLUSTER_URL and
# REDIS_CLUSTER_TLS_URL (when unset, deploy/redis-cluster.sh starts the local
# cluster and, with --tls, its TLS twin); FAST_WORKERS (default 2) and
# SERVICE_WORKERS (default 4), pytest-xdist's -n of each run; the ports and run dirs of
# deploy/services.sh (KAFKA_PORT, REDIS_PORT, SCHEMA_REGISTRY_PORT, …). When
# KAFKA_BOOTSTRAP_SERVERS and REDIS_URL are already set, those services are
# used and not started; likewise SCHEMA_REGISTRY_URL for the registry
# (without it, deploy/registry.sh starts one); likewise PROMETHEUS_URL with
# RL_PROMETHEUS_TARGETS for Prometheus (deploy/prometheus.sh).
# The secured broker: RL_SECURE_KAFKA_PORT (19094; mTLS on the next port),
# RL_SECURE_KAFKA_CONTROLLER_PORT (19093), RL_SECURE_RUN_DIR
# (/tmp/recurrence-ledger-kafka-secure); when RL_SECURE_KAFKA_DIR is already
# set (a running secured broker's client dir), it is used and not started.
# The secured Redis: RL_SECURE_REDIS_PORT (16379, password only),
# RL_SECURE_REDIS_TLS_PORT (the next port), RL_SECURE_REDIS_RUN_DIR
# (/tmp/recurrence-ledger-redis-secure); when RL_SECURE_REDIS_DIR is already
# set (a running secured Redis's client dir, with RL_SECURE_REDIS_PORT and
# RL_SECURE_REDIS_TLS_PORT), it is used and not started.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
PYTHON="${PYTHON:-python3}"
cd "$REPO_DIR"

echo "test.sh: installing recurrence-ledger with test extras" >&2
"$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e ".[test]" >&2

# run_pytest ARGS… -> pytest ARGS…; exit code 5 (no test selected: the
# caller's arguments name tests of the other run only) is not a failure.
run_pytest() {
    local code=0
    "$PYTHON" -m pytest "$@" || code=$?
    if ((code == 5)); then
        echo "test.sh: no test selected by: pytest $*" >&2
    elif ((code != 0)); then
        exit "$code"
    fi
}

# The fast suite first: no service is started for it, nor used.
echo "test.sh: the fast suite (pytest -m 'not services' -n ${FAST_WORKERS:-2})" >&2
run_pytest -m "not services" -n "${FAST_WORKERS:-2}" "$@"

# secure_kafka CMD -> deploy/kafka.sh --secure CMD on the secured broker's
# own ports and run dir (never the plain broker's KAFKA_PORT/RL_RUN_DIR).
secure_kafka() {
    env -u KAFKA_MTLS_PORT KAFKA_PORT="${RL_SECURE_KAFKA_PORT:-19094}" \
        KAFKA_CONTROLLER_PORT="${RL_SECURE_KAFKA_CONTROLLER_PORT:-19093}" \
        RL_RUN_DIR="${RL_SECURE_RUN_DIR:-/tmp/recurrence-ledger-kafka-secure}" \
        bash "$SCRIPT_DIR/kafka.sh" --secure "$@"
}

# secure_redis CMD -> deploy/redis.sh --secure CMD on the secured Redis's own
# ports and run dir (never the plain Redis's REDIS_PORT/RL_REDIS_RUN_DIR).
secure_redis() {
    local port="${RL_SECURE_REDIS_PORT:-16379}"
    env REDIS_PORT="$port" REDIS_TLS_PORT="${RL_SECURE_REDIS_TLS_PORT:-$((port + 1))}" \
        RL_REDIS_RUN_DIR="${RL_SECURE_REDIS_RUN_DIR:-/tmp/recurrence-ledger-redis-secure}" \
        bash "$SCRIPT_DIR/redis.sh" --secure "$@"
}

# The services this script starts are stopped at exit, whatever the outcome;
# services that were already running (someone else's, same ports and run
# dirs) are used but left running.
stop_at_exit=()
started_secure=0
started_secure_redis=0
started_tls_cluster=0
cleanup() {
    local script
    if ((started_tls_cluster)); then
        bash "$SCRIPT_DIR/redis-cluster.sh" --tls stop || true
    fi
    if ((started_secure)); then
        secure_kafka stop || true
    fi
    if ((started_secure_redis)); then
        secure_redis stop || true
    fi
    for script in "${stop_at_exit[@]}"; do
        bash "$SCRIPT_DIR/$script" stop || true
    done
}
trap cleanup EXIT
if [[ -z ${KAFKA_BOOTSTRAP_SERVERS:-} || -z ${REDIS_URL:-} ]]; then
    given_registry="${SCHEMA_REGISTRY_URL:-}"
    for script in prometheus.sh registry.sh redis-cluster.sh redis.sh kafka.sh; do
        bash "$SCRIPT_DIR/$script" status >/dev/null 2>&1 || stop_at_exit+=("$script")
    done
    bash "$SCRIPT_DIR/redis-cluster.sh" --tls status >/dev/null 2>&1 || started_tls_cluster=1
    env_lines="$(bash "$SCRIPT_DIR/services.sh" up)"
    eval "$env_lines"
    if [[ -n $given_registry ]]; then
        SCHEMA_REGISTRY_URL="$given_registry"
    fi
elif [[ -z ${SCHEMA_REGISTRY_URL:-} ]]; then
    # Kafka and Redis were given, the registry was not: start only it.
    bash "$SCRIPT_DIR/registry.sh" status >/dev/null 2>&1 || stop_at_exit+=(registry.sh)
    bash "$SCRIPT_DIR/registry.sh" start
    SCHEMA_REGISTRY_URL="$(bash "$SCRIPT_DIR/registry.sh" url)"
    export SCHEMA_REGISTRY_URL
fi
# The Redis Cluster the read-model tests also run against (read_redis_url),
# and the same over TLS (tests/e2e/test_cluster.py).
if [[ -z ${REDIS_CLUSTER_URL:-} || -z ${REDIS_CLUSTER_TLS_URL:-} ]]; then
    bash "$SCRIPT_DIR/redis-cluster.sh" status >/dev/null 2>&1 || stop_at_exit+=(redis-cluster.sh)
    bash "$SCRIPT_DIR/redis-cluster.sh" --tls status >/dev/null 2>&1 || started_tls_cluster=1
    bash "$SCRIPT_DIR/redis-cluster.sh" start >&2
    bash "$SCRIPT_DIR/redis-cluster.sh" --tls start >&2
    REDIS_CLUSTER_URL="$(bash "$SCRIPT_DIR/redis-cluster.sh" url)"
    REDIS_CLUSTER_TLS_URL="$(bash "$SCRIPT_DIR/redis-cluster.sh" --tls url)"
    export REDIS_CLUSTER_URL REDIS_CLUSTER_TLS_URL
fi
# Prometheus for the alerting rules' end-to-end test (tests/e2e/test_alerts.py).
if [[ -z ${PROMETHEUS_URL:-} || -z ${RL_PROMETHEUS_TARGETS:-} ]]; then
    bash "$SCRIPT_DIR/prometheus.sh" status >/dev/null 2>&1 || stop_at_exit+=(prometheus.sh)
    bash "$SCRIPT_DIR/prometheus.sh" start >&2
    PROMETHEUS_URL="$(bash "$SCRIPT_DIR/prometheus.sh" url)"
    RL_PROMETHEUS_TARGETS="$(bash "$SCRIPT_DIR/prometheus.sh" targets)"
    export PROMETHEUS_URL RL_PROMETHEUS_TARGETS
fi
echo "test.sh: KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP_SERVERS REDIS_URL=$REDIS_URL SCHEMA_REGISTRY_URL=$SCHEMA_REGISTRY_URL PROMETHEUS_URL=$PROMETHEUS_URL (stopped at exit: ${stop_at_exit[*]:-none})" >&2

# The secured broker for tests/e2e/secure (SASL_SSL, mTLS, ACLs); the tests
# read its client material from RL_SECURE_KAFKA_DIR.
if [[ -z ${RL_SECURE_KAFKA_DIR:-} ]]; then
    secure_kafka status >/dev/null 2>&1 || started_secure=1
    secure_kafka start >&2
    # shellcheck source=/dev/null
    source "${RL_SECURE_RUN_DIR:-/tmp/recurrence-ledger-kafka-secure}/client/secure.env"
fi
echo "test.sh: RL_SECURE_KAFKA_DIR=$RL_SECURE_KAFKA_DIR (secured broker started here: $started_secure)" >&2

# The secured Redis for tests/e2e/secure_redis (requirepass, ACL users,
# TLS); the tests read its client material from RL_SECURE_REDIS_DIR.
if [[ -z ${RL_SECURE_REDIS_DIR:-} ]]; then
    secure_redis status >/dev/null 2>&1 || started_secure_redis=1
    secure_redis start >&2
    # shellcheck source=/dev/null
    source "${RL_SECURE_REDIS_RUN_DIR:-/tmp/recurrence-ledger-redis-secure}/client/secure.env"
fi
echo "test.sh: RL_SECURE_REDIS_DIR=$RL_SECURE_REDIS_DIR (secured Redis started here: $started_secure_redis)" >&2

# Debian's chromium and playwright-core for the dashboard's browser test.
bash "$SCRIPT_DIR/ensure-browser.sh"

echo "test.sh: the service tests (pytest -m services -n ${SERVICE_WORKERS:-4} --dist loadgroup)" >&2
run_pytest -m services -n "${SERVICE_WORKERS:-4}" --dist loadgroup "$@"
