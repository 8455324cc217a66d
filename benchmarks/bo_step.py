"""Time of one BO step inside a campaign: refit on one more point + EI optimisation.

Hartmann-6 (d = 6) from n = 50 random points; the default fully Bayesian GP with
NUTS (256 warm-up, 256 samples, one chain, warm-started), EI maximised with the
default optimiser settings (1024 Sobol candidates, 8 L-BFGS-B restarts). Each step
adds the suggested point, as a campaign does. Writes JSON to ``results/``.

Usage: ``python benchmarks/bo_step.py [--n 50] [--steps 5]``
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from fit_speed import hartmann6  # noqa: E402

import ppbo  # noqa: E402
from ppbo.models import gp  # noqa: E402

_COMPILES = [0]


def _count(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--target-accept", type=float, default=0.8)
    parser.add_argument("--name", default="bo_step")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    jax.monitoring.register_event_duration_secs_listener(_count)
    rng = np.random.default_rng(0)
    X = rng.random((args.n, 6))
    y = list(hartmann6(X))
    X = list(X)
    surrogate = gp.surrogate()
    inference = ppbo.NUTS(target_accept_prob=args.target_accept)
    posterior = None
    rows = []
    key = jax.random.key(0)
    for step in range(args.steps + 1):
        data = ppbo.Dataset(np.array(X), ppbo.standardize(y, maximize=False))
        start, compiles = time.perf_counter(), _COMPILES[0]
        key_fit, key_opt = jax.random.split(jax.random.fold_in(key, step))
        posterior = ppbo.fit(surrogate, data, inference, key_fit, init=posterior)
        jax.block_until_ready(posterior.samples)
        t_fit = time.perf_counter() - start
        x, _ = ppbo.optimize_acquisition(ppbo.acquisition.ei, posterior, key_opt)
        t_total = time.perf_counter() - start
        row = {
            "step": step,
            "n": data.n,
            "capacity": data.capacity,
            "fit_s": round(t_fit, 3),
            "acquisition_s": round(t_total - t_fit, 3),
            "step_s": round(t_total, 3),
            "compilations": _COMPILES[0] - compiles,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        X.append(x[0])
        y.append(float(hartmann6(x)[0]))
    warm = [r["step_s"] for r in rows[1:] if r["compilations"] == 0]
    result = {
        "benchmark": "bo_step",
        "problem": "hartmann6",
        "nuts": {"warmup": 256, "samples": 256, "target_accept": args.target_accept},
        "machine": {"platform": platform.platform()},
        "jax": jax.__version__,
        "rows": rows,
        "median_step_s_without_compilation": float(np.median(warm)) if warm else None,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
