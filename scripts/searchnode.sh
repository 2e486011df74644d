#!/usr/bin/env bash
# Real single-node Elasticsearch 8.19 / OpenSearch 3.5 (+ k-NN) on 127.0.0.1, fetched from Maven Central.
#
#   scripts/searchnode.sh fetch            # download (mvn) + unpack both distributions under $ROOT (once)
#   scripts/searchnode.sh start es|os      # start in the background, wait for yellow health, print URL
#   scripts/searchnode.sh stop  es|os
#   scripts/searchnode.sh pid   es|os      # the node's process id (for CPU-time readings in benchmarks)
# Concurrent calls (CI's background start and a test fixture's) wait for each other on a lock file.
#
# Env: ROOT (default ${TMPDIR:-/tmp}/hybridsearch-engines), ES_PORT (9260), OS_PORT (9250), HEAP (512m),
#      JAVA17 (JDK for ES), JAVA21 (JDK >= 21 for OpenSearch 3.x), RUNAS (nobody: both refuse root).
# Both bind to 127.0.0.1 only; security is off (loopback test nodes).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT=${ROOT:-${TMPDIR:-/tmp}/hybridsearch-engines}
ES_PORT=${ES_PORT:-9260}
OS_PORT=${OS_PORT:-9250}
HEAP=${HEAP:-512m}
RUNAS=${RUNAS:-nobody}
ES_VER=8.19.21; OS_VER=3.5.0; KNN_VER=3.5.0.0

pick_jdk() {  # first existing JDK home among the arguments
  for d in "$@"; do [ -x "$d/bin/java" ] && { echo "$d"; return 0; }; done
  return 1
}
JAVA17=${JAVA17:-$(pick_jdk /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-21-jdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64 || true)}
JAVA21=${JAVA21:-$(pick_jdk /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/temurin-21-jdk-amd64 /usr/lib/jvm/java-21-openjdk-amd64 || true)}

as_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$RUNAS" -- "$@"; else "$@"; fi
}

locked() {  # run "$@" holding $ROOT/$1.lock: concurrent fetches / starts wait for each other
  local name=$1; shift
  mkdir -p "$ROOT"
  ( flock 9; "$@" ) 9>"$ROOT/$name.lock"
}

node_config() {  # the single-node settings of node $1 (es / os) on http port $2, loopback only
  cat <<YML
cluster.name: hs-$1
node.name: ${1}1
network.host: 127.0.0.1
http.port: $2
transport.port: $(($2 + 100))
discovery.type: single-node
path.data: $ROOT/$1-data
path.logs: $ROOT/$1-logs
cluster.routing.allocation.disk.threshold_enabled: false
YML
}

fetch() {
  if [ -f "$ROOT/.fetched" ]; then echo "engines already fetched under $ROOT"; return 0; fi
  mkdir -p "$ROOT/dist"
  mvn -q -B -f "$HERE/engines-pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$ROOT/dist" -DincludeTypes=zip
  cd "$ROOT"
  rm -rf "opensearch-$OS_VER" "elasticsearch-$ES_VER"
  unzip -q "dist/opensearch-$OS_VER.zip"
  unzip -q "dist/elasticsearch-$ES_VER.zip"
  OPENSEARCH_JAVA_HOME=$JAVA21 "opensearch-$OS_VER/bin/opensearch-plugin" install --batch \
      "file://$ROOT/dist/opensearch-knn-$KNN_VER.zip" >/dev/null
  node_config os "$OS_PORT" >> "opensearch-$OS_VER/config/opensearch.yml"
  { node_config es "$ES_PORT"; echo "xpack.security.enabled: false"; } >> "elasticsearch-$ES_VER/config/elasticsearch.yml"
  mkdir -p os-data os-logs es-data es-logs
  if [ "$(id -u)" = 0 ]; then
    chown -R "$RUNAS" "opensearch-$OS_VER" "elasticsearch-$ES_VER" os-data os-logs es-data es-logs
    chmod o+rx "$ROOT"
  fi
  touch "$ROOT/.fetched"
}

port_of() { [ "$1" = os ] && echo "$OS_PORT" || echo "$ES_PORT"; }

alive() {  # the node of this pid file is a running java process
  local pidf=$1
  [ -s "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null && grep -qa java "/proc/$(cat "$pidf")/cmdline" 2>/dev/null
}

wait_ready() {  # until the node answers yellow health; fails if its process dies or after 180 s
  local kind=$1 port=$2 pidf=$3 t0=$4
  for _ in $(seq 1 360); do
    if curl -sf --max-time 5 "http://127.0.0.1:$port/_cluster/health?wait_for_status=yellow&timeout=1s" >/dev/null 2>&1; then
      echo "$kind ready after $(echo "$(date +%s.%N) - $t0" | bc) s: http://127.0.0.1:$port pid=$(cat "$pidf")"
      return 0
    fi
    if [ -s "$pidf" ] && ! kill -0 "$(cat "$pidf")" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "$kind FAILED to start; see $ROOT/$kind-stdout.log and $ROOT/$kind-logs/" >&2
  tail -20 "$ROOT/$kind-stdout.log" >&2 || true
  return 1
}

start() {
  local kind=$1 port pidf t0
  port=$(port_of "$kind")
  pidf=$ROOT/$kind-logs/node.pid
  [ -f "$ROOT/.fetched" ] || locked fetch fetch
  t0=$(date +%s.%N)
  # a node that is up (or whose process lives but answers slowly, e.g. under load) is
  # never started twice: a second one could not bind the port and would lose the pid file
  if curl -sf --max-time 10 "http://127.0.0.1:$port/_cluster/health" >/dev/null 2>&1 || alive "$pidf"; then
    wait_ready "$kind" "$port" "$pidf" "$t0" >/dev/null && { echo "$kind already running: http://127.0.0.1:$port"; return 0; }
    return 1
  fi
  rm -f "$pidf"
  if [ "$kind" = os ]; then
    (cd "$ROOT/opensearch-$OS_VER" && as_user env OPENSEARCH_JAVA_HOME="$JAVA21" \
        OPENSEARCH_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP" bin/opensearch -d -p "$pidf" >"$ROOT/os-stdout.log" 2>&1 9>&-)
  else
    (cd "$ROOT/elasticsearch-$ES_VER" && as_user env ES_JAVA_HOME="$JAVA17" \
        ES_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP" bin/elasticsearch -d -p "$pidf" >"$ROOT/es-stdout.log" 2>&1 9>&-)
  fi
  wait_ready "$kind" "$port" "$pidf" "$t0"
}

stop() {
  local pidf=$ROOT/$1-logs/node.pid pid
  [ -s "$pidf" ] || { echo "$1: not running (no $pidf)"; return 0; }
  # a pid file left by a node that died (a reboot, a crash) may name another program by now
  alive "$pidf" || { rm -f "$pidf"; echo "$1: not running (stale $pidf)"; return 0; }
  pid=$(cat "$pidf")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || { echo "$1 stopped"; return 0; }; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true; echo "$1 killed"
}

# sourced (scripts/searchcluster.sh): the functions above only
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi
case "${1:-}" in
  fetch) locked fetch fetch ;;
  start) locked "${2:?es or os}" start "$2" ;;
  stop)  stop "${2:?es or os}" ;;
  pid)   cat "$ROOT/${2:?es or os}-logs/node.pid" ;;
  *) echo "usage: $0 fetch | start es|os | stop es|os | pid es|os" >&2; exit 2 ;;
esac
