"""Held-out calibration of the surrogates a campaign can use, on Hartmann-6.

For each surrogate (a registry spec with the campaign's default inference for it,
:func:`ppbo.campaign.registry.resolve_components`), n uniformly random Hartmann-6
points with observation noise of variance 1e-3 are standardised as a campaign
standardises them and fitted; the posterior (the mixture over its samples) then
predicts 1000 held-out uniform points. Reported per surrogate, n and seed:

- ``coverage90``: the share of held-out noise-free values inside the central 90%
  interval of the latent predictive mixture (0.90 when calibrated; the mixture's
  CDF is the mean of the samples' normal CDFs);
- ``nlpd``: the mean negative log predictive density of those values under the
  mixture;
- ``rmse``: the root mean squared error of the mixture mean (standardised units).

This is the measurement behind "the last layer is overconfident"
(benchmarks/README.md, ``surrogates.py``): a network trained to interpolate the
data leaves its Bayesian last layer little variance away from the data.

Usage: ``python benchmarks/calibration.py [--ns 30 60] [--seeds 5]
[--surrogates gp dngo ...] [--name calibration]``; writes
``results/{name}.json`` and prints a table of medians over seeds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

import ppbo  # noqa: E402
from ppbo.benchmarks import problems  # noqa: E402
from ppbo.campaign import model_data, registry  # noqa: E402

RESULTS = Path(__file__).parent / "results"

#: Registry specs of the compared surrogates.
SPECS = {
    "gp": "gp",
    "dngo": {"name": "dngo"},
    "dngo_slice": {"name": "dngo", "precisions": "slice"},
    "dngo_ensemble5": {"name": "dngo", "ensemble": 5},
    "ablr": {"name": "ablr"},
    "forest": {"name": "forest"},
    "bnn": {"name": "bnn"},
}


def scores(mean: np.ndarray, var: np.ndarray, truth: np.ndarray) -> dict:
    """Coverage of the central 90% interval, NLPD and RMSE of a normal mixture.

    ``mean`` and ``var`` are (s, m): s equally weighted normal components at m
    points (point masses where ``var`` is 0: the coverage is then that of the
    samples' empirical quantiles, and the NLPD is NaN); ``truth`` (m,).

    Example:
        >>> out = scores(np.zeros((1, 4)), np.ones((1, 4)), np.array([0, 0, 0, 3.0]))
        >>> out["coverage90"], round(out["rmse"], 3)
        (0.75, 1.5)
    """
    point_masses = bool(np.all(var <= 0.0))  # a BNN's latent: one function a sample
    sd = np.sqrt(np.maximum(var, 1e-300))
    cdf = np.mean(stats.norm.cdf((truth[None] - mean) / sd), axis=0)
    logpdf = stats.norm.logpdf(truth[None], mean, sd)
    log_mixture = np.logaddexp.reduce(logpdf, axis=0) - np.log(mean.shape[0])
    return {
        "coverage90": float(np.mean((cdf > 0.05) & (cdf < 0.95))),
        # a mixture of point masses has no density: no NLPD
        "nlpd": float("nan") if point_masses else float(-np.mean(log_mixture)),
        "rmse": float(np.sqrt(np.mean((mean.mean(0) - truth) ** 2))),
    }


def run_one(name: str, n: int, seed: int, X_test: np.ndarray) -> dict:
    """Fit one surrogate to n noisy Hartmann-6 points and score it held out."""
    problem = problems.get("hartmann6")
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, problem.dim))
    y = problem.objective(X) + rng.normal(0.0, np.sqrt(1e-3), n)
    data, out = model_data(X, y, maximize=False)  # as a campaign builds its data
    components, _ = registry.resolve_components(SPECS[name])
    start = time.perf_counter()
    posterior = ppbo.fit(
        components["surrogate"], data, components["inference"], jax.random.key(seed)
    )
    mean, var = (np.asarray(a) for a in posterior.predict(X_test))
    seconds = time.perf_counter() - start
    # the campaign's map back is value = -(shift + scale * y) for minimisation
    truth = (-problem.objective(X_test) - out.shift) / out.scale
    return {"surrogate": name, "n": n, "seed": seed, "seconds": seconds} | scores(
        mean, var, truth
    )


def table(rows: list[dict]) -> str:
    """Medians over seeds, one line per surrogate and n."""
    lines = [
        "| surrogate | n | seeds | coverage of 90% intervals | NLPD | RMSE "
        "| s per fit |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    keys = sorted({(r["surrogate"], r["n"]) for r in rows}, key=lambda k: (k[1], k[0]))
    for name, n in keys:
        group = [r for r in rows if r["surrogate"] == name and r["n"] == n]
        med = {
            k: float(np.median([r[k] for r in group]))
            for k in ("coverage90", "nlpd", "rmse", "seconds")
        }
        lines.append(
            f"| {name} | {n} | {len(group)} | {med['coverage90']:.2f} | "
            f"{'—' if np.isnan(med['nlpd']) else format(med['nlpd'], '.3g')} | "
            f"{med['rmse']:.3f} | {med['seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[30, 60])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--surrogates", nargs="+", default=list(SPECS))
    parser.add_argument("--name", default="calibration")
    parser.add_argument(
        "--table", action="store_true", help="only print the stored table"
    )
    args = parser.parse_args(argv)
    if args.table:
        path = RESULTS / f"{args.name}.json"
        print(table(json.loads(path.read_text())["runs"]))
        return 0
    unknown = [s for s in args.surrogates if s not in SPECS]
    if unknown:
        parser.error(f"unknown surrogates {unknown}; known: {list(SPECS)}")
    X_test = np.random.default_rng(12345).uniform(size=(1000, 6))
    rows = []
    for n in args.ns:
        for seed in range(args.seeds):
            for name in args.surrogates:
                row = run_one(name, n, seed, X_test)
                rows.append(row)
                print(
                    f"{name} n={n} seed={seed}: coverage {row['coverage90']:.2f}, "
                    f"nlpd {row['nlpd']:.3g}, rmse {row['rmse']:.3f}",
                    flush=True,
                )
    RESULTS.mkdir(exist_ok=True)
    text = table(rows)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps(
            {
                "benchmark": "calibration",
                "problem": "hartmann6",
                "noise_var": 1e-3,
                "test_points": 1000,
                "specs": {k: SPECS[k] for k in args.surrogates},
                "runs": rows,
                "table": text,
            },
            indent=1,
        )
    )
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
