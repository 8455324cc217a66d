"""The forest's native integer and categorical inputs on a small mixed problem.

A mixed Branin: ``x`` real in [-5, 10], ``n`` an integer in 0..15 (Branin's
second input on the integers) and a categorical ``c`` with five choices that
shift the value by (2, 0, 3, 0.5, 4): not monotone in the choice's index.
Minimise; the optimum (``c = "b"``, ``n = 2``, the best real ``x``) is found
on a fine grid refined by a bounded scalar search.

Compared, through the campaign users run (``ppbo.Optimizer``, log-EI, the default
design of ``2 * 3 = 6`` points): the forest with native inputs (the registry's
``"forest"``: the campaign fills its ``columns`` from the space), the same forest
on the unit-cube encoding the GP sees (one-hot categorical coordinates, integers
as unit coordinates: ``columns`` all ``["real"]``), and the GP (MAP). Recorded per
evaluation: the immediate regret of the best value so far; per model step: the
seconds of ``ask``. Writes ``results/forest_mixed.json`` and
``results/forest_mixed.png`` (median regret with the range over seeds).

Usage: ``python benchmarks/forest_mixed.py [--budget 40] [--seeds 5]
[--methods forest,forest_unit,gp] [--name forest_mixed]`` (``--name``: the
output files' stem).
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
from scipy.optimize import minimize_scalar  # noqa: E402

import ppbo  # noqa: E402
from ppbo.models import forest  # noqa: E402

CHOICES = ["a", "b", "c", "d", "e"]
SHIFT = dict(zip(CHOICES, (2.0, 0.0, 3.0, 0.5, 4.0), strict=True))
SPACE = ppbo.Space(
    {
        "x": ppbo.Real(-5.0, 10.0),
        "n": ppbo.Integer(0, 15),
        "c": ppbo.Categorical(CHOICES),
    }
)
#: Registry specs of the compared methods.
SPECS = {
    "forest": {"name": "forest"},
    "forest_unit": {"name": "forest", "columns": [["real"]] * SPACE.dim},
    "gp": "gp",
}


def branin(x: float, n: float) -> float:
    """Branin (the VLSE form) at ``(x, n)``."""
    b, c, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 1 / (8 * np.pi)
    return (n - b * x**2 + c * x - 6) ** 2 + 10 * (1 - t) * np.cos(x) + 10


def objective(params: dict) -> float:
    """The mixed Branin at a parameter dict."""
    return float(branin(params["x"], params["n"]) + SHIFT[params["c"]])


def optimum() -> float:
    """The smallest value over the integers ``n``, the reals ``x`` and ``c``."""
    grid = np.linspace(-5.0, 10.0, 30001)
    best = np.inf
    for n in range(16):
        x0 = grid[np.argmin(branin(grid, n))]
        lo, hi = max(x0 - 1e-3, -5.0), min(x0 + 1e-3, 10.0)
        found = minimize_scalar(
            lambda x, n=n: branin(x, n),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-12},
        )
        best = min(best, float(found.fun), float(branin(lo, n)), float(branin(hi, n)))
    return best + min(SHIFT.values())


def run(name: str, seed: int, budget: int, best_value: float) -> dict:
    opt = ppbo.Optimizer(SPACE, surrogate=SPECS[name], seed=seed)
    best, regret, seconds, chosen = np.inf, [], [], []
    for _ in range(budget):
        start = time.perf_counter()
        trial = opt.ask()
        elapsed = time.perf_counter() - start
        value = objective(trial.params)
        opt.tell(trial, value)
        if trial.origin == "model":
            seconds.append(elapsed)
        chosen.append(trial.params["c"])
        best = min(best, value)
        regret.append(best - best_value)
    return {"regret": regret, "step_seconds": seconds, "categories": chosen}


def write(args, names: list[str], runs: dict, seeds: int, best_value: float) -> None:
    summary = {}
    for name in names:
        regret = np.array([r["regret"] for r in runs[name]])
        warm = np.concatenate([r["step_seconds"][1:] for r in runs[name]])
        model = [r["categories"][6:] for r in runs[name]]
        summary[name] = {
            "median_final_regret": float(np.median(regret[:, -1])),
            "final_regret_per_seed": regret[:, -1].tolist(),
            "median_regret_at_20": float(
                np.median(regret[:, min(19, args.budget - 1)])
            ),
            "median_step_seconds_after_first": float(np.median(warm)),
            "model_asks_in_best_category": float(
                np.mean([c == "b" for seed in model for c in seed])
            ),
        }
    result = {
        "benchmark": "forest_mixed",
        "problem": "mixed branin (x real, n integer 0..15, c categorical x5)",
        "optimum": best_value,
        "budget": args.budget,
        "seeds": seeds,
        "acquisition": "log_ei",
        "specs": SPECS,
        "columns": forest.columns_of(SPACE),
        "machine": {"platform": platform.platform()},
        "jax": jax.__version__,
        "summary": summary,
        "runs": runs,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2))
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in names:
        regret = np.array([r["regret"] for r in runs[name]])
        steps = np.arange(1, regret.shape[1] + 1)
        (line,) = ax.plot(steps, np.median(regret, 0), label=name)
        ax.fill_between(
            steps, regret.min(0), regret.max(0), color=line.get_color(), alpha=0.2
        )
    ax.set(
        yscale="log",
        xlabel="evaluations",
        ylabel="immediate regret",
        title=f"mixed Branin, median and range over {seeds} seeds",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"{args.name}.png", dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", default=",".join(SPECS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--name", default="forest_mixed", help="output file stem")
    args = parser.parse_args()
    best_value = optimum()
    names = args.methods.split(",")
    runs = {name: [] for name in names}
    for seed in range(args.seeds):
        for name in names:
            start = time.perf_counter()
            runs[name].append(run(name, seed, args.budget, best_value))
            final = runs[name][-1]["regret"][-1]
            print(
                f"{name} seed {seed}: final regret {final:.4f} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
        write(args, names, runs, seed + 1, best_value)


if __name__ == "__main__":
    main()
