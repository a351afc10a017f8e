#!/usr/bin/env bash
# Install the system tools that deploy/ needs on a fresh Debian 12 machine:
# Java 17 (headless), Maven (Kafka's jars, the Schema Registry build),
# redis-server (with redis-cli), curl (registry.sh's readiness probe) and
# prometheus with promtool (prometheus.sh, the alerting rules' checks).
# Uses apt-get
# non-interactively, only for what is missing; does nothing when all are
# present. Daemons are not started by the install (see _common.sh).
#
# Usage: deploy/ensure-tools.sh        (needs root when something is missing)
#
# All messages go to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
export RL_LOG_TAG="ensure-tools.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

# java_major -> prints the major version of the java on PATH (empty if none).
java_major() {
    command -v java >/dev/null 2>&1 || return 0
    java -XshowSettings:properties -version 2>&1 |
        awk -F' = ' '/java.specification.version/ { print $2; exit }'
}

missing=()

major="$(java_major)"
if [[ -z $major ]]; then
    missing+=(openjdk-17-jre-headless)
elif ((major < 17)); then
    log "java on PATH is version $major; installing openjdk-17-jre-headless (point JAVA or JAVA_HOME at it)"
    missing+=(openjdk-17-jre-headless)
fi
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    missing+=(redis-server)
fi
command -v curl >/dev/null 2>&1 || missing+=(curl)
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    missing+=(prometheus)
fi
# Used by the scripts themselves; present on any normal Debian install.
command -v flock >/dev/null 2>&1 || missing+=(util-linux)
command -v setsid >/dev/null 2>&1 || missing+=(util-linux)
command -v timeout >/dev/null 2>&1 || missing+=(coreutils)

if ((${#missing[@]} == 0)); then
    log "all tools present (java $major, $(mvn -v 2>/dev/null | head -n 1 | sed -e $'s/\x1b\\[[0-9;]*m//g'), $(redis-server --version | awk '{print $3}'), $(curl --version | head -n 1 | awk '{print $1, $2}'), prometheus $(prometheus --version 2>&1 | awk 'NR == 1 {print $3}'))"
    exit 0
fi

# Deduplicate while keeping order.
declare -A seen=()
packages=()
for pkg in "${missing[@]}"; do
    [[ -n ${seen[$pkg]:-} ]] && continue
    seen[$pkg]=1
    packages+=("$pkg")
done
log "installing: ${packages[*]}"
apt_install "${packages[@]}"
log "done"
