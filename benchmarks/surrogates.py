"""GP vs DNGO vs ABLR vs random forest on Hartmann-6, through ppbo.Optimizer.

Each surrogate runs the same campaign that users run (``ppbo.Optimizer``, log-EI,
the default design of ``2 d = 12`` Sobol points, the default acquisition
optimiser) on Hartmann-6 (minimise; optimum -3.32237) for ``--budget``
evaluations and ``--seeds`` seeds. Recorded per evaluation: the immediate regret
of the best value so far; per model step: the seconds of ``ask`` (fit plus
acquisition optimisation). Writes ``results/surrogates.json`` and
``results/surrogates.png`` (median regret with the range over seeds, and the
seconds per step against n).

Usage: ``python benchmarks/surrogates.py [--budget 60] [--seeds 3]
[--surrogates gp,dngo,ablr,forest]``
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import ppbo  # noqa: E402
from ppbo.benchmarks import problems  # noqa: E402

#: Registry specs of the compared surrogates (the registry's defaults: GP with
#: MAP hyperparameters, networks of three tanh layers of 50 units trained for
#: 1000 Adam steps, 32 trees).
SPECS = {
    "gp": "gp",
    "dngo": {"name": "dngo"},
    "ablr": {"name": "ablr"},
    "forest": {"name": "forest"},
}


def run(name: str, seed: int, budget: int) -> dict:
    problem = problems.get("hartmann6")
    space = {f"x{i}": ppbo.Real(lo, hi) for i, (_, lo, hi) in enumerate(problem.space)}
    opt = ppbo.Optimizer(space, surrogate=SPECS[name], seed=seed)
    best, regret, seconds, ns = np.inf, [], [], []
    for _ in range(budget):
        start = time.perf_counter()
        trial = opt.ask()
        elapsed = time.perf_counter() - start
        x = np.array([trial.params[f"x{i}"] for i in range(problem.dim)])
        value = float(problem(x))
        opt.tell(trial, value)
        if trial.origin == "model":
            seconds.append(elapsed)
            ns.append(len(regret))
        best = min(best, float(problem.noise_free(x)))
        regret.append(best - problem.optimum_value)
    return {"regret": regret, "step_seconds": seconds, "n": ns}


def write(args, names: list[str], runs: dict, seeds: int) -> None:
    summary = {}
    for name in names:
        regret = np.array([r["regret"] for r in runs[name]])
        # the first model step of a seed includes compilation: report the rest
        warm = np.concatenate([r["step_seconds"][1:] for r in runs[name]])
        summary[name] = {
            "median_final_regret": float(np.median(regret[:, -1])),
            "final_regret_per_seed": regret[:, -1].tolist(),
            "median_step_seconds_after_first": float(np.median(warm)),
        }
    result = {
        "benchmark": "surrogates",
        "problem": "hartmann6",
        "budget": args.budget,
        "seeds": seeds,
        "acquisition": "log_ei",
        "specs": SPECS,
        "machine": {"platform": platform.platform()},
        "jax": jax.__version__,
        "summary": summary,
        "runs": runs,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "surrogates.json").write_text(json.dumps(result, indent=2))
    fig, (ax_regret, ax_time) = plt.subplots(1, 2, figsize=(10, 4))
    for name in names:
        regret = np.array([r["regret"] for r in runs[name]])
        steps = np.arange(1, regret.shape[1] + 1)
        (line,) = ax_regret.plot(steps, np.median(regret, 0), label=name)
        ax_regret.fill_between(
            steps, regret.min(0), regret.max(0), color=line.get_color(), alpha=0.2
        )
        n = np.concatenate([r["n"][1:] for r in runs[name]])
        t = np.concatenate([r["step_seconds"][1:] for r in runs[name]])
        ax_time.scatter(n, t, s=6, color=line.get_color(), label=name)
    ax_regret.set(
        yscale="log",
        xlabel="evaluations",
        ylabel="immediate regret",
        title=f"Hartmann-6, median and range over {seeds} seeds",
    )
    ax_time.set(yscale="log", xlabel="n (observations)", ylabel="seconds per ask")
    ax_regret.legend()
    ax_time.legend()
    fig.tight_layout()
    fig.savefig(out / "surrogates.png", dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--surrogates", default=",".join(SPECS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    names = args.surrogates.split(",")
    runs = {name: [] for name in names}
    for seed in range(args.seeds):
        for name in names:
            start = time.perf_counter()
            runs[name].append(run(name, seed, args.budget))
            final = runs[name][-1]["regret"][-1]
            print(
                f"{name} seed {seed}: final regret {final:.4f} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
        write(args, names, runs, seed + 1)  # after every seed: partial results stay


if __name__ == "__main__":
    main()
