# shellcheck shell=bash
# Helpers shared by the deploy/ scripts (sourced, never executed directly).
# Every message goes to stderr so that callers may capture stdout safely
# (see services.sh, whose stdout is meant for `eval`).

# Prefix for messages; each script sets RL_LOG_TAG before sourcing this file.
: "${RL_LOG_TAG:=deploy}"

log() {
    printf '[%s] %s\n' "$RL_LOG_TAG" "$*" >&2
}

# usage -> the calling script's header comment (its lines after the first,
# up to the first line that is not a comment) on stderr.
usage() {
    awk 'NR == 1 { next } /^# shellcheck|^[^#]/ { exit } { sub(/^# ?/, ""); print }' \
        "${BASH_SOURCE[-1]}" >&2
}

# The java binary of the JVM services (kafka.sh, registry.sh): $JAVA, else
# $JAVA_HOME/bin/java, else java on the PATH.
if [[ -z ${JAVA:-} ]]; then
    if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
        JAVA="$JAVA_HOME/bin/java"
    else
        JAVA="java"
    fi
fi

# print_log_tail -> the last 40 lines of the calling script's LOG_FILE on stderr.
print_log_tail() {
    if [[ -f $LOG_FILE ]]; then
        log "---- last 40 lines of $LOG_FILE ----"
        tail -n 40 "$LOG_FILE" >&2
        log "---- end of log ----"
    fi
}

# require_java -> dies when $JAVA cannot be run.
require_java() {
    command -v "$JAVA" >/dev/null 2>&1 ||
        die "java not found (run deploy/ensure-tools.sh or set JAVA/JAVA_HOME)"
}

die() {
    printf '[%s] ERROR: %s\n' "$RL_LOG_TAG" "$*" >&2
    exit 1
}

# pid_alive PID -> 0 if a process with that pid exists (and is not a zombie).
pid_alive() {
    local pid=$1 state
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # A zombie still answers kill -0; treat it as dead.
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
    [[ $state != Z ]]
}

# pid_cmdline_has PID WORD -> 0 if the process command line contains WORD
# (guards against a stale pid file whose pid was reused by another program).
pid_cmdline_has() {
    local pid=$1 word=$2
    [[ -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$word"
}

# read_pid FILE -> prints the pid stored in FILE (empty if none).
read_pid() {
    local file=$1
    [[ -f $file ]] || return 0
    tr -dc '0-9' <"$file"
}

# port_open HOST PORT -> 0 if a TCP connection to HOST:PORT succeeds.
port_open() {
    local host=$1 port=$2
    # bash's /dev/tcp; timeout guards against a filtered port hanging.
    timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

# stop_pid NAME PID TIMEOUT_S -> SIGTERM, wait up to TIMEOUT_S, then SIGKILL.
stop_pid() {
    local name=$1 pid=$2 timeout_s=$3 waited=0
    pid_alive "$pid" || return 0
    log "stopping $name (pid $pid, SIGTERM)"
    kill -TERM "$pid" 2>/dev/null || true
    while pid_alive "$pid"; do
        if ((waited >= timeout_s * 10)); then
            log "$name did not exit within ${timeout_s}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            local k=0
            while pid_alive "$pid" && ((k < 50)); do
                sleep 0.1
                k=$((k + 1))
            done
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    if pid_alive "$pid"; then
        die "$name (pid $pid) is still alive after SIGKILL"
    fi
    log "$name stopped after ~$((waited / 10))s"
}

# The service commands below expect the sourcing script to define RUN_DIR,
# PID_FILE, LOG_FILE and running_pid (prints the pid of its running
# service, or nothing).

# wait_pid_file NAME -> prints the pid a launcher wrote to PID_FILE (the
# `setsid bash -c 'echo $$ >"$PID_FILE"; exec …' &` of kafka.sh and
# registry.sh); dies when none appears within 5 s.
wait_pid_file() {
    local name=$1 i=0 pid
    pid="$(read_pid "$PID_FILE")"
    while [[ -z $pid ]]; do
        ((i < 100)) || die "$name launcher did not write $PID_FILE"
        sleep 0.05
        i=$((i + 1))
        pid="$(read_pid "$PID_FILE")"
    done
    echo "$pid"
}

# wait_answers NAME PID TIMEOUT_S KILL_ON_TIMEOUT PROBE... -> waits until
# PROBE (a command) succeeds while PID lives. Dies with the log tail when
# PID dies (and removes PID_FILE), or after TIMEOUT_S: then it first stops
# PID when KILL_ON_TIMEOUT is 1 (a start that launched it), and otherwise
# leaves it running and says how to stop it.
wait_answers() {
    local name=$1 pid=$2 timeout_s=$3 kill_on_timeout=$4 start_s=$SECONDS
    shift 4
    while :; do
        if ! pid_alive "$pid"; then
            print_log_tail
            rm -f "$PID_FILE"
            die "$name process $pid died during startup"
        fi
        if "$@"; then
            return 0
        fi
        if ((SECONDS - start_s >= timeout_s)); then
            print_log_tail
            if ((kill_on_timeout)); then
                stop_pid "unready $name" "$pid" 5
                rm -f "$PID_FILE"
                die "$name (pid $pid) not ready after ${timeout_s}s; killed it"
            fi
            die "$name (pid $pid) not ready after ${timeout_s}s; it is still running: 'deploy/$RL_LOG_TAG stop' to kill it"
        fi
        sleep 0.25
    done
}

# service_pid WORD -> prints the pid in PID_FILE if that process is alive
# and its command line contains WORD (a reused pid is not the service).
service_pid() {
    local pid
    pid="$(read_pid "$PID_FILE")"
    if [[ -n $pid ]] && pid_alive "$pid" && pid_cmdline_has "$pid" "$1"; then
        echo "$pid"
    fi
}

# lock_lifecycle -> serialise start/stop of this run dir across processes.
# A started daemon must not inherit the descriptor: launch it with
# {LIFECYCLE_LOCK_FD}>&- .
LIFECYCLE_LOCK_FD=""
lock_lifecycle() {
    mkdir -p "$RUN_DIR"
    exec {LIFECYCLE_LOCK_FD}>"$RUN_DIR/.lifecycle.lock"
    flock "$LIFECYCLE_LOCK_FD"
}

# stop_service NAME TIMEOUT_S -> stop the running service (stop_pid) and
# remove its pid file; 0 when it was not running.
stop_service() {
    local name=$1 timeout_s=$2 pid
    pid="$(running_pid)"
    if [[ -z $pid ]]; then
        rm -f "$PID_FILE"
        log "not running"
        return 0
    fi
    stop_pid "$name" "$pid" "$timeout_s"
    rm -f "$PID_FILE"
}

# report_status WHERE FAILURE PROBE... -> log whether the service runs and
# answers PROBE (a command) at WHERE; 0 only when both hold. FAILURE ends
# the message when the process lives but PROBE fails.
report_status() {
    local where=$1 failure=$2 pid
    shift 2
    pid="$(running_pid)"
    if [[ -z $pid ]]; then
        log "not running"
        return 1
    fi
    if ! "$@"; then
        log "process $pid alive but $where $failure"
        return 1
    fi
    log "running (pid $pid) on $where"
}

# ensure_redis_installed -> installs Debian's redis-server (apt_install) when
# redis-server or redis-cli is missing (redis.sh, redis-cluster.sh).
ensure_redis_installed() {
    if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
        return 0
    fi
    log "redis-server not found; installing Debian's redis-server"
    apt_install redis-server
    command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after apt-get install"
}

# redis_base_config HOST PORT -> the redis.conf lines every local Redis of
# deploy/ starts with (daemonized, PID_FILE / LOG_FILE / RUN_DIR of the
# caller, no persistence), on stdout.
redis_base_config() {
    printf '%s\n' "bind $1" "port $2" "protected-mode yes" "daemonize yes" "supervised no" "pidfile $PID_FILE" \
        "logfile $LOG_FILE" "loglevel notice" "dir $RUN_DIR" 'save ""' "appendonly no"
}

# make_tls_certificates CA_NAME NAME... -> under the caller's $TLS_DIR (emptied
# first, as $CLIENT_DIR): a throwaway CA (ca.pem, ca.key; CN=CA_NAME) and, per
# NAME, NAME.key and NAME.pem signed by it (CN=NAME, SAN 127.0.0.1/localhost,
# serverAuth and clientAuth: a TLS Redis Cluster's nodes and Kafka's controller
# listener present theirs as clients too). openssl's output goes to
# $RUN_DIR/openssl.log, shown on failure. The caller sets RUN_DIR, TLS_DIR and
# CLIENT_DIR (kafka.sh --secure, redis.sh --secure, redis-cluster.sh --tls).
make_tls_certificates() {
    local ca_name="$1" name
    shift
    command -v openssl >/dev/null 2>&1 || die "openssl not found (apt-get install openssl)"
    rm -rf "$TLS_DIR" "$CLIENT_DIR"
    mkdir -p "$TLS_DIR" "$CLIENT_DIR"
    chmod 700 "$TLS_DIR" "$CLIENT_DIR"
    local ssl_log="$RUN_DIR/openssl.log"
    : >"$ssl_log"
    {
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=$ca_name" \
            -keyout "$TLS_DIR/ca.key" -out "$TLS_DIR/ca.pem" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        for name in "$@"; do
            openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout "$TLS_DIR/$name.key" -out "$TLS_DIR/$name.csr"
            printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=digitalSignature,keyEncipherment" \
                "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$TLS_DIR/$name.ext"
            openssl x509 -req -in "$TLS_DIR/$name.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca.key" \
                -CAcreateserial -days 30 -sha256 -extfile "$TLS_DIR/$name.ext" -out "$TLS_DIR/$name.pem"
        done
    } >>"$ssl_log" 2>&1 || {
        cat "$ssl_log" >&2
        die "openssl failed making the throwaway CA and certificates"
    }
}

# make_redis_tls_material -> a throwaway CA and the server's certificate (CN=redis)
# (make_tls_certificates), and random passwords for the users default (the
# admin), ledger and dashboard (redis.sh --secure, redis-cluster.sh --tls).
make_redis_tls_material() {
    local name
    make_tls_certificates "recurrence-ledger redis test CA" redis
    for name in default ledger dashboard; do
        openssl rand -hex 24 >"$TLS_DIR/$name.password"
    done
    chmod 600 "$TLS_DIR"/*
}

# apt_install PKG... -> non-interactive apt-get install (update first).
# Debian's maintainer scripts would start a freshly installed daemon (e.g.
# redis-server on port 6379) through invoke-rc.d; a temporary policy-rc.d
# that answers 101 ("action forbidden") prevents that, so the only daemons
# running are the ones these scripts start themselves.
apt_install() {
    ((EUID == 0)) || die "need root to apt-get install $* (or install it yourself)"
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 0755 "$policy"
        created_policy=1
    fi
    local rc=0
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || rc=$?
    if ((rc == 0)); then
        log "apt-get install -y $*"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 || rc=$?
    fi
    if ((created_policy)); then
        rm -f "$policy"
    fi
    ((rc == 0)) || die "apt-get failed (exit $rc) while installing: $*"
}
