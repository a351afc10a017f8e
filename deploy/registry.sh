#!/usr/bin/env bash
# Run a local Schema Registry without Docker: Apicurio Registry, built once
# from Maven Central artifacts as a Quarkus fast-jar (recipe in
# deploy/registry/), serving the Confluent-compatible REST API at
# http://127.0.0.1:$SCHEMA_REGISTRY_PORT/apis/ccompat/v7. Storage is an
# in-memory database: every schema is gone when the process stops.
#
# Usage: deploy/registry.sh fetch|start|stop|status|url|logs
#
#   fetch   build the registry into the cache (once; skipped when the cache
#           holds a build of the current recipe)
#   start   fetch if needed, start the registry in the background, wait
#           until GET /apis/ccompat/v7/subjects answers (does nothing but
#           report when it already runs)
#   stop    SIGTERM, wait up to 30 s, then SIGKILL; exit 0 if not running
#   status  exit 0 if it runs and answers
#   url     print the Confluent-compatible base URL (SCHEMA_REGISTRY_URL)
#   logs    print the tail of the registry log
#
# Environment (all optional):
#   SCHEMA_REGISTRY_PORT     HTTP port on 127.0.0.1, default 8081
#   REGISTRY_HEAP_OPTS       JVM heap flags, default "-Xms64m -Xmx512m"
#   REGISTRY_START_TIMEOUT   seconds to wait for readiness, default 90
#   REGISTRY_STOP_TIMEOUT    seconds to wait after SIGTERM, default 30
#   RL_CACHE_DIR             build cache root, default ~/.cache/recurrence-ledger
#   RL_REGISTRY_RUN_DIR      run dir (log, pid), default
#                            /tmp/recurrence-ledger-registry; one per instance
#   RL_MAVEN_REPOSITORY      the one repository Maven downloads from during
#                            the build, default Maven Central
#   JAVA                     java binary, default $JAVA_HOME/bin/java or java
#   MAVEN_OPTS               passed to Maven as usual (e.g.
#                            -Dmaven.repo.local=DIR for a separate local repo)
#
# All messages go to stderr, except what `url` prints.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# The one place where the registry version is pinned. Apicurio 2.4.2.Final
# is the newest release whose artifacts all resolve from Maven Central; its
# parent POM imports Quarkus 2.16.4.Final (both must change together).
APICURIO_VERSION="2.4.2.Final"
QUARKUS_VERSION="2.16.4.Final"
DEPENDENCY_PLUGIN_VERSION="3.6.1"

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
RECIPE_DIR="$SCRIPT_DIR/registry"
export RL_LOG_TAG="registry.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

HOST="127.0.0.1"
SCHEMA_REGISTRY_PORT="${SCHEMA_REGISTRY_PORT:-8081}"
REGISTRY_HEAP_OPTS="${REGISTRY_HEAP_OPTS:--Xms64m -Xmx512m}"
REGISTRY_START_TIMEOUT="${REGISTRY_START_TIMEOUT:-90}"
REGISTRY_STOP_TIMEOUT="${REGISTRY_STOP_TIMEOUT:-30}"
MAVEN_REPOSITORY="${RL_MAVEN_REPOSITORY:-https://repo.maven.apache.org/maven2}"
BASE_URL="http://$HOST:$SCHEMA_REGISTRY_PORT/apis/ccompat/v7"

CACHE_ROOT="${RL_CACHE_DIR:-${HOME:-/root}/.cache/recurrence-ledger}"
REGISTRY_HOME="$CACHE_ROOT/schema-registry-$APICURIO_VERSION"
APP_DIR="$REGISTRY_HOME/app"
RUN_JAR="$APP_DIR/quarkus-run.jar"
BUILD_MARKER="$REGISTRY_HOME/.build-complete"

RUN_DIR="${RL_REGISTRY_RUN_DIR:-/tmp/recurrence-ledger-registry}"
PID_FILE="$RUN_DIR/registry.pid"
LOG_FILE="$RUN_DIR/registry.log"

# ---------------------------------------------------------------- fetch ----

# recipe_digest -> a digest of everything the build depends on, so that a
# changed recipe (pom, overrides, pinned versions) is rebuilt, not reused.
recipe_digest() {
    {
        echo "$APICURIO_VERSION $QUARKUS_VERSION $DEPENDENCY_PLUGIN_VERSION"
        cat "$RECIPE_DIR/pom.xml" "$RECIPE_DIR/overrides.properties"
    } | sha256sum | cut -c1-16
}

build_is_complete() {
    [[ -f $BUILD_MARKER && -f $RUN_JAR ]] &&
        grep -qx "recipe=$(recipe_digest)" "$BUILD_MARKER"
}

# mvn_quiet ARGS... -> Maven in batch mode with the build's settings (every
# repository mirrored to one: some transitive POMs name repositories that are
# not reachable), colours stripped, output to stderr.
mvn_quiet() {
    (mvn -B -q -Dstyle.color=never -s "$BUILD_DIR/settings.xml" \
        -Dapicurio.version="$APICURIO_VERSION" -Dquarkus.version="$QUARKUS_VERSION" \
        "$@" 2>&1 | sed -e $'s/\x1b\\[[0-9;]*m//g') >&2
}

cmd_fetch() {
    mkdir -p "$REGISTRY_HOME"
    # Serialise concurrent builds of the same version.
    local lock_fd
    exec {lock_fd}>"$REGISTRY_HOME/.build.lock"
    flock "$lock_fd"
    if build_is_complete; then
        log "Schema Registry (Apicurio $APICURIO_VERSION) already built in $APP_DIR"
        exec {lock_fd}>&-
        return 0
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found (run deploy/ensure-tools.sh)"
    require_java

    local start_s=$SECONDS
    BUILD_DIR="$REGISTRY_HOME/build"
    rm -rf "$BUILD_DIR" "$APP_DIR" "$REGISTRY_HOME/app.partial" "$BUILD_MARKER"
    mkdir -p "$BUILD_DIR/src/main/resources"
    cp "$RECIPE_DIR/pom.xml" "$BUILD_DIR/pom.xml"
    cat >"$BUILD_DIR/settings.xml" <<EOF
<!-- Written by deploy/registry.sh: every repository is read from one place. -->
<settings>
  <mirrors>
    <mirror>
      <id>recurrence-ledger-single-repository</id>
      <mirrorOf>*</mirrorOf>
      <url>$MAVEN_REPOSITORY</url>
    </mirror>
  </mirrors>
</settings>
EOF
    log "building Apicurio Registry $APICURIO_VERSION (Quarkus $QUARKUS_VERSION) into $APP_DIR; from an empty Maven cache this downloads ~210 MB and takes a few minutes"
    # The upstream application.properties (inside the app jar) is the base
    # configuration; the overrides are appended, so their keys win.
    if ! (cd "$BUILD_DIR" && mvn_quiet \
        "org.apache.maven.plugins:maven-dependency-plugin:$DEPENDENCY_PLUGIN_VERSION:unpack" \
        -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:jar" \
        -Dmdep.unpack.includes=application.properties \
        -DoutputDirectory="$BUILD_DIR/upstream"); then
        die "could not fetch io.apicurio:apicurio-registry-app:$APICURIO_VERSION"
    fi
    [[ -f $BUILD_DIR/upstream/application.properties ]] ||
        die "apicurio-registry-app $APICURIO_VERSION has no application.properties"
    {
        cat "$BUILD_DIR/upstream/application.properties"
        echo
        cat "$RECIPE_DIR/overrides.properties"
    } >"$BUILD_DIR/src/main/resources/application.properties"
    if ! (cd "$BUILD_DIR" && mvn_quiet -DskipTests package); then
        die "mvn package failed for the Schema Registry (build dir kept: $BUILD_DIR)"
    fi
    [[ -f $BUILD_DIR/target/quarkus-app/quarkus-run.jar ]] ||
        die "build finished but target/quarkus-app/quarkus-run.jar is missing in $BUILD_DIR"
    mv "$BUILD_DIR/target/quarkus-app" "$REGISTRY_HOME/app.partial"
    mv "$REGISTRY_HOME/app.partial" "$APP_DIR"
    rm -rf "$BUILD_DIR"
    # Marker last: a cache without it (or with another recipe) is rebuilt.
    {
        echo "recipe=$(recipe_digest)"
        echo "apicurio_version=$APICURIO_VERSION"
        echo "jars=$(find "$APP_DIR" -name '*.jar' | wc -l)"
        echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "build_seconds=$((SECONDS - start_s))"
    } >"$BUILD_MARKER"
    log "built in $((SECONDS - start_s))s: $(du -sh "$APP_DIR" | cut -f1) in $APP_DIR"
    exec {lock_fd}>&-
}

# ------------------------------------------------------------ lifecycle ----

# running_pid -> prints the registry pid if the pid file names a live registry.
running_pid() {
    service_pid "$RUN_JAR"
}

answers() {
    curl -sf --max-time 2 -o /dev/null "$BASE_URL/subjects"
}

# wait_ready PID [KILL_ON_TIMEOUT] -> wait_answers until the subjects
# endpoint answers (on timeout, kills the registry when KILL_ON_TIMEOUT is 1).
wait_ready() {
    wait_answers "Schema Registry" "$1" "$REGISTRY_START_TIMEOUT" "${2:-0}" answers
}

cmd_start() {
    command -v curl >/dev/null 2>&1 || die "curl not found (run deploy/ensure-tools.sh)"
    local pid
    pid="$(running_pid)"
    if [[ -n $pid ]]; then
        wait_ready "$pid"
        log "already running (pid $pid) at $BASE_URL"
        return 0
    fi
    rm -f "$PID_FILE"
    if port_open "$HOST" "$SCHEMA_REGISTRY_PORT"; then
        die "port $HOST:$SCHEMA_REGISTRY_PORT is already in use by another process (set SCHEMA_REGISTRY_PORT)"
    fi
    require_java
    if build_is_complete; then
        log "using the Schema Registry built in $APP_DIR"
    else
        cmd_fetch
    fi

    local start_s=$SECONDS
    if [[ -f $LOG_FILE ]]; then
        mv -f "$LOG_FILE" "$LOG_FILE.prev"
    fi
    log "starting Schema Registry (Apicurio $APICURIO_VERSION) on $HOST:$SCHEMA_REGISTRY_PORT, run dir $RUN_DIR"
    # setsid: own session, so the registry outlives the calling shell; the
    # inner shell writes its own pid (= the java pid after exec) and runs
    # from the run dir, so nothing is written beside the caller.
    # shellcheck disable=SC2016,SC2086 # $$ is for the inner shell; heap opts split on purpose
    setsid bash -c 'echo $$ >"$1"; cd "$2"; shift 2; exec "$@"' _ "$PID_FILE" "$RUN_DIR" \
        "$JAVA" $REGISTRY_HEAP_OPTS -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Dfile.encoding=UTF-8 \
        -Dquarkus.http.host="$HOST" -Dquarkus.http.port="$SCHEMA_REGISTRY_PORT" \
        -jar "$RUN_JAR" \
        </dev/null >"$LOG_FILE" 2>&1 {LIFECYCLE_LOCK_FD}>&- &

    pid="$(wait_pid_file "Schema Registry")"
    wait_ready "$pid" 1
    log "Schema Registry ready (pid $pid) at $BASE_URL in $((SECONDS - start_s))s"
}

cmd_stop() {
    stop_service "Schema Registry" "$REGISTRY_STOP_TIMEOUT"
}

cmd_status() {
    report_status "$BASE_URL" "does not answer GET /subjects" answers
}

main() {
    local cmd=${1:-}
    if [[ $# -gt 0 ]]; then
        shift
    fi
    case $cmd in
    start | stop) lock_lifecycle ;;
    esac
    case $cmd in
    fetch) cmd_fetch ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    url) echo "$BASE_URL" ;;
    logs) tail -n "${1:-100}" "$LOG_FILE" >&2 ;;
    -h | --help | help) usage ;;
    *)
        usage
        exit 2
        ;;
    esac
}

main "$@"
