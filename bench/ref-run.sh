#!/bin/bash
# Starts a build of the real dify-sandbox in the foreground for
# bench/compare.py:  bench/ref-run.sh REF_BUILD PORT API_KEY
#
# REF_BUILD/run holds the reference's server binary `main` and its working
# tree (conf/, dependencies/), as its Docker image lays them out; build it
# from langgenius/dify-sandbox's source (docs/TESTING.md, "Benchmarks").
# This script writes run/conf/config.yaml (the reference's keys: port, key,
# this machine's interpreters, 4 workers) and execs run/main from run/.
#
# The reference adds a user to /etc/passwd at start and 1000 more on its
# first run. Unless REF_HOST_ETC=1, it runs in a mount namespace of its own
# where /etc is an overlay (the host's /etc below, a fresh directory on
# top), so the host's /etc stays as it was. PYTHON_PATH and NODEJS_PATH
# choose the interpreters (default /usr/bin/python3 and the node on PATH).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 REF_BUILD PORT API_KEY" >&2; exit 2; }
run=$(cd "$1" && pwd)/run
port=$2
key=$3
[ -x "$run/main" ] || { echo "$run/main is missing: build the reference first" >&2; exit 1; }
python=${PYTHON_PATH:-/usr/bin/python3}
node=${NODEJS_PATH:-$(command -v node)}
# the reference reads these too: they must not override its file
unset PYTHON_PATH NODEJS_PATH SANDBOX_PORT API_KEY

mkdir -p "$run/conf"
cat >"$run/conf/config.yaml" <<CONF
app:
  port: $port
  debug: false
  key: "$key"
max_workers: 4
max_requests: 50
worker_timeout: 5
python_path: $python
nodejs_path: $node
enable_network: true
enable_preload: false
log_path: ./logs
allowed_syscalls:
proxy:
  socks5: ''
  http: ''
  https: ''
CONF

cd "$run"
if [ "${REF_HOST_ETC:-0}" = 1 ]; then
        exec ./main
fi
overlay=$run/etc-overlay
rm -rf "$overlay"
mkdir -p "$overlay/upper" "$overlay/work"
exec unshare --mount --propagation private sh -c \
        'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc &&
         exec ./main' sh "$overlay"
