"""Regret of ``ppbo run PROBLEM --noise-var 1e-3`` with the defaults, as a user runs it.

Runs the ``ppbo`` command in a subprocess once per seed, reads every evaluated point
back from the campaign's SQLite database and scores it with the noise-free problem
written out again below (independently of :mod:`ppbo.benchmarks`), so that the
figure is the regret of the best point the user's campaign actually evaluated.

Usage::

    python benchmarks/cli_regret.py --problems branin hartmann6 --seeds 10

Writes ``results/cli_regret.jsonl`` (one line per run, resumable) and
``results/cli_regret.json`` (medians).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"

_H6_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_H6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def branin(p: dict) -> float:
    """Branin-Hoo on [-5, 10] x [0, 15]; minimum 0.397887."""
    x1, x2 = p["x1"], p["x2"]
    b, c = 5.1 / (4 * np.pi**2), 5 / np.pi
    return (
        (x2 - b * x1**2 + c * x1 - 6) ** 2
        + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1)
        + 10
    )


def hartmann6(p: dict) -> float:
    """Hartmann-6 on [0, 1]^6; minimum -3.32237."""
    x = np.array([p[f"x{i}"] for i in range(1, 7)])
    return float(-_H6_ALPHA @ np.exp(-np.sum(_H6_A * (x - _H6_P) ** 2, axis=1)))


PROBLEMS = {"branin": (branin, 0.397887357729739), "hartmann6": (hartmann6, -3.32237)}


def run_once(problem: str, seed: int, noise_var: float) -> dict:
    """One ``ppbo run`` campaign; the regret of its best evaluated point."""
    fn, optimum = PROBLEMS[problem]
    work = Path(tempfile.mkdtemp(prefix="ppbo-cli-"))
    try:
        db = work / "cli.db"
        cmd = [
            str(Path(sys.executable).parent / "ppbo"), "run", problem,
            "--noise-var", str(noise_var), "--seed", str(seed),
            "--storage", str(db), "--name", "run", "--quiet",
        ]  # fmt: skip
        start = time.perf_counter()
        subprocess.run(cmd, cwd=work, check=True, capture_output=True)
        seconds = time.perf_counter() - start
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT params FROM trials WHERE state = 'COMPLETE' ORDER BY number"
            ).fetchall()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    values = np.array([fn(json.loads(r[0])) for r in rows])
    regret = np.minimum.accumulate(values - optimum)
    return {
        "problem": problem,
        "seed": seed,
        "noise_var": noise_var,
        "evaluations": len(values),
        "best_observed_regret": float(regret[-1]),
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--noise-var", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "cli_regret.jsonl"
    done = set()
    if log.exists():
        for line in log.read_text().splitlines():
            r = json.loads(line)
            done.add((r["problem"], r["seed"], r["noise_var"]))
    for problem in args.problems:
        for seed in range(args.seeds):
            if (problem, seed, args.noise_var) in done:
                continue
            record = run_once(problem, seed, args.noise_var)
            print(json.dumps(record), flush=True)
            with log.open("a") as f:
                f.write(json.dumps(record) + "\n")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    summary = {}
    for problem in args.problems:
        runs = [
            r
            for r in records
            if r["problem"] == problem and r["noise_var"] == args.noise_var
        ]
        rs = [r["best_observed_regret"] for r in runs]
        secs = [r["seconds"] for r in runs]
        summary[problem] = {
            "seeds": len(rs),
            "median_best_observed_regret": float(np.median(rs)),
            "quartiles": [float(np.quantile(rs, 0.25)), float(np.quantile(rs, 0.75))],
            "median_seconds_per_run": float(np.median(secs)),
        }
        print(problem, summary[problem])
    (args.out / "cli_regret.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
