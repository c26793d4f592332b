# shellcheck shell=bash
# Pieces the bench/ scripts share; each sources it after `set -euo pipefail`:
#   . "$(dirname "$0")/lib.sh"
# It sets `root` (the workspace) and, through make_workdir and start_nginx, `dir`, `port`, `url`
# and `server_pid`.

root=$(cd "$(dirname "$0")/.." && pwd)

# parse_options USAGE LETTER=VARIABLE... -- ARG...: sets each VARIABLE from `-LETTER VALUE` in
# ARG; any other option prints "usage: $0 USAGE" and exits 2.
parse_options() {
    local usage=$1 letters="" opt
    local -A variable
    shift
    while [ "$1" != -- ]; do
        variable[${1%%=*}]=${1#*=}
        letters+="${1%%=*}:"
        shift
    done
    shift
    local OPTIND=1
    while getopts "$letters" opt; do
        [ -n "${variable[$opt]:-}" ] || { echo "usage: $0 $usage" >&2; exit 2; }
        printf -v "${variable[$opt]}" '%s' "$OPTARG"
    done
}

# need_tools TOOL...: exits naming the first one that is not installed.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$0: $tool is missing: run scripts/bootstrap" >&2; exit 1; }
    done
}

# need_root WHY: exits with WHY unless running as root.
need_root() {
    [ "$(id -u)" -eq 0 ] || { echo "$0: $1" >&2; exit 1; }
}

need_two_cpus() {
    [ "$(nproc)" -ge 2 ] || { echo "$0: needs 2 CPUs to pin client and server apart" >&2; exit 1; }
}

# build_example PACKAGE EXAMPLE: builds it (release) and prints the binary's path.
build_example() {
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
    # Called inside $(...), where bash drops `set -e`: fail explicitly.
    cargo build --quiet --release -p "$1" --example "$2" --manifest-path "$root/Cargo.toml" || exit
    echo "$CARGO_TARGET_DIR/release/examples/$2"
}

# build_reqcost: builds the reqcost command (release) and prints its path.
build_reqcost() {
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
    cargo build --quiet --release -p reqcost --bin reqcost --manifest-path "$root/Cargo.toml" || exit
    echo "$CARGO_TARGET_DIR/release/reqcost"
}

# make_workdir: a fresh directory in `dir`, removed on exit after stopping `server_pid` if set.
# World-readable because the servers' workers run as www-data.
make_workdir() {
    dir=$(mktemp -d)
    chmod 755 "$dir"
    server_pid=
    trap cleanup EXIT
}

cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$dir"
}

# free_port: prints a loopback TCP port that is free now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT: returns once 127.0.0.1:PORT accepts a connection, or after about 5 s.
wait_port() {
    local _
    for _ in $(seq 50); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1',$1)).close()" 2>/dev/null && break
        sleep 0.1
    done
}

# write_1k DIR: creates DIR with the 1 KB file the benchmarks request, DIR/1k.txt.
write_1k() {
    mkdir -p "$1"
    head -c 1024 /dev/zero | tr '\0' 'x' > "$1/1k.txt"
}

# fill_conf TEMPLATE DIR PORT [KEY VALUE]...: prints the server config crates/testkit/conf/TEMPLATE
# with each {KEY} replaced by VALUE, then {dir} by DIR and {port} by PORT, as the Rust tests fill
# it in (crates/testkit/src/config.rs).
fill_conf() {
    local conf dir=$2 port=$3
    conf=$(<"$root/crates/testkit/conf/$1")
    shift 3
    while [ $# -ge 2 ]; do
        conf=${conf//"{$1}"/"$2"}
        shift 2
    done
    conf=${conf//"{dir}"/"$dir"}
    printf '%s\n' "${conf//"{port}"/"$port"}"
}

# start_nginx MAIN HTTP [WORKERS]: nginx (one worker unless WORKERS says more, pinned to CPU 1
# unless MAIN sets worker_cpu_affinity) serving `dir`/www/1k.txt at `url`, on a free loopback
# `port`, its pid in `server_pid`, returning once it accepts connections. MAIN holds the
# main-context directives that differ between benchmarks, the events block included; HTTP the
# http-context ones.
start_nginx() {
    port=$(free_port)
    url=http://127.0.0.1:$port/1k.txt
    write_1k "$dir/www"
    fill_conf nginx.conf "$dir" "$port" main "$1" http "$2" server "" listen "127.0.0.1:{port}" |
        sed "s/^worker_processes 1;/worker_processes ${3:-1};/" > "$dir/nginx.conf"
    taskset -c 1 nginx -p "$dir" -c "$dir/nginx.conf" &
    server_pid=$!
    wait_port "$port"
}

# nginx_keepalive_1k: nginx (one worker, sendfile and access log on, as Debian ships it) on a
# free port, serving the 1 KB file at `url` to endless keep-alive connections; sets `port`,
# `url` and `worker` (the worker's pid) beside start_nginx's `server_pid`.
nginx_keepalive_1k() {
    start_nginx "events { worker_connections 1024; }" \
        "sendfile on; tcp_nopush on; keepalive_requests 1000000; access_log $dir/access.log;"
    worker=$(cat "/proc/$server_pid/task/$server_pid/children")
    worker=${worker%% *}
}

# tree_cpu: ns on CPU of nginx's master ($server_pid) and worker ($worker), threads included.
tree_cpu() {
    cat /proc/"$server_pid"/task/*/schedstat /proc/"$worker"/task/*/schedstat 2>/dev/null |
        awk '{s += $1} END {printf "%.0f\n", s}'
}

# wait_attached PID ERRFILE: returns once the process PID has said `attached` in ERRFILE; exits
# with what it said if it ends first.
wait_attached() {
    until grep -q attached "$2" 2>/dev/null; do
        kill -0 "$1" 2>/dev/null || { cat "$2" >&2; exit 1; }
        sleep 0.05
    done
}

# wrk_load: one wrk run of `secs` seconds over `conns` connections to `url`, pinned to CPU 0;
# prints "requests nginx_cpu_ns_per_request" (tree_cpu over the run).
wrk_load() {
    local c0 c1 n
    c0=$(tree_cpu)
    n=$(taskset -c 0 wrk -t1 -c"$conns" -d"${secs}s" "$url" | awk '/requests in/ {print $1}')
    c1=$(tree_cpu)
    echo "$n $(( (c1 - c0) / n ))"
}

# quiet: another process's eBPF programs on the syscall tracepoints (a reqcost test running on the
# same machine) would run on nginx's syscalls too: wait until there are none.
quiet() {
    for _ in $(seq 600); do
        bpftool prog show 2>/dev/null | grep -q 'name sys_enter' || return 0
        sleep 0.1
    done
    echo "# warning: other eBPF programs stayed attached to the syscall tracepoints" >&2
}

# on_off_pairs PAIRS: PAIRS pairs of `run no-tls` and `run tls` (the caller's function; each
# prints "requests ns/request events"), the order alternating from pair to pair, one line per
# pair in $dir/pairs: "pair no-tls... tls...".
on_off_pairs() {
    local i off on
    : > "$dir/pairs"
    for i in $(seq "$1"); do
        if [ $((i % 2)) -eq 1 ]; then
            off=$(run no-tls); on=$(run tls)
        else
            on=$(run tls); off=$(run no-tls)
        fi
        echo "$i $off $on" | tee -a "$dir/pairs"
    done
}
