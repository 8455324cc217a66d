"""How often a campaign's BO suggestions lie on a face of the search box.

Reads the runs that ``regret.py`` wrote (``results/*.jsonl``) and reports, per
problem and method, the fraction of model-based evaluations (after the initial
design, up to ``--budget``) with at least one coordinate at a bound, the mean
number of such coordinates, and, per method, Spearman's rank correlation between a
seed's face fraction and its best-observed regret at the budget. It measures the
mechanism proposed for the fully Bayesian GP's loss to MAP: the mixture over
lengthscale samples has more variance far from the data, and log-EI then pulls
suggestions to the faces of the cube.

Usage: ``python benchmarks/regret_faces.py [--files regret_60 regret_nuts_defaults
regret_nuts_samples] [--budget 30] [--name regret_faces]``; writes
``results/{name}.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from ppbo import benchmarks

RESULTS = Path(__file__).parent / "results"


def face_fraction(problem, X: np.ndarray, tol: float = 1e-6) -> tuple[float, float]:
    """Fraction of rows of ``X`` (problem units) with a coordinate at a bound, and
    the mean number of coordinates at a bound per row."""
    U = np.asarray(problem.to_unit(np.asarray(X, dtype=np.float64)))
    at = (U < tol) | (U > 1.0 - tol)
    return float(np.mean(at.any(axis=1))), float(np.mean(at.sum(axis=1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--files",
        nargs="+",
        default=["regret_60", "regret_nuts_defaults", "regret_nuts_samples"],
    )
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--name", default="regret_faces")
    args = parser.parse_args(argv)
    runs: dict[tuple[str, str], dict[int, dict]] = collections.defaultdict(dict)
    for name in args.files:
        for line in (RESULTS / f"{name}.jsonl").read_text().splitlines():
            run = json.loads(line)
            runs[(run["problem"], run["method"])][run["seed"]] = run
    rows = []
    for (problem_name, method), by_seed in sorted(runs.items()):
        problem = benchmarks.get(problem_name)
        fractions, counts, regrets = [], [], []
        for run in by_seed.values():
            if len(run["x"]) < args.budget:
                continue
            X = np.asarray(run["x"][run["n_initial"] : args.budget])
            fraction, count = face_fraction(problem, X)
            fractions.append(fraction)
            counts.append(count)
            regrets.append(run["regret_best_observed"][args.budget - 1])
        if not fractions:
            continue
        rho, p = spearmanr(fractions, regrets)
        rows.append(
            {
                "problem": problem_name,
                "method": method,
                "seeds": len(fractions),
                "face_fraction": round(float(np.mean(fractions)), 3),
                "coordinates_at_bound": round(float(np.mean(counts)), 3),
                "spearman_face_regret": round(float(rho), 3),
                "spearman_p": round(float(p), 4),
            }
        )
        print(
            f"{problem_name:12s} {method:16s} seeds {len(fractions):2d}  on a face "
            f"{np.mean(fractions):.2f}  coords at bound {np.mean(counts):.2f}  "
            f"rho(face, regret) {rho:+.2f} (p {p:.3f})"
        )
    summary = {"budget": args.budget, "files": args.files, "rows": rows}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
