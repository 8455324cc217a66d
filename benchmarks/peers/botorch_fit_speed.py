"""Peer benchmark: BoTorch's fully Bayesian GP fit times beside ``fit_speed.py``.

On the same data as ``benchmarks/fit_speed.py`` (Hartmann-6 at the same random
inputs, outputs standardised the same way), fits BoTorch's
``FullyBayesianSingleTaskGP`` (Matérn-5/2, the dimension-scaled priors of Hvarfner
et al. 2024) with ``fit_fully_bayesian_model_nuts``, which runs NumPyro's NUTS
(dense mass matrix, BoTorch's default tree depth) for ``--warmup`` + ``--samples``
iterations, keeping every ``--thinning``-th draw. Each size is fitted three times,
on n, n + 1 and n + 2 points, as ``fit_speed.py`` does; BoTorch has no warm start,
so every fit starts from the prior and NumPyro traces the model anew. Rows are
appended to ``results/{name}.jsonl`` ((n, setting) pairs already there are
skipped).

This is an optional peer, not part of ppbo or its test suite. Install it in a
separate virtual environment next to ppbo, e.g.::

    python3 -m venv .venv-botorch
    .venv-botorch/bin/pip install torch==2.13.0 botorch
    .venv-botorch/bin/pip install -e .

Usage: ``.venv-botorch/bin/python benchmarks/peers/botorch_fit_speed.py [--sizes 50
200] [--warmup 256] [--samples 256] [--thinning 16] [--name fit_speed_botorch]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from botorch.fit import fit_fully_bayesian_model_nuts  # noqa: E402
from botorch.models.fully_bayesian import FullyBayesianSingleTaskGP  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fit_speed import _data  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _fit(X: np.ndarray, y: np.ndarray, args, seed: int) -> float:
    model = FullyBayesianSingleTaskGP(
        torch.as_tensor(X, dtype=torch.float64),
        torch.as_tensor(y, dtype=torch.float64).unsqueeze(-1),
    )
    start = time.perf_counter()
    fit_fully_bayesian_model_nuts(
        model,
        warmup_steps=args.warmup,
        num_samples=args.samples,
        thinning=args.thinning,
        disable_progbar=True,
        seed=seed,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 100, 200])
    parser.add_argument("--warmup", type=int, default=256)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--thinning", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="fit_speed_botorch")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"{args.name}.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    done = {json.loads(line)["n"] for line in lines}
    for n in args.sizes:
        if n in done:
            continue
        data, new = _data(n)
        X, y = np.asarray(data.X)[:n], np.asarray(data.y)[:n]
        times = []
        for k in range(3):
            if k:
                X = np.vstack([X, new[k - 1][0]])
                y = np.append(y, new[k - 1][1])
            times.append(_fit(X, y, args, seed=k))
        row = {
            "kind": "fit",
            "n": n,
            "setting": f"botorch_nuts_{args.warmup}_{args.samples}",
            "method": "FullyBayesianSingleTaskGP, fit_fully_bayesian_model_nuts",
            "first_fit_s": round(times[0], 3),
            "first_refit_s": round(times[1], 3),
            "refit_s": round(times[2], 3),
            "warmup": args.warmup,
            "samples": args.samples,
            "thinning": args.thinning,
            "threads": args.threads,
            "cpus": os.cpu_count(),
            "host": platform.platform(),
            "device": jax.devices()[0].platform,
        }
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
