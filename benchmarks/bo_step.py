"""Time of one fully Bayesian BO step inside a campaign, for n up to 1000.

Hartmann-6 (d = 6): a :class:`ppbo.Optimizer` with ``inference="nuts"`` (the NUTS
defaults a user gets) and the default acquisition (log-EI) is given n random
evaluations with :meth:`~ppbo.Optimizer.add`; then ``ask`` (fit and acquisition
optimisation, the first compiling), ``tell``, and ``--steps`` more ask/tell rounds,
each warm-started from the previous posterior as a user's campaign is. Each row is
one ask: its seconds (fit and acquisition), XLA compilations, the posterior's
draws and NUTS's mean leapfrog steps per draw. Rows are appended to
``results/{name}.jsonl``; the summary, with the median warm step per n and the
device, goes to ``{name}.json``.

Usage: ``python benchmarks/bo_step.py [--sizes 50 200 1000] [--steps 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from fit_speed import hartmann6  # noqa: E402

import ppbo  # noqa: E402

_COMPILES = [0]


def _count(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


def run(n: int, steps: int, inference: str, seed: int = 0) -> list[dict]:
    """Ask/tell ``steps + 1`` times after ``n`` random evaluations."""
    space = {f"x{i}": ppbo.Real(0.0, 1.0) for i in range(6)}
    opt = ppbo.Optimizer(space, inference=inference, n_initial=1, seed=seed)
    rng = np.random.default_rng(seed)
    X = rng.random((n, 6))
    for x, y in zip(X, hartmann6(X), strict=True):
        opt.add(dict(zip(space, x, strict=True)), float(y))
    rows = []
    for step in range(steps + 1):
        start, compiles = time.perf_counter(), _COMPILES[0]
        trial = opt.ask()
        seconds = time.perf_counter() - start
        posterior = opt.posterior
        row = {
            "n": n,
            "step": step,
            "capacity": posterior.data.capacity,
            "step_s": round(seconds, 3),
            "compilations": _COMPILES[0] - compiles,
            "draws": int(posterior.num_samples),
            "mean_n_steps": float(np.mean(posterior.sample_stats.get("n_steps", 0))),
            "refit_warmup": getattr(
                ppbo.campaign.registry.make_inference(inference), "refit_warmup", None
            ),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        x = np.array([[trial.params[k] for k in space]])
        opt.tell(trial, float(hartmann6(x)[0]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--inference", default="nuts")
    parser.add_argument("--name", default="bo_step")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    jax.monitoring.register_event_duration_secs_listener(_count)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / f"{args.name}.jsonl"
    rows = []
    if log.exists():
        rows = [json.loads(line) for line in log.read_text().splitlines()]
    done = {r["n"] for r in rows}
    for n in args.sizes:
        if n in done:
            continue
        new = run(n, args.steps, args.inference)
        with log.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in new)
        rows += new
    warm = {}
    for n in sorted({r["n"] for r in rows}):
        times = [
            r["step_s"]
            for r in rows
            if r["n"] == n and r["step"] > 0 and r["compilations"] == 0
        ]
        warm[str(n)] = float(np.median(times)) if times else None
    device = jax.devices()[0]
    result = {
        "benchmark": "bo_step",
        "problem": "hartmann6",
        "inference": repr(ppbo.campaign.registry.make_inference(args.inference)),
        "acquisition": "log_ei (the campaign default)",
        "device": {
            "platform": device.platform,
            "device_kind": getattr(device, "device_kind", ""),
            "cpus": os.cpu_count(),
            "host": platform.platform(),
        },
        "jax": jax.__version__,
        "median_warm_step_s": warm,
        "rows": rows,
    }
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
