"""Where the fully Bayesian GP's hyperparameters sit against MAP's, on Hartmann-6.

The measured side of "why NUTS does not beat MAP" (``regret.py``): for n random
points of Hartmann-6 with observation noise of variance 1e-3 (as the regret
benchmark), outputs standardised and negated as a minimising campaign does, fit the
default GP by MAP and by NUTS (the defaults, ``ppbo.NUTS()``) and record MAP's
values beside NUTS's 10/50/90% quantiles of every hyperparameter, and the
standardised true noise variance ``1e-3 / Var(y)``. Several datasets per n.

Usage: ``python benchmarks/fb_vs_map_posterior.py [--sizes 12 20 30] [--datasets 5]
[--name fb_vs_map_posterior]``; writes ``results/{name}.json`` and prints medians
over the datasets.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import ppbo  # noqa: E402
from ppbo import benchmarks  # noqa: E402
from ppbo.models import gp  # noqa: E402

RESULTS = Path(__file__).parent / "results"
NOISE_VAR = 1e-3


def one(n: int, dataset: int) -> dict:
    """MAP values and NUTS quantiles on one random Hartmann-6 dataset of size n."""
    problem = benchmarks.get("hartmann6")
    rng = np.random.default_rng([n, dataset])
    X = rng.random((n, 6))
    y = np.asarray(problem.noise_free(X))
    y = y + np.sqrt(NOISE_VAR) * rng.standard_normal(n)
    scale = y.std()
    data = ppbo.Dataset(X, -(y - y.mean()) / scale)
    surrogate = gp.surrogate()
    fitted_map = ppbo.fit(surrogate, data, ppbo.MAP(), jax.random.key(dataset))
    fitted_nuts = ppbo.fit(surrogate, data, ppbo.NUTS(), jax.random.key(dataset + 1))
    row = {"n": n, "dataset": dataset, "true_noise": NOISE_VAR / scale**2}
    for name in ("lengthscale", "noise", "mean"):
        row[f"{name}_map"] = np.asarray(fitted_map.samples[name])[0].tolist()
        draws = np.asarray(fitted_nuts.samples[name])
        quantiles = np.quantile(draws, [0.1, 0.5, 0.9], axis=0)
        row[f"{name}_nuts_q10_q50_q90"] = quantiles.tolist()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 20, 30])
    parser.add_argument("--datasets", type=int, default=5)
    parser.add_argument("--name", default="fb_vs_map_posterior")
    args = parser.parse_args(argv)
    rows = [one(n, k) for n in args.sizes for k in range(args.datasets)]
    summary = []
    for n in args.sizes:
        mine = [r for r in rows if r["n"] == n]
        noise_map = np.median([r["noise_map"] for r in mine])
        noise_q = np.median([r["noise_nuts_q10_q50_q90"] for r in mine], axis=0)
        # lengthscales: median over datasets of the per-dataset median over inputs
        ls_map = np.median([np.median(r["lengthscale_map"]) for r in mine])
        ls_q = np.median(
            [np.median(r["lengthscale_nuts_q10_q50_q90"], axis=1) for r in mine], axis=0
        )
        entry = {
            "n": n,
            "true_noise": float(np.median([r["true_noise"] for r in mine])),
            "noise_map": float(noise_map),
            "noise_nuts_q10_q50_q90": noise_q.tolist(),
            "lengthscale_map": float(ls_map),
            "lengthscale_nuts_q10_q50_q90": ls_q.tolist(),
        }
        summary.append(entry)
        print(json.dumps({k: np.round(v, 4).tolist() for k, v in entry.items()}))
    RESULTS.mkdir(exist_ok=True)
    out = {"problem": "hartmann6", "noise_var": NOISE_VAR, "summary": summary}
    out["rows"] = rows
    (RESULTS / f"{args.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
