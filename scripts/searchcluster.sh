#!/usr/bin/env bash
# Three-node Elasticsearch / OpenSearch clusters on 127.0.0.1 (the distributions scripts/searchnode.sh
# fetched), for the cluster tests: an index of 3 primary shards and 1 replica, a node stopped mid-run.
#
#   scripts/searchcluster.sh start es|os         # three nodes of one distribution; waits for green with 3 nodes
#   scripts/searchcluster.sh stop  es|os         # every node of that cluster
#   scripts/searchcluster.sh stop-node  es|os N  # node N (1-3) only (SIGTERM: a graceful leave)
#   scripts/searchcluster.sh start-node es|os N  # node N again, with its data; waits until 3 nodes are in
#   scripts/searchcluster.sh pids es|os          # "N pid" of each running node
#   scripts/searchcluster.sh urls es|os          # the three http URLs, comma-separated
#
# Ports: Elasticsearch http 9271-9273, OpenSearch 9281-9283, transport = http + 100; the single
# nodes of searchnode.sh (9260 / 9250) are never touched. Each node has its own config copy
# (ES_PATH_CONF / OPENSEARCH_PATH_CONF), data and logs under $ROOT/es3/nodeN or $ROOT/os3/nodeN.
# `start` of a cluster none of whose nodes runs begins from empty data folders (a fresh cluster
# bootstraps; data of an earlier run could belong to another cluster UUID).
# Env: as searchnode.sh, plus CLUSTER_HEAP (320m per node), ES3_PORT (9271), OS3_PORT (9281).
set -euo pipefail
# shellcheck source=searchnode.sh
source "$(cd "$(dirname "$0")" && pwd)/searchnode.sh"
CLUSTER_HEAP=${CLUSTER_HEAP:-320m}
ES3_PORT=${ES3_PORT:-9271}
OS3_PORT=${OS3_PORT:-9281}
NODES="1 2 3"

http_of() { if [ "$1" = os ]; then echo $((OS3_PORT + $2 - 1)); else echo $((ES3_PORT + $2 - 1)); fi; }
dir_of() { echo "$ROOT/${1}3/node$2"; }
dist_of() { if [ "$1" = os ]; then echo "$ROOT/opensearch-$OS_VER"; else echo "$ROOT/elasticsearch-$ES_VER"; fi; }
yml_of() { if [ "$1" = os ]; then echo opensearch.yml; else echo elasticsearch.yml; fi; }

cluster_config() {  # the settings of node $2 of cluster $1
  local kind=$1 n=$2 m seeds="" names=""
  for m in $NODES; do
    seeds="$seeds${seeds:+, }\"127.0.0.1:$(($(http_of "$kind" "$m") + 100))\""
    names="$names${names:+, }\"${kind}3-$m\""
  done
  cat <<YML
cluster.name: hs-${kind}3
node.name: ${kind}3-$n
network.host: 127.0.0.1
http.port: $(http_of "$kind" "$n")
transport.port: $(($(http_of "$kind" "$n") + 100))
discovery.seed_hosts: [$seeds]
path.data: $(dir_of "$kind" "$n")/data
path.logs: $(dir_of "$kind" "$n")/logs
cluster.routing.allocation.disk.threshold_enabled: false
YML
  if [ "$kind" = os ]; then
    echo "cluster.initial_cluster_manager_nodes: [$names]"
  else
    echo "cluster.initial_master_nodes: [$names]"
    # no security on loopback test nodes; no machine learning (its native process and memory)
    printf 'xpack.security.enabled: false\nxpack.ml.enabled: false\n'
  fi
}

prepare() {  # node $2's folders from scratch: a copy of the distribution's config with this node's settings
  local kind=$1 n=$2 dir
  dir=$(dir_of "$kind" "$n")
  rm -rf "$dir"
  mkdir -p "$dir/data" "$dir/logs"
  cp -r "$(dist_of "$kind")/config" "$dir/config"
  # the distribution's yml holds searchnode.sh's single-node settings: replaced whole
  cluster_config "$kind" "$n" >"$dir/config/$(yml_of "$kind")"
  if [ "$(id -u)" = 0 ]; then chown -R "$RUNAS" "$dir"; chmod o+rx "$ROOT" "$ROOT/${kind}3"; fi
}

launch() {  # start node $2 in the background (its pid file: nodeN/node.pid)
  # 9>&-: the node must not inherit the lock's descriptor (it would hold the lock while it runs)
  local kind=$1 n=$2 dir heap
  dir=$(dir_of "$kind" "$n"); heap="-Xms$CLUSTER_HEAP -Xmx$CLUSTER_HEAP"
  rm -f "$dir/node.pid"
  if [ "$kind" = os ]; then
    (cd "$(dist_of os)" && as_user env OPENSEARCH_JAVA_HOME="$JAVA21" OPENSEARCH_PATH_CONF="$dir/config" \
        OPENSEARCH_JAVA_OPTS="$heap" bin/opensearch -d -p "$dir/node.pid" >"$dir/stdout.log" 2>&1 9>&-)
  else
    (cd "$(dist_of es)" && as_user env ES_JAVA_HOME="$JAVA17" ES_PATH_CONF="$dir/config" \
        ES_JAVA_OPTS="$heap" bin/elasticsearch -d -p "$dir/node.pid" >"$dir/stdout.log" 2>&1 9>&-)
  fi
}

running() { alive "$(dir_of "$1" "$2")/node.pid"; }
dead() { local pidf; pidf="$(dir_of "$1" "$2")/node.pid"; [ -s "$pidf" ] && ! kill -0 "$(cat "$pidf")" 2>/dev/null; }

wait_cluster() {  # until some node reports $2 health (green / yellow) with 3 nodes; 300 s at most
  local kind=$1 status=$2 t0=$3 n any
  for _ in $(seq 1 600); do
    for n in $NODES; do
      # ours only: another cluster answering on these ports is not taken for it
      if curl -sf --max-time 5 "http://127.0.0.1:$(http_of "$kind" "$n")/_cluster/health?wait_for_status=$status&wait_for_nodes=3&timeout=1s" 2>/dev/null \
          | grep -q "\"cluster_name\":\"hs-${kind}3\""; then
        echo "${kind}3 $status with 3 nodes after $(echo "$(date +%s.%N) - $t0" | bc) s: $(urls "$kind")"
        return 0
      fi
    done
    # every node died (its stdout.log says why); a node without a pid file yet is still starting
    any=""
    for n in $NODES; do dead "$kind" "$n" || any=1; done
    [ -n "$any" ] || break
    sleep 0.5
  done
  echo "${kind}3 FAILED to reach $status with 3 nodes; see $ROOT/${kind}3/node*/stdout.log and logs/" >&2
  for n in $NODES; do tail -5 "$(dir_of "$kind" "$n")/stdout.log" >&2 2>/dev/null || true; done
  return 1
}

start() {
  local kind=$1 n up=0 t0
  [ -f "$ROOT/.fetched" ] || locked fetch fetch
  t0=$(date +%s.%N)
  for n in $NODES; do running "$kind" "$n" && up=$((up + 1)); done
  if [ "$up" = 3 ]; then
    wait_cluster "$kind" yellow "$t0" >/dev/null && { echo "${kind}3 already running: $(urls "$kind")"; return 0; }
    return 1
  fi
  for n in $NODES; do
    if [ "$up" = 0 ]; then prepare "$kind" "$n"; fi  # no node runs: a fresh cluster
    running "$kind" "$n" || launch "$kind" "$n" &
  done
  wait
  wait_cluster "$kind" green "$t0"
}

stop_node() {  # SIGTERM (a graceful leave), then SIGKILL after 60 s
  local pidf pid
  pidf="$(dir_of "$1" "$2")/node.pid"
  running "$1" "$2" || { echo "${1}3-$2: not running"; return 0; }
  pid=$(cat "$pidf")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || { echo "${1}3-$2 stopped"; return 0; }; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true; echo "${1}3-$2 killed"
}

stop() {
  local n
  for n in $NODES; do stop_node "$1" "$n" & done
  wait
}

start_node() {  # node $2 again with its data (it rejoins; its shards recover from the others)
  local t0
  t0=$(date +%s.%N)
  running "$1" "$2" || launch "$1" "$2"
  wait_cluster "$1" yellow "$t0"
}

urls() {
  local n out=""
  for n in $NODES; do out="$out${out:+,}http://127.0.0.1:$(http_of "$1" "$n")"; done
  echo "$out"
}

pids() {
  local n
  for n in $NODES; do running "$1" "$n" && echo "$n $(cat "$(dir_of "$1" "$n")/node.pid")"; done; return 0
}

node_arg() { case "${1:-}" in 1|2|3) echo "$1" ;; *) echo "node number 1, 2 or 3" >&2; exit 2 ;; esac; }
kind_arg() { case "${1:-}" in es|os) echo "$1" ;; *) echo "es or os" >&2; exit 2 ;; esac; }

case "${1:-}" in
  start)      k=$(kind_arg "${2:-}"); locked "${k}3" start "$k" ;;
  stop)       k=$(kind_arg "${2:-}"); locked "${k}3" stop "$k" ;;
  stop-node)  k=$(kind_arg "${2:-}"); n=$(node_arg "${3:-}"); locked "${k}3" stop_node "$k" "$n" ;;
  start-node) k=$(kind_arg "${2:-}"); n=$(node_arg "${3:-}"); locked "${k}3" start_node "$k" "$n" ;;
  pids)       pids "$(kind_arg "${2:-}")" ;;
  urls)       urls "$(kind_arg "${2:-}")" ;;
  *) echo "usage: $0 start|stop es|os | stop-node|start-node es|os N | pids es|os | urls es|os" >&2; exit 2 ;;
esac
