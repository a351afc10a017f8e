#!/usr/bin/env bash
# Run one real Apache Kafka broker locally without Docker: a single KRaft node
# (combined broker + controller) on 127.0.0.1, built from the Maven Central
# jars and the machine's Java (17).
#
# Usage: deploy/kafka.sh [--secure] fetch|start [--keep-data]|stop|status|restart-keep-data|logs
#
#   fetch              resolve the broker jars into the cache (once; skipped
#                      when the cache is complete)
#   start              fetch if needed, write configs, format fresh storage,
#                      start the broker in the background, wait until ready
#   start --keep-data  same, but reuse the existing log.dirs (and cluster id)
#   --secure           (any command, or RL_KAFKA_SECURE=1) the secured broker:
#                      its own ports and run dir (defaults below); at start a
#                      throwaway CA and certificates (openssl), a SASL_SSL
#                      listener (SCRAM-SHA-512 users admin, ledger, upstream,
#                      created at format time), an SSL listener that requires
#                      client certificates (mTLS), the KRaft StandardAuthorizer
#                      (no ACL = denied; super user admin); the client
#                      material and properties files go to $RL_RUN_DIR/client
#                      (printed at start; client/secure.env has the exports)
#   stop               SIGTERM, wait up to 30 s, then SIGKILL
#   status             exit 0 if the broker runs and its port answers
#   restart-keep-data  stop, then start --keep-data (broker restart mid-stream)
#   logs               print the tail of the broker log
#
# Environment (all optional):
#   KAFKA_VERSION          Kafka version (3.x; pinned below)
#   KAFKA_PORT             client (PLAINTEXT) port, default 9092
#                          (--secure: the SASL_SSL port, default 19094)
#   KAFKA_MTLS_PORT        --secure: the SSL (mTLS) port, default KAFKA_PORT+1
#   KAFKA_CONTROLLER_PORT  KRaft controller port, default 9093 (--secure: 19093)
#   KAFKA_HEAP_OPTS        JVM heap flags, default "-Xms256m -Xmx768m"
#   KAFKA_START_TIMEOUT    seconds to wait for readiness, default 90
#   KAFKA_STOP_TIMEOUT     seconds to wait after SIGTERM, default 30
#   RL_CACHE_DIR           jar cache root, default ~/.cache/recurrence-ledger
#   RL_RUN_DIR             run dir (configs, data, log, pid), default
#                          /tmp/recurrence-ledger-kafka (--secure:
#                          /tmp/recurrence-ledger-kafka-secure); one per broker
#   JAVA                   java binary, default $JAVA_HOME/bin/java or java
#
# All messages go to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# The one place where the Kafka version is pinned.
KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
SCALA_BINARY_VERSION="2.13"
# Logging backend (3.x ships none in its POM) and the fetch tool.
SLF4J_RELOAD4J_VERSION="1.7.36"
RELOAD4J_VERSION="1.2.25"
DEPENDENCY_PLUGIN_VERSION="3.6.1"

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
export RL_LOG_TAG="kafka.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

# Secured mode: --secure anywhere on the command line, or RL_KAFKA_SECURE=1.
SECURE="${RL_KAFKA_SECURE:-0}"
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
    KAFKA_PORT="${KAFKA_PORT:-19094}"
    KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
    RL_RUN_DIR="${RL_RUN_DIR:-/tmp/recurrence-ledger-kafka-secure}"
else
    KAFKA_PORT="${KAFKA_PORT:-9092}"
    KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
fi
KAFKA_MTLS_PORT="${KAFKA_MTLS_PORT:-$((KAFKA_PORT + 1))}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"

CACHE_ROOT="${RL_CACHE_DIR:-${HOME:-/root}/.cache/recurrence-ledger}"
KAFKA_HOME="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIB_DIR="$KAFKA_HOME/lib"
FETCH_MARKER="$KAFKA_HOME/.fetch-complete"

RUN_DIR="${RL_RUN_DIR:-/tmp/recurrence-ledger-kafka}"
DATA_DIR="$RUN_DIR/data"
PID_FILE="$RUN_DIR/kafka.pid"
LOG_FILE="$RUN_DIR/kafka.log"
SERVER_PROPS="$RUN_DIR/server.properties"
LOG4J_PROPS="$RUN_DIR/log4j.properties"
TLS_DIR="$RUN_DIR/tls"
CLIENT_DIR="$RUN_DIR/client"
MAIN_CLASS="kafka.Kafka"

# ---------------------------------------------------------------- fetch ----

fetch_is_complete() {
    [[ -f $FETCH_MARKER && -d $LIB_DIR ]] &&
        compgen -G "$LIB_DIR/kafka_${SCALA_BINARY_VERSION}-${KAFKA_VERSION}.jar" >/dev/null
}

write_fetch_pom() {
    local pom=$1
    cat >"$pom" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Throwaway POM written by deploy/kafka.sh; only used to resolve jars. -->
<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.recurrence-ledger</groupId>
  <artifactId>kafka-broker-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${SCALA_BINARY_VERSION}</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>${SLF4J_RELOAD4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.reload4j</groupId>
      <artifactId>reload4j</artifactId>
      <version>${RELOAD4J_VERSION}</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>${DEPENDENCY_PLUGIN_VERSION}</version>
      </plugin>
    </plugins>
  </build>
</project>
EOF
}

cmd_fetch() {
    mkdir -p "$KAFKA_HOME"
    # Serialise concurrent fetches of the same version.
    local lock_fd
    exec {lock_fd}>"$KAFKA_HOME/.fetch.lock"
    flock "$lock_fd"
    if fetch_is_complete; then
        log "Kafka $KAFKA_VERSION jars already cached in $LIB_DIR"
        exec {lock_fd}>&-
        return 0
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found (run deploy/ensure-tools.sh)"
    require_java

    local work partial start_s
    work="$(mktemp -d "${TMPDIR:-/tmp}/rl-kafka-fetch.XXXXXX")"
    partial="$KAFKA_HOME/lib.partial"
    rm -rf "$partial" "$LIB_DIR" "$FETCH_MARKER"
    write_fetch_pom "$work/pom.xml"
    log "fetching Kafka $KAFKA_VERSION (kafka_$SCALA_BINARY_VERSION + reload4j) into $LIB_DIR"
    start_s=$SECONDS
    if ! (cd "$work" && mvn -B -q -Dstyle.color=never -f pom.xml \
        dependency:copy-dependencies \
        -DincludeScope=runtime \
        -DoutputDirectory="$partial" 2>&1 | sed -e $'s/\x1b\\[[0-9;]*m//g') >&2; then
        rm -rf "$work" "$partial"
        die "mvn dependency:copy-dependencies failed for Kafka $KAFKA_VERSION"
    fi
    rm -rf "$work"
    [[ -f $partial/kafka_${SCALA_BINARY_VERSION}-${KAFKA_VERSION}.jar ]] ||
        die "fetch finished but kafka_${SCALA_BINARY_VERSION}-${KAFKA_VERSION}.jar is missing in $partial"
    mv "$partial" "$LIB_DIR"
    # Marker last: a cache without it is treated as incomplete and refetched.
    {
        echo "kafka_version=$KAFKA_VERSION"
        echo "jars=$(find "$LIB_DIR" -maxdepth 1 -name '*.jar' | wc -l)"
        echo "fetched_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    } >"$FETCH_MARKER"
    log "fetched $(find "$LIB_DIR" -maxdepth 1 -name '*.jar' | wc -l) jars in $((SECONDS - start_s))s"
    exec {lock_fd}>&-
}

# ------------------------------------------------------------ secured mode ----

# Users created at format time (SCRAM-SHA-512), each with a client
# properties file: admin (super user), ledger (the worker's principal, no
# ACL until one is created), upstream (a producer of the input topics).
SECURE_USERS=(admin ledger upstream)

# make_tls_material -> a throwaway CA, the broker's certificate (CN=broker, also
# its client certificate on the controller listener) and a client certificate
# CN=ledger (mTLS principal User:ledger), all PEM under $TLS_DIR
# (make_tls_certificates), their PEM key stores; random SCRAM passwords.
make_tls_material() {
    local name
    make_tls_certificates "recurrence-ledger test CA" broker ledger
    for name in broker ledger; do
        # Java's PEM key store: PKCS#8 private key, then the certificate.
        cat "$TLS_DIR/$name.key" "$TLS_DIR/$name.pem" >"$TLS_DIR/$name-keystore.pem"
    done
    for name in "${SECURE_USERS[@]}"; do
        openssl rand -hex 16 >"$TLS_DIR/$name.password"
    done
    chmod 600 "$TLS_DIR"/*
}

# write_client_files -> CA, client certificate and properties files (Java
# client.properties format, read by --kafka-config) in $CLIENT_DIR, and
# secure.env with the exports the tests read.
write_client_files() {
    local name
    cp "$TLS_DIR/ca.pem" "$CLIENT_DIR/ca.pem"
    cp "$TLS_DIR/ledger-keystore.pem" "$CLIENT_DIR/ledger-client.pem"
    cp "$TLS_DIR/ledger.pem" "$CLIENT_DIR/ledger-client.crt"
    cp "$TLS_DIR/ledger.key" "$CLIENT_DIR/ledger-client.key"
    for name in "${SECURE_USERS[@]}"; do
        cat >"$CLIENT_DIR/$name.properties" <<EOF
# Written by deploy/kafka.sh --secure: user $name on the SASL_SSL listener.
bootstrap.servers=$HOST:$KAFKA_PORT
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="$name" password="$(cat "$TLS_DIR/$name.password")";
ssl.truststore.type=PEM
ssl.truststore.location=$CLIENT_DIR/ca.pem
EOF
    done
    cat >"$CLIENT_DIR/ledger-mtls.properties" <<EOF
# Written by deploy/kafka.sh --secure: the client certificate CN=ledger
# (principal User:ledger) on the SSL listener, which requires one.
bootstrap.servers=$HOST:$KAFKA_MTLS_PORT
security.protocol=SSL
ssl.keystore.type=PEM
ssl.keystore.location=$CLIENT_DIR/ledger-client.pem
ssl.truststore.type=PEM
ssl.truststore.location=$CLIENT_DIR/ca.pem
EOF
    cat >"$CLIENT_DIR/secure.env" <<EOF
export RL_SECURE_KAFKA_DIR=$CLIENT_DIR
export RL_SECURE_KAFKA_BOOTSTRAP=$HOST:$KAFKA_PORT
export RL_SECURE_KAFKA_MTLS_BOOTSTRAP=$HOST:$KAFKA_MTLS_PORT
EOF
    chmod 600 "$CLIENT_DIR"/*
}

# scram_args -> StorageTool --add-scram arguments, one per user.
scram_args() {
    local name
    for name in "${SECURE_USERS[@]}"; do
        printf '%s\n' --add-scram "SCRAM-SHA-512=[name=$name,password=$(cat "$TLS_DIR/$name.password")]"
    done
}

# ------------------------------------------------------------ lifecycle ----

# running_pid -> prints the broker pid if the pid file names a live broker.
running_pid() {
    service_pid "$MAIN_CLASS"
}

new_cluster_id() {
    # 16 random bytes, base64url without padding = 22 characters. An id that
    # starts with '-' would be parsed as an option by StorageTool (Kafka's own
    # Uuid.randomUuid() rejects those too), so draw again in that case.
    local id
    while :; do
        id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
        if [[ ${#id} -eq 22 && $id != -* ]]; then
            echo "$id"
            return 0
        fi
    done
}

# listener_configs -> the listener lines of server.properties: PLAINTEXT,
# or (secured mode) SASL_SSL + SSL (mTLS) + an SSL controller listener
# whose client certificate is the broker's own (principal User:broker).
listener_configs() {
    if ((SECURE == 0)); then
        cat <<EOF
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
EOF
        return 0
    fi
    cat <<EOF
# Secured mode (deploy/kafka.sh --secure): clients on SASL_SSL (SCRAM-SHA-512)
# or on SSL with a client certificate (mTLS); the controller listener takes
# only the broker's own certificate. Certificates: $TLS_DIR (throwaway CA).
listeners=SASL_SSL://$HOST:$KAFKA_PORT,SSL://$HOST:$KAFKA_MTLS_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=SASL_SSL://$HOST:$KAFKA_PORT,SSL://$HOST:$KAFKA_MTLS_PORT
inter.broker.listener.name=SASL_SSL
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:SSL,SASL_SSL:SASL_SSL,SSL:SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "$TLS_DIR/admin.password")";
ssl.keystore.type=PEM
ssl.keystore.location=$TLS_DIR/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.pem
listener.name.ssl.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
# The principal of a certificate is its CN (CN=ledger: User:ledger).
ssl.principal.mapping.rules=RULE:^CN=([^,]+).*\$/\$1/,DEFAULT
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin;User:broker
EOF
}

write_configs() {
    cat >"$SERVER_PROPS" <<EOF
# Written by deploy/kafka.sh: one KRaft node, broker + controller combined.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT
$(listener_configs)
log.dirs=$DATA_DIR

# Single node: internal topics must fit on one replica, or there is no group
# coordinator and no transaction coordinator (defaults assume 3 brokers).
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
default.replication.factor=1
min.insync.replicas=1
# Fewer internal partitions than the default 50: faster first group join and
# first transaction (coordinator loading) on a small machine.
offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4

# Tests: no delay before the first consumer-group rebalance.
group.initial.rebalance.delay.ms=0
num.partitions=1
auto.create.topics.enable=true
# The cleaner's default 128 MiB dedupe buffer does not fit a small heap.
log.cleaner.dedupe.buffer.size=16777216

num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=168
log.segment.bytes=1073741824
EOF

    cat >"$LOG4J_PROPS" <<'EOF'
# Written by deploy/kafka.sh: everything to stdout, which is kafka.log.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=INFO
log4j.logger.kafka.authorizer.logger=WARN
EOF
}

format_storage() {
    local keep_data=$1 cluster_id
    if ((keep_data)) && [[ -f $DATA_DIR/meta.properties ]]; then
        log "keeping existing data in $DATA_DIR ($(grep -E '^cluster.id=' "$DATA_DIR/meta.properties" || true))"
        return 0
    fi
    if ((keep_data)); then
        log "--keep-data: no formatted storage in $DATA_DIR yet; formatting fresh"
    fi
    rm -rf "$DATA_DIR"
    mkdir -p "$DATA_DIR"
    cluster_id="$(new_cluster_id)"
    echo "$cluster_id" >"$RUN_DIR/cluster.id"
    log "formatting KRaft storage (cluster id $cluster_id)"
    local scram=()
    if ((SECURE)); then
        mapfile -t scram < <(scram_args)
    fi
    if ! "$JAVA" -Xmx256m -Dlog4j.configuration="file:$LOG4J_PROPS" \
        -cp "$LIB_DIR/*" kafka.tools.StorageTool format \
        -t "$cluster_id" -c "$SERVER_PROPS" ${scram[@]+"${scram[@]}"} >"$RUN_DIR/format.log" 2>&1; then
        cat "$RUN_DIR/format.log" >&2
        die "kafka.tools.StorageTool format failed"
    fi
}

# broker_ready -> 0 once this run's log says "Kafka Server started" and the
# client port answers.
broker_ready() {
    grep -q 'Kafka Server started' "$LOG_FILE" 2>/dev/null &&
        port_open "$HOST" "$KAFKA_PORT"
}

# wait_ready PID [KILL_ON_TIMEOUT] -> wait_answers for the broker (on
# timeout, kills it when KILL_ON_TIMEOUT is 1).
wait_ready() {
    wait_answers "Kafka broker" "$1" "$KAFKA_START_TIMEOUT" "${2:-0}" broker_ready
}

cmd_start() {
    local keep_data=0 arg
    for arg in "$@"; do
        case $arg in
        --keep-data) keep_data=1 ;;
        *) die "start: unknown option '$arg'" ;;
        esac
    done
    local pid
    pid="$(running_pid)"
    if [[ -n $pid ]]; then
        wait_ready "$pid"
        log "already running (pid $pid) on $HOST:$KAFKA_PORT"
        return 0
    fi
    rm -f "$PID_FILE"
    if port_open "$HOST" "$KAFKA_PORT"; then
        die "port $HOST:$KAFKA_PORT is already in use by another process (set KAFKA_PORT)"
    fi
    if port_open "$HOST" "$KAFKA_CONTROLLER_PORT"; then
        die "port $HOST:$KAFKA_CONTROLLER_PORT is already in use by another process (set KAFKA_CONTROLLER_PORT)"
    fi
    if ((SECURE)) && port_open "$HOST" "$KAFKA_MTLS_PORT"; then
        die "port $HOST:$KAFKA_MTLS_PORT is already in use by another process (set KAFKA_MTLS_PORT)"
    fi

    require_java
    if fetch_is_complete; then
        log "using cached Kafka $KAFKA_VERSION jars in $LIB_DIR"
    else
        cmd_fetch
    fi

    local start_s=$SECONDS
    if ((SECURE)); then
        # --keep-data keeps the users (and so their passwords) of the
        # formatted storage: keep the material too when it is there.
        if ((keep_data == 0)) || [[ ! -f $TLS_DIR/admin.password || ! -f $DATA_DIR/meta.properties ]]; then
            keep_data=0
            make_tls_material
        fi
        write_client_files
    fi
    write_configs
    format_storage "$keep_data"

    # Keep the previous run's log for post-mortems; readiness is judged on
    # a fresh file so that an old "Kafka Server started" line cannot count.
    if [[ -f $LOG_FILE ]]; then
        mv -f "$LOG_FILE" "$LOG_FILE.prev"
    fi

    log "starting broker on $HOST:$KAFKA_PORT (controller $KAFKA_CONTROLLER_PORT), run dir $RUN_DIR"
    # setsid: own session, so the broker outlives the calling shell and its
    # terminal; the inner shell writes its own pid (= the java pid after exec).
    # shellcheck disable=SC2016,SC2086 # $$ is for the inner shell; heap opts split on purpose
    setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PID_FILE" \
        "$JAVA" $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExitOnOutOfMemoryError \
        -Djava.awt.headless=true \
        -Dlog4j.configuration="file:$LOG4J_PROPS" \
        -Dkafka.logs.dir="$RUN_DIR" \
        -cp "$LIB_DIR/*" "$MAIN_CLASS" "$SERVER_PROPS" \
        </dev/null >"$LOG_FILE" 2>&1 {LIFECYCLE_LOCK_FD}>&- &

    pid="$(wait_pid_file "Kafka broker")"
    wait_ready "$pid" 1
    log "Kafka $KAFKA_VERSION ready (pid $pid) on $HOST:$KAFKA_PORT in $((SECONDS - start_s))s"
    if ((SECURE)); then
        log "secured: SASL_SSL (SCRAM-SHA-512) on $HOST:$KAFKA_PORT, SSL with client certificates on $HOST:$KAFKA_MTLS_PORT, ACLs enforced (super user admin)"
        log "client material in $CLIENT_DIR: ca.pem, ledger-client.pem (CN=ledger), $(cd "$CLIENT_DIR" && ls -- *.properties | tr '\n' ' ')"
        log "exports for the tests: source $CLIENT_DIR/secure.env"
    fi
}

cmd_stop() {
    stop_service "Kafka broker" "$KAFKA_STOP_TIMEOUT"
}

cmd_status() {
    report_status "$HOST:$KAFKA_PORT" "does not answer" port_open "$HOST" "$KAFKA_PORT"
}

main() {
    local cmd=${1:-}
    if [[ $# -gt 0 ]]; then
        shift
    fi
    case $cmd in
    start | stop | restart-keep-data) lock_lifecycle ;;
    esac
    case $cmd in
    fetch) cmd_fetch ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    restart-keep-data)
        cmd_stop
        cmd_start --keep-data
        ;;
    logs) tail -n "${1:-100}" "$LOG_FILE" >&2 ;;
    -h | --help | help) usage ;;
    *)
        usage
        exit 2
        ;;
    esac
}

main "$@"
