#!/usr/bin/env python3
"""Overhead of each global allocator configuration against the System allocator, measured A/B/B/A.

Builds ying-bench in release mode, then for every workload runs each configuration's binary (B) interleaved with the
System binary (A) as A B B A, several rounds, and reports the median ratio B/A of wall times and each side's peak
RSS. A same-binary control (System against itself) runs first: when its drift exceeds the gate the machine is too
noisy for the comparison, the control is repeated once, and the results are marked unstable if it stays noisy.
Every raw output line is kept under bench-overhead/<time>/raw.jsonl in cargo's target directory beside the summary.

    python3 scripts/bench-overhead.py                      # everything, 3 rounds
    python3 scripts/bench-overhead.py --rounds 5 --configs ying_idle,ying_mimalloc --workloads w1,w2
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [
    "ying_idle",
    "ying_leak_test",
    "ying_r0",
    "dhat",
    "ying_profiler_03",
    "mimalloc",
    "ying_mimalloc",
    "jemalloc",
    "jemalloc_prof",
    "exact_floor",
]
# Configurations whose runs take minutes (dhat-rs: 50-190x): one round is enough to see where they stand.
SLOW = {"dhat"}
# The provider each ying configuration wraps, for its own overhead and its RSS above the provider's.
PROVIDER = {"exact_floor": "system", "ying_idle": "system", "ying_leak_test": "system", "ying_r0": "system", "ying_mimalloc": "mimalloc"}
WORKLOADS = ["w1", "w2", "w3", "w4", "w5", "w6", "w7"]


def target_dir():
    """Cargo's target directory: `target` unless CARGO_TARGET_DIR or a cargo configuration puts it elsewhere."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return Path(json.loads(out)["target_directory"])


def run(binary, workload, raw):
    out = subprocess.run([str(binary), workload], check=True, capture_output=True, text=True).stdout
    line = out.strip().splitlines()[-1]
    raw.write(line + "\n")
    raw.flush()
    return json.loads(line)


def abba(a, b, workload, rounds, raw):
    """Median ratio of b's wall time to a's over `rounds` A B B A rounds, with every result."""
    ratios, runs = [], {"a": [], "b": []}
    for _ in range(rounds):
        a1 = run(a, workload, raw)
        b1 = run(b, workload, raw)
        b2 = run(b, workload, raw)
        a2 = run(a, workload, raw)
        if a1["checksum"] != b1["checksum"]:
            sys.exit(f"checksums differ between {a.name} and {b.name} on {workload}: the workloads are not the same")
        runs["a"] += [a1, a2]
        runs["b"] += [b1, b2]
        ratios.append((b1["seconds"] + b2["seconds"]) / (a1["seconds"] + a2["seconds"]))
    return statistics.median(ratios), runs


def median(runs, key):
    return statistics.median(run[key] for run in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="A B B A rounds per comparison (slow configs: 1)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated configurations")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated workloads")
    parser.add_argument("--drift-gate", type=float, default=0.05, help="largest control drift accepted (0.05 = 5%%)")
    parser.add_argument("--no-build", action="store_true", help="use the binaries already built")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    workloads = [w for w in args.workloads.split(",") if w]
    for name in configs:
        if name not in CONFIGS:
            sys.exit(f"unknown configuration `{name}`; expected one of {', '.join(CONFIGS)}")

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "ying-bench", "--bins"], cwd=ROOT, check=True)
    target = target_dir()
    bins = target / "release"
    out_dir = target / "bench-overhead" / time.strftime("%Y%m%dT%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    system = bins / "system"

    results, unstable = {}, []
    with open(out_dir / "raw.jsonl", "w") as raw:
        for workload in workloads:
            for attempt in range(2):
                drift, control = abba(system, system, workload, args.rounds, raw)
                if abs(drift - 1) <= args.drift_gate:
                    break
                print(f"{workload}: control drift {drift - 1:+.1%} above the gate, attempt {attempt + 1}", file=sys.stderr)
            else:
                unstable.append(workload)
            results[(workload, "system")] = (1.0, median(control["a"], "seconds"), median(control["a"], "peak_rss_kib"))
            print(f"{workload}: system {results[(workload, 'system')][1]:.3f} s, control drift {drift - 1:+.1%}", file=sys.stderr)
            for name in configs:
                rounds = 1 if name in SLOW else args.rounds
                ratio, runs = abba(system, bins / name, workload, rounds, raw)
                results[(workload, name)] = (ratio, median(runs["b"], "seconds"), median(runs["b"], "peak_rss_kib"))
                print(f"{workload}: {name} {ratio:.2f}x", file=sys.stderr)

    lines = [
        "| configuration | " + " | ".join(workloads) + " | peak RSS " + " / ".join(workloads) + " |",
        "|---|" + "---|" * len(workloads) + "---|",
    ]
    for name in ["system"] + configs:
        cells = []
        for workload in workloads:
            ratio, seconds, _ = results[(workload, name)]
            own = ""
            provider = PROVIDER.get(name)
            if provider and (workload, provider) in results:
                own = f" ({ratio / results[(workload, provider)][0]:.2f}x {provider})"
            cells.append(f"{ratio:.2f}x, {seconds:.3f} s{own}")
        rss = " / ".join(f"{results[(w, name)][2] / 1024:.1f}" for w in workloads)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {rss} MiB |")
    summary = "\n".join(lines)
    if unstable:
        summary += f"\n\nunstable (control drift above {args.drift_gate:.0%}): {', '.join(unstable)}"
    (out_dir / "summary.md").write_text(summary + "\n")
    print(summary)
    print(f"\nraw results: {out_dir / 'raw.jsonl'}", file=sys.stderr)


if __name__ == "__main__":
    main()
