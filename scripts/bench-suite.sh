#!/usr/bin/env bash
# Times `cargo ying test` against `cargo test` and `cargo nextest run` on the same fixture suite, side by side.
#
#   scripts/bench-suite.sh [RUNS]        (default 5 runs of each, interleaved)
#
# Builds first (warm build), then runs the three commands in turn RUNS times on `fixtures/leak-tests`
# (its `leaks` test binary: the crash tests would take `cargo test`'s whole binary down) and prints the median
# wall time of each and its ratio to nextest. The fixture's tests fail on purpose, so every command exits 1; the
# timing is what counts. Needs cargo-nextest (`cargo install cargo-nextest --locked` where it is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
manifest=fixtures/leak-tests/Cargo.toml
export CARGO_TARGET_DIR="$PWD/target/fixtures" CARGO_TERM_COLOR=never CI=true RUST_BACKTRACE=0
jobs=$(nproc 2>/dev/null || sysctl -n hw.ncpu)

cargo build --release -p cargo-ying --quiet
ying="$CARGO_TARGET_DIR/release/cargo-ying"
cargo test --manifest-path "$manifest" --test leaks --no-run --quiet 2>/dev/null

declare -A commands=(
  [cargo-test]="cargo test --manifest-path $manifest --test leaks --no-fail-fast"
  [nextest]="cargo nextest run --manifest-path $manifest --test leaks --no-fail-fast -j $jobs"
  [cargo-ying]="$ying ying test --manifest-path $manifest --test leaks --no-fail-fast -j $jobs"
)
order=(cargo-test nextest cargo-ying)
declare -A times
for ((run = 1; run <= runs; run++)); do
  for name in "${order[@]}"; do
    start=$(date +%s.%N)
    ${commands[$name]} >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    times[$name]+="$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}') "
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
nextest=$(echo "${times[nextest]}" | median)
printf '%-12s %10s %12s   (%s runs, %s jobs, %s)\n' command median vs-nextest "$runs" "$jobs" "$(uname -sm)"
for name in "${order[@]}"; do
  m=$(echo "${times[$name]}" | median)
  printf '%-12s %9.3fs %11.2fx\n' "$name" "$m" "$(awk -v a="$m" -v b="$nextest" 'BEGIN {print a / b}')"
done
