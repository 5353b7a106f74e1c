#!/usr/bin/env bash
# Times `cargo ying test --measure all` against `cargo ying test` on one suite, side by side.
#
#   scripts/bench-measure-all.sh [MANIFEST] [RUNS]
#
# MANIFEST: the suite's Cargo.toml (default fixtures/leak-tests/Cargo.toml); RUNS: rounds (default 5). Builds cargo
# ying, then runs each command once untimed (the suite's tests and the interposer built), then RUNS rounds of
# A B B A (A: without, B: with `--measure all`) and prints each command's median wall time and the median of the
# rounds' ratios (B1 + B2) / (A1 + A2). Failing tests are timed like passing ones: the exit codes are ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
manifest="${1:-fixtures/leak-tests/Cargo.toml}"
runs="${2:-5}"
export CARGO_TERM_COLOR=never CI=true RUST_BACKTRACE=0

cargo build --release -p cargo-ying --quiet
ying="$PWD/target/release/cargo-ying"
without=("$ying" ying test --manifest-path "$manifest" --no-fail-fast -q)
with=("${without[@]}" --measure all)
"${without[@]}" >/dev/null 2>&1 || true
"${with[@]}" >/dev/null 2>&1 || true

seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN {print b - a}'
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

a_times="" b_times="" ratios=""
for ((run = 1; run <= runs; run++)); do
  a1=$(seconds "${without[@]}")
  b1=$(seconds "${with[@]}")
  b2=$(seconds "${with[@]}")
  a2=$(seconds "${without[@]}")
  a_times+="$a1 $a2 "
  b_times+="$b1 $b2 "
  ratios+="$(awk -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" 'BEGIN {print (b1 + b2) / (a1 + a2)}') "
done
printf '%s, %s rounds of A B B A (%s)\n' "$manifest" "$runs" "$(uname -sm)"
printf 'cargo ying test               %8.3fs\n' "$(echo "$a_times" | median)"
printf 'cargo ying test --measure all %8.3fs\n' "$(echo "$b_times" | median)"
printf 'ratio (median of rounds)      %8.3fx\n' "$(echo "$ratios" | median)"
