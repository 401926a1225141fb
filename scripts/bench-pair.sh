#!/usr/bin/env bash
# Side-by-side control-plane benchmarks of two builds, alternating, in one run.
#   scripts/bench-pair.sh BEFORE_TARGET_DIR AFTER_TARGET_DIR [ROUNDS]
# Each *_TARGET_DIR is a `target/release` holding `caldera` and `bench`, built
# with `cargo build --release -p caldera -p caldera-chaos-tests`. Prints the
# bench binary's own lines, labelled; the figures in docs/benchmarks/supervised-actors.md were
# copied from them.
set -euo pipefail
before=${1:?before target dir}
after=${2:?after target dir}
rounds=${3:-2}
run() { # label dir args...
  local label=$1 dir=$2; shift 2
  echo "### $label: bench $*"
  "$dir/bench" "$@" --bin "$dir/caldera" 2>&1 | sed "s/^/[$label] /"
}
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$before; [ "$side" = after ] && dir=$after
    run "$side r$r" "$dir" submit --requests 10000 --concurrency 16
    run "$side r$r" "$dir" start-latency --tasks 100
    run "$side r$r" "$dir" restart --tasks 100000 --restarts 2
  done
done
