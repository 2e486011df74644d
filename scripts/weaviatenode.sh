#!/usr/bin/env bash
# A real single-node Weaviate 1.35 on 127.0.0.1, built from source through the Go module proxy.
#
#   scripts/weaviatenode.sh fetch    # go install weaviate-server into $ROOT/weaviate-$VER (once; ~11 min, 1.8 GB of modules)
#   scripts/weaviatenode.sh start    # start in the background, wait for /v1/.well-known/ready, print the URL
#   scripts/weaviatenode.sh stop
#   scripts/weaviatenode.sh pid      # the server's process id (for CPU-time readings in benchmarks)
# Concurrent calls (CI's background fetch and a test fixture's start) wait for each other on lock files.
#
# Env: ROOT (default ${TMPDIR:-/tmp}/hybridsearch-engines), WEAVIATE_PORT (9290), WEAVIATE_GRPC_PORT (50091),
#      WEAVIATE_MAX_RESULTS (QUERY_MAXIMUM_RESULTS, 1000000: the most objects one query may return;
#      Weaviate's own default is 10000), GO (the go command; default go).
# The node binds 127.0.0.1 only, with anonymous access (a loopback test node) and no vectorizer module.
set -euo pipefail
ROOT=${ROOT:-${TMPDIR:-/tmp}/hybridsearch-engines}
PORT=${WEAVIATE_PORT:-9290}
GRPC=${WEAVIATE_GRPC_PORT:-50091}
GO=${GO:-go}
MAX_RESULTS=${WEAVIATE_MAX_RESULTS:-1000000}
VER=1.35.2
BIN=$ROOT/weaviate-$VER/weaviate-server
DATA=$ROOT/weaviate-data
PIDF=$DATA/node.pid
LOG=$ROOT/weaviate-stdout.log

locked() {  # run "$@" holding $ROOT/$1.lock: concurrent fetches / starts wait for each other
  local name=$1; shift
  mkdir -p "$ROOT"
  ( flock 9; "$@" ) 9>"$ROOT/$name.lock"
}

fetch() {
  if [ -x "$BIN" ]; then echo "weaviate $VER already built: $BIN"; return 0; fi
  mkdir -p "$ROOT/weaviate-$VER"
  # GOBIN makes go install put the binary there; the module cache stays go's own (GOMODCACHE)
  GOBIN="$ROOT/weaviate-$VER" GOFLAGS=-mod=mod "$GO" install "github.com/weaviate/weaviate/cmd/weaviate-server@v$VER"
  [ -x "$BIN" ] && echo "weaviate $VER built: $BIN"
}

ready() { curl -sf --max-time 5 "http://127.0.0.1:$PORT/v1/.well-known/ready" >/dev/null 2>&1; }

alive() {  # the pid file names a running weaviate-server
  [ -s "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null && grep -qa weaviate-server "/proc/$(cat "$PIDF")/cmdline" 2>/dev/null
}

wait_ready() {  # until /v1/.well-known/ready answers; fails if the process dies or after 180 s
  local t0=$1
  for _ in $(seq 1 360); do
    if ready; then
      echo "weaviate ready after $(echo "$(date +%s.%N) - $t0" | bc) s: http://127.0.0.1:$PORT grpc=$GRPC pid=$(cat "$PIDF" 2>/dev/null)"
      return 0
    fi
    if [ -s "$PIDF" ] && ! kill -0 "$(cat "$PIDF")" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "weaviate FAILED to start; see $LOG" >&2
  tail -20 "$LOG" >&2 || true
  return 1
}

start() {
  local t0
  [ -x "$BIN" ] || locked weaviate-fetch fetch
  t0=$(date +%s.%N)
  # a node that is up, or whose process lives but answers slowly, is never started twice
  if ready || alive; then
    wait_ready "$t0" >/dev/null && { echo "weaviate already running: http://127.0.0.1:$PORT"; return 0; }
    return 1
  fi
  mkdir -p "$DATA"
  rm -f "$PIDF"
  # CLUSTER_ADVERTISE_ADDR: without it the node may pick an IPv6 address and exit with
  # "too many colons in address"; the gossip / data ports sit next to the HTTP port, bound to
  # loopback (CLUSTER_BIND_ADDR); no Go profiling server (it would listen on :6060, every interface).
  # Weaviate 1.35 has no setting for the address of its gRPC and internal data listeners: they
  # listen on every interface (checked below and said in docs/storages/weaviate.md)
  env PERSISTENCE_DATA_PATH="$DATA" AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true \
      DEFAULT_VECTORIZER_MODULE=none ENABLE_MODULES= CLUSTER_HOSTNAME=node1 CLUSTER_ADVERTISE_ADDR=127.0.0.1 \
      CLUSTER_BIND_ADDR=127.0.0.1 GO_PROFILING_DISABLE=true PROMETHEUS_MONITORING_ENABLED=false \
      CLUSTER_GOSSIP_BIND_PORT=$((PORT + 10)) CLUSTER_DATA_BIND_PORT=$((PORT + 11)) \
      RAFT_PORT=$((PORT + 12)) RAFT_INTERNAL_RPC_PORT=$((PORT + 13)) RAFT_BOOTSTRAP_EXPECT=1 \
      GRPC_PORT="$GRPC" DISABLE_TELEMETRY=true LOG_LEVEL=warning QUERY_DEFAULTS_LIMIT=25 \
      QUERY_MAXIMUM_RESULTS="$MAX_RESULTS" \
      nohup "$BIN" --host 127.0.0.1 --port "$PORT" --scheme http >"$LOG" 2>&1 &
  echo $! >"$PIDF"
  wait_ready "$t0" && open_ports
}

open_ports() {  # warns of any listener of the node beyond loopback (the gRPC and data ports are expected)
  local pid others
  command -v ss >/dev/null 2>&1 || return 0
  pid=$(cat "$PIDF")
  others=$(ss -Hltnp 2>/dev/null | grep "pid=$pid," | awk '{print $4}' | grep -v -E '^(127\.0\.0\.1|\[::1\]|\[::ffff:127\.0\.0\.1\]):' || true)
  [ -z "$others" ] || echo "note: weaviate listens beyond loopback on: $(echo $others) (Weaviate 1.35 has no bind setting for its gRPC and data ports)" >&2
}

stop() {
  local pid
  [ -s "$PIDF" ] || { echo "weaviate: not running (no $PIDF)"; return 0; }
  # a pid file left by a node that died (a reboot, a crash) may name another program by now
  alive || { rm -f "$PIDF"; echo "weaviate: not running (stale $PIDF)"; return 0; }
  pid=$(cat "$PIDF")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || { rm -f "$PIDF"; echo "weaviate stopped"; return 0; }; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true; rm -f "$PIDF"; echo "weaviate killed"
}

case "${1:-}" in
  fetch) locked weaviate-fetch fetch ;;
  start) locked weaviate start ;;
  stop)  stop ;;
  pid)   cat "$PIDF" ;;
  *) echo "usage: $0 fetch | start | stop | pid" >&2; exit 2 ;;
esac
