"""Write the NNet benchmark's shipped data: 1000 evaluations and the GP fitted to them.

Evaluates ``ppbo.benchmarks.nnet.validation_error`` (train a small network on
scikit-learn's digits, score it on the held-out digits) at the first 1000 points of
a scrambled Sobol sequence over the box (log10 weight decay, iterations), with key
``jax.random.key(SEED)`` split into one key per point. Then fits ppbo's default
single-task GP (Matérn-5/2, constant mean, default priors) by MAP to the
standardised errors in the unit cube. Writes, into ``ppbo/benchmarks/data/``:

- ``nnet_evaluations.csv``: columns ``log10_weight_decay, iterations,
  validation_error``, one row per evaluation, in design order;
- ``nnet_gp.json``: the MAP hyperparameters, the standardisation and the jitter
  that ``ppbo.benchmarks.get("nnet")`` needs to rebuild the GP's posterior mean.

As in Hernández-Lobato, Hoffman and Ghahramani (2014), Section 5, that posterior
mean is the benchmark's noise-free ground truth.

Usage: ``python benchmarks/make_nnet_data.py [--out DIR]`` (about a minute or two
on two cores; needs scikit-learn).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from scipy.stats import qmc  # noqa: E402

import ppbo  # noqa: E402
from ppbo.benchmarks import nnet  # noqa: E402
from ppbo.models import gp  # noqa: E402

SEED = 0
NUM_EVALUATIONS = 1000
NUM_RESTARTS = 8
DATA_DIR = Path(__file__).resolve().parent.parent / "ppbo" / "benchmarks" / "data"


def design() -> np.ndarray:
    """The first 1000 of 1024 scrambled Sobol points, in the problem's units."""
    sobol = qmc.Sobol(2, rng=np.random.default_rng(SEED))
    U = sobol.random_base2(10)[:NUM_EVALUATIONS]
    low, high = np.array(nnet.BOUNDS).T
    return low + U * (high - low)


def fit_gp(X: np.ndarray, y: np.ndarray) -> dict:
    """MAP hyperparameters of ppbo's default GP on the standardised data."""
    low, high = np.array(nnet.BOUNDS).T
    y_mean, y_std = float(y.mean()), float(y.std())
    data = ppbo.Dataset(
        (X - low) / (high - low), (y - y_mean) / y_std, capacity=X.shape[0]
    )
    surrogate = gp.surrogate(kernel="matern52", mean="constant")
    # One restart per call: vmapped restarts batch the 1000 x 1000 triangular
    # solves, which deadlocked JAX's CPU thread pool on a two-core machine. A
    # restart whose optimum is not positive definite is skipped.
    best = None
    for restart in range(NUM_RESTARTS):
        key = jax.random.fold_in(jax.random.key(SEED), restart)
        try:
            posterior = ppbo.fit(surrogate, data, ppbo.MAP(num_restarts=1), key)
        except ppbo.CholeskyError:
            continue
        lp = float(posterior.sample_stats["lp"][0])
        print(f"restart {restart}: log posterior {lp:.3f}", flush=True)
        if best is None or lp > float(best.sample_stats["lp"][0]):
            best = posterior
    if best is None:
        raise RuntimeError(f"all {NUM_RESTARTS} MAP restarts failed")
    posterior = best
    params = {name: np.asarray(value[0]) for name, value in posterior.samples.items()}
    return {
        "kernel": "matern52",
        "mean_function": "constant",
        "lengthscale": params["lengthscale"].tolist(),
        "outputscale": float(params["outputscale"]),
        "noise": float(params["noise"]),
        "mean": float(params["mean"]),
        "jitter": gp.JITTER,
        "y_mean": y_mean,
        "y_std": y_std,
        "log_posterior": float(posterior.sample_stats["lp"][0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    X = design()
    start = time.perf_counter()
    y = nnet.validation_error(jax.random.key(SEED), X)
    evaluate_seconds = time.perf_counter() - start
    rows = "".join(
        f"{a!r},{b!r},{c!r}\n" for (a, b), c in zip(X.tolist(), y.tolist(), strict=True)
    )
    header = "log10_weight_decay,iterations,validation_error\n"
    (args.out / "nnet_evaluations.csv").write_text(header + rows)

    start = time.perf_counter()
    fit = fit_gp(X, y)
    fit_seconds = time.perf_counter() - start
    (args.out / "nnet_gp.json").write_text(json.dumps(fit, indent=2) + "\n")

    print(f"{NUM_EVALUATIONS} evaluations: {evaluate_seconds:.1f} s (with compile)")
    print(f"MAP fit: {fit_seconds:.1f} s")
    print(json.dumps(fit, indent=2))
    print(f"errors: min {y.min():.4f}, median {np.median(y):.4f}, max {y.max():.4f}")


if __name__ == "__main__":
    main()
