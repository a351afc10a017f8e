#!/usr/bin/env bash
# Install the project with its test extras, start the local Kafka broker and
# Redis (deploy/services.sh), run the whole pytest suite against them, and
# stop the services again — whatever the outcome. This is the README's test
# command and what .ci/run calls.
#
# Usage: bash deploy/test.sh [pytest args…]
#
# Environment: PYTHON (default python3); the ports and run dirs of
# deploy/services.sh (KAFKA_PORT, REDIS_PORT, …). When KAFKA_BOOTSTRAP_SERVERS
# and REDIS_URL are already set, those services are used and not started.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
PYTHON="${PYTHON:-python3}"
cd "$REPO_DIR"

echo "test.sh: installing recurrence-ledger with test extras" >&2
"$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e ".[test]" >&2

started_services=0
if [[ -z ${KAFKA_BOOTSTRAP_SERVERS:-} || -z ${REDIS_URL:-} ]]; then
    # Services that were already running (someone else's, same ports and run
    # dirs) are used but left running; only what this script starts is stopped.
    already_running=0
    bash "$SCRIPT_DIR/services.sh" status >/dev/null 2>&1 && already_running=1
    env_lines="$(bash "$SCRIPT_DIR/services.sh" up)"
    eval "$env_lines"
    if ((already_running == 0)); then
        started_services=1
        trap 'bash "$SCRIPT_DIR/services.sh" down || true' EXIT
    fi
fi
echo "test.sh: KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP_SERVERS REDIS_URL=$REDIS_URL (started here: $started_services)" >&2

# Debian's chromium and playwright-core for the dashboard's browser test.
bash "$SCRIPT_DIR/ensure-browser.sh"

"$PYTHON" -m pytest "$@"
