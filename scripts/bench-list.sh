#!/usr/bin/env bash
# GET /v1/tasks over 100,000 stored tasks, two builds side by side on copies of
# one data directory. A filter that matches nothing (state=running: no node is
# connected, every task is queued) makes the old route decode all 100,000.
#   scripts/bench-list.sh BEFORE_TARGET_DIR AFTER_TARGET_DIR DATA_DIR [ROUNDS]
# DATA_DIR is a control plane's data dir with the tasks, e.g. what
# `bench restart --tasks 100000 --restarts 1 --keep --dir D` leaves in D/restart/cp.
# The operator token is the chaos-tests harness's.
set -euo pipefail
before=${1:?}; after=${2:?}; data=${3:?}; rounds=${4:-5}
token=test-operator-token-0123456789
port=17931
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
for side in before after; do
  dir=$before; [ "$side" = after ] && dir=$after
  rm -rf "$work/$side"; cp -a "$data" "$work/$side"
  CALDERA_OPERATOR_TOKEN=$token CALDERA_DATA_DIR="$work/$side" CALDERA_LISTEN=127.0.0.1:$port \
    "$dir/caldera" server > "$work/$side.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  for r in $(seq 1 "$rounds"); do
    t=$(curl -s -o "$work/page.json" -w '%{time_total}' -H "Authorization: Bearer $token" \
      "http://127.0.0.1:$port/v1/tasks?state=running&limit=100")
    n=$(python3 -c "import json,sys; d=json.load(open('$work/page.json'))['data']; print(len(d.get('tasks', d if isinstance(d,list) else [])), d.get('next_cursor') if isinstance(d,dict) else None)" 2>/dev/null || echo "?")
    echo "[$side] GET /v1/tasks?state=running&limit=100: ${t}s (tasks, next_cursor: $n)"
  done
  # Two such lists at once on a 2-worker server, and /healthz meanwhile.
  curl -s -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port/v1/tasks?state=running&limit=100" &
  curl -s -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port/v1/tasks?state=running&limit=100" &
  sleep 0.05
  h=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/healthz")
  wait %2 %3 2>/dev/null || true
  echo "[$side] /healthz during two concurrent list scans: ${h}s"
  kill $pid; wait $pid 2>/dev/null || true
done
