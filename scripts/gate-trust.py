#!/usr/bin/env python3
"""Measures the gate's statistics on the fixture's `steady` test `random_resize` (a set whose table grows in a
different run each time): how often unchanged code crosses the tolerance (a false regression) and how often a leak
of 4 KiB per run is caught, for the totals of the measured runs and for their steady state (the smallest growth of
one run), each without reruns and with two.

Builds cargo-ying in release mode, copies fixtures/leak-tests to a temporary directory, runs
`cargo ying test --test steady --reruns 0` N times unchanged and N times with the leak, and judges every run
against a baseline saved from each unchanged run in turn (N x N pairs), as the gate does. Prints a table.
Usage: python3 scripts/gate-trust.py [--runs 30]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST = "leak-fixtures::steady random_resize"
TOLERANCE = (0.10, 1024)  # the gate's defaults: 10% or 1 KiB, whichever is larger


def crosses(baseline, now):
    return now > baseline + max(int(baseline * TOLERANCE[0]), TOLERANCE[1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "cargo-ying"], cwd=ROOT, check=True)
    cargo_ying = os.path.join(ROOT, "target", "release", "cargo-ying")
    work = tempfile.mkdtemp(prefix="ying-gate-trust-")
    fixture = os.path.join(work, "leak-tests")
    shutil.copytree(os.path.join(ROOT, "fixtures", "leak-tests"), fixture, ignore=shutil.ignore_patterns("target"))
    manifest = os.path.join(fixture, "Cargo.toml")
    with open(manifest) as f:
        text = f.read().replace("../../ying-runtime", os.path.join(ROOT, "ying-runtime"))
    with open(manifest, "w") as f:
        f.write(text)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target", "gate-trust"), CI="true")
    env.pop("YING_FIXTURE_STEADY_LEAK", None)

    def run(extra_env=None):
        command = [cargo_ying, "ying", "test", "--manifest-path", manifest, "--test", "steady", "--reruns", "0"]
        subprocess.run(command, env=dict(env, **(extra_env or {})), capture_output=True)
        with open(os.path.join(env["CARGO_TARGET_DIR"], "ying", "summary.json")) as f:
            summary = json.load(f)
        test = next(t for t in summary["tests"] if t["target"] == "steady" and t["name"] == "random_resize")
        return test["retained_bytes"], test["steady_state"]["retained_bytes"]

    unchanged = [run() for _ in range(args.runs)]
    leaking = [run({"YING_FIXTURE_STEADY_LEAK": "1"}) for _ in range(args.runs)]
    shutil.rmtree(work)
    n = args.runs
    print(f"{n} runs each; every run judged against a baseline saved from each unchanged run ({n * n} pairs)")
    print("| code | totals seen (B, runs) | totals cross | totals, 2 reruns | steady state cross | steady state, 2 reruns |")
    print("|---|---|---|---|---|---|")
    for label, runs in [("unchanged", unchanged), ("leaks 4 KiB per run", leaking)]:
        cells = []
        for statistic in (0, 1):
            flags = [[crosses(base[statistic], now[statistic]) for now in runs] for base in unchanged]
            # Two reruns: a crossing counts only when the next two runs (as reruns) cross too.
            confirmed = [[all(row[(j + k) % n] for k in range(3)) for j in range(n)] for row in flags]
            cells += [f"{sum(map(sum, flags))}/{n * n}", f"{sum(map(sum, confirmed))}/{n * n}"]
        seen = sorted({total for total, _ in runs})
        spread = ", ".join(f"{total} ({sum(t == total for t, _ in runs)})" for total in seen)
        print(f"| {label} | {spread} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
