"""Fit-time benchmark: NUTS and slice sampling of the fully Bayesian GP.

For n in {20, 50, 100, 200} observations of Hartmann-6 (d = 6, outputs
standardised), times the first fit (including compilation) and a refit after one new
observation in the same capacity bucket, warm-started from the first posterior, and
counts XLA compilations during the refit. Writes JSON (and a PNG) to
``benchmarks/results/``.

Usage: ``python benchmarks/fit_speed.py [--sizes 20 50] [--out DIR]``
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from functools import partial
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import ppbo  # noqa: E402
from ppbo import benchmarks  # noqa: E402
from ppbo.models import gp  # noqa: E402

_HARTMANN6 = benchmarks.get("hartmann6")


def hartmann6(X: np.ndarray) -> np.ndarray:
    """Hartmann-6 on [0, 1]^6 (minimum -3.32237), from ``ppbo.benchmarks``."""
    return np.asarray(_HARTMANN6.noise_free(np.asarray(X)), dtype=np.float64)


_COMPILES = [0]


def _count(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


def _timed(fn):
    start, compiles = time.perf_counter(), _COMPILES[0]
    posterior = fn()
    jax.block_until_ready(posterior.samples)
    return posterior, time.perf_counter() - start, _COMPILES[0] - compiles


def run(sizes, methods, seed=0):
    jax.monitoring.register_event_duration_secs_listener(_count)
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        X = rng.random((n + 1, 6))
        y = hartmann6(X)
        y = (y - y[:n].mean()) / y[:n].std()
        data = ppbo.Dataset(X[:n], y[:n])
        grown = data.append(X[n], y[n])
        assert grown.capacity == data.capacity, "the new point must stay in the bucket"
        for name, inference in methods.items():
            surrogate = gp.surrogate()  # a fresh surrogate: the first fit compiles
            first, t_first, c_first = _timed(
                partial(ppbo.fit, surrogate, data, inference, jax.random.key(1))
            )
            refit, t_refit, c_refit = _timed(
                partial(
                    ppbo.fit, surrogate, grown, inference, jax.random.key(2), init=first
                )
            )
            stats = {k: float(np.mean(v)) for k, v in refit.sample_stats.items()}
            row = {
                "method": name,
                "n": n,
                "capacity": data.capacity,
                "first_fit_s": round(t_first, 3),
                "first_fit_compilations": c_first,
                "refit_s": round(t_refit, 3),
                "refit_compilations": c_refit,
                "mean_n_steps": stats.get("n_steps"),
                "mean_num_evals": stats.get("num_evals"),
                "divergences": int(np.sum(refit.sample_stats.get("diverging", 0))),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 100, 200])
    parser.add_argument("--warmup", type=int, default=256)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--target-accept", type=float, default=0.8)
    parser.add_argument("--name", default="fit_speed", help="result file stem")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    methods = {
        "NUTS": ppbo.NUTS(
            num_warmup=args.warmup,
            num_samples=args.samples,
            target_accept_prob=args.target_accept,
        ),
        "Slice": ppbo.Slice(num_warmup=args.warmup, num_samples=args.samples),
    }
    rows = run(args.sizes, methods)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "fit_speed",
        "problem": "hartmann6, d=6, standardised outputs",
        "warmup": args.warmup,
        "samples": args.samples,
        "nuts_target_accept_prob": args.target_accept,
        "chains": 1,
        "machine": {"cpus": jax.local_device_count(), "platform": platform.platform()},
        "jax": jax.__version__,
        "rows": rows,
    }
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name in methods:
        mine = [r for r in rows if r["method"] == name]
        ax.plot(
            [r["n"] for r in mine],
            [r["refit_s"] for r in mine],
            "o-",
            label=f"{name} refit",
        )
        ax.plot(
            [r["n"] for r in mine],
            [r["first_fit_s"] for r in mine],
            "x--",
            label=f"{name} first fit",
        )
    ax.set_xlabel("n (d = 6)")
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"{args.name}.png", dpi=120)


if __name__ == "__main__":
    main()
