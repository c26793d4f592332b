#!/usr/bin/env bash
# What call-chain sampling costs the server, and how long post-processing takes.
#
# apache2 (prefork, Debian's build: no frame pointers) serves a 1 KB file to one wrk connection
# (seeds/003's test case); apache2 is pinned to CPU 1, wrk and the sampler to CPU 0. Runs are
# interleaved (off/on, on/off, ...) and each reports server CPU per request (schedstat time of
# the apache2 tree / requests); the result is the paired sampled/unsampled ratio with a 95 %
# confidence interval. Then one -f second sampled run times Sampler::finish (draining,
# symbolization) and reports the profile size and peak memory. Last, the same pairing on a
# CPU-bound process (fixed work, its own CPU time): the cost of sampling alone.
#
# Usage: bench/profile-overhead.sh [-d SECONDS_PER_RUN] [-r PAIRS] [-f PROFILE_SECONDS] [-s SPIN_PAIRS]
set -euo pipefail

secs=1 reps=40 long=60 spins=10
usage="usage: $0 [-d SECONDS_PER_RUN] [-r PAIRS] [-f PROFILE_SECONDS] [-s SPIN_PAIRS]"
while getopts "d:r:f:s:" opt; do
    case $opt in
        d) secs=$OPTARG ;;
        r) reps=$OPTARG ;;
        f) long=$OPTARG ;;
        s) spins=$OPTARG ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
for tool in apache2 wrk taskset python3; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is missing: run scripts/bootstrap" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "$0: sampling needs root" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "$0: needs 2 CPUs to pin client and server apart" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build --quiet --release -p reqcost-profile --example overhead --manifest-path "$root/Cargo.toml"
overhead=$CARGO_TARGET_DIR/release/examples/overhead

dir=$(mktemp -d)
chmod 755 "$dir"
apache_pid=
cleanup() {
    [ -n "$apache_pid" ] && kill "$apache_pid" 2>/dev/null && wait "$apache_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$dir/htdocs"
head -c 1024 /dev/zero | tr '\0' 'x' > "$dir/htdocs/1k.txt"
cat > "$dir/httpd.conf" <<CONF
ServerRoot "$dir"
DefaultRuntimeDir "$dir"
PidFile "$dir/apache2.pid"
Listen 127.0.0.1:$port
ServerName 127.0.0.1
User www-data
Group www-data
LoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
TypesConfig /etc/mime.types
ErrorLog "$dir/error.log"
LogFormat "%h %l %u %t \"%r\" %>s %O" common
CustomLog "$dir/access.log" common
DocumentRoot "$dir/htdocs"
<Directory "$dir/htdocs">
    Require all granted
</Directory>
StartServers 2
MinSpareServers 1
MaxSpareServers 4
MaxKeepAliveRequests 0
CONF
# Its own session: apache2 signals its whole process group when it stops.
setsid taskset -c 1 apache2 -f "$dir/httpd.conf" -DFOREGROUND &
apache_pid=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$port)).close()" 2>/dev/null && break
    sleep 0.1
done

url=http://127.0.0.1:$port/1k.txt
echo "# apache2 prefork, 1 KB file, wrk -c1 keep-alive, ${secs}s runs, $reps pairs"
taskset -c 0 "$overhead" pairs "$apache_pid" "$url" "$secs" "$reps"
echo "# post-processing"
taskset -c 0 "$overhead" finish "$apache_pid" "$url" "$long"
echo "# sampling cost alone: a CPU-bound process on CPU 1, $spins pairs"
taskset -c 0 "$overhead" spin "$spins" </dev/null
