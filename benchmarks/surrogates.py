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
[--surrogates gp,dngo,ablr,forest] [--name surrogates]`` (``--name`` sets the
result files' stem)

``--scaling`` measures instead the seconds of one campaign step against n on
Hartmann-6 (d = 6) for n in ``--ns`` (default 100, 250, 500, 1000, 2000): a
campaign is warm-started by telling it n - 1 uniformly random points
(``Optimizer.add``), then its ``ask`` is timed. The first ask of a bucket
includes compilation and starts the inference cold; a second ask at n (after
telling the first) is the step a running campaign pays: compiled, and
warm-started from the previous ask's posterior. Wall-clock and process CPU
seconds are both recorded (the CPU seconds are less sensitive to other load on a
shared machine). A surrogate is not run at the next n when its first ask there,
predicted from the last by its cost law (n^3 for the GPs, n for the others),
would exceed ``--max-seconds``; its step's CPU seconds there are extrapolated
from its largest measured n by the same law (labelled as extrapolated; the plot
shows CPU seconds). Writes
``results/surrogates_scaling.json`` and ``results/surrogates_scaling.png``
(log-log axes with O(n) and O(n^3) guides). Usage:
``python benchmarks/surrogates.py --scaling [--surrogates dngo,ablr,forest,gp]
[--ns 100,250,500,1000,2000] [--max-seconds 600]``
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
    "dngo_ensemble5": {"name": "dngo", "ensemble": 5},
    "bnn": {"name": "bnn"},
    "gp_nuts": "gp",
}
#: Surrogates of the regret comparison fitted by other than their default
#: inference (``gp_nuts``: the fully Bayesian GP, NUTS with the campaign's
#: defaults, the GP whose step the scaling benchmark compares DNGO's with).
INFERENCE = {"gp_nuts": "nuts"}
#: The regret comparison's default surrogates; the other specs run when named
#: (``--surrogates dngo_ensemble5``).
DEFAULT_SURROGATES = ("gp", "dngo", "ablr", "forest")


#: Surrogates of the scaling benchmark: (registry spec, inference name or None
#: for the surrogate's default). ``gp`` is the default MAP GP, ``gp_nuts`` the
#: fully Bayesian GP, ``bnn`` the NUTS-sampled network.
#: Cost law of each surrogate's step in n, for skipping and extrapolating.
SCALING_EXPONENT = {"gp": 3.0, "gp_nuts": 3.0}

SCALING = {
    "dngo": ({"name": "dngo"}, None),
    "ablr": ({"name": "ablr"}, None),
    "forest": ({"name": "forest"}, None),
    "dngo_slice": ({"name": "dngo", "precisions": "slice"}, None),
    "gp": ("gp", None),
    "bnn": ({"name": "bnn"}, None),
    "gp_nuts": ("gp", "nuts"),
}


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def scaling_step(name: str, n: int, seed: int) -> dict:
    """Seconds of the ask of a campaign told ``n - 1`` random Hartmann-6 points."""
    problem = problems.get("hartmann6")
    space = {f"x{i}": ppbo.Real(lo, hi) for i, (_, lo, hi) in enumerate(problem.space)}
    spec, inference = SCALING[name]
    opt = ppbo.Optimizer(space, surrogate=spec, inference=inference, seed=seed)
    rng = np.random.default_rng(seed)
    lo = np.array([lo for _, lo, _ in problem.space])
    hi = np.array([hi for _, _, hi in problem.space])
    X = lo + (hi - lo) * rng.uniform(size=(n - 1, problem.dim))
    start = time.perf_counter()
    for x in X:
        opt.add({f"x{i}": float(v) for i, v in enumerate(x)}, float(problem(x)))
    add_seconds = time.perf_counter() - start
    trial, first, first_cpu = _timed(opt.ask)
    assert trial.origin == "model", trial.origin
    x = np.array([trial.params[f"x{i}"] for i in range(problem.dim)])
    opt.tell(trial, float(problem(x)))
    _, step, step_cpu = _timed(opt.ask)
    return {
        "n": n,
        "add_seconds": add_seconds,
        "first_ask_seconds": first,
        "first_ask_cpu_seconds": first_cpu,
        "step_seconds": step,
        "step_cpu_seconds": step_cpu,
    }


def write_scaling(args, names: list[str], rows: dict) -> None:
    ns = [int(n) for n in args.ns.split(",")]
    extrapolated = {}
    for name in names:
        measured = {r["n"]: r["step_cpu_seconds"] for r in rows[name]}
        if not measured:
            continue
        top = max(measured)
        power = SCALING_EXPONENT.get(name, 1.0)
        extrapolated[name] = {
            n: measured[top] * (n / top) ** power for n in ns if n > top
        }
    result = {
        "benchmark": "surrogates_scaling",
        "problem": "hartmann6",
        "dim": 6,
        "ns": ns,
        "seed": args.seed,
        "max_seconds": args.max_seconds,
        "specs": {
            k: {"surrogate": SCALING[k][0], "inference": SCALING[k][1]} for k in names
        },
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "jax": jax.__version__,
        "rows": rows,
        "extrapolation_exponents": {k: SCALING_EXPONENT.get(k, 1.0) for k in names},
        "extrapolated_step_cpu_seconds": extrapolated,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "surrogates_scaling.json").write_text(json.dumps(result, indent=2))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for name in names:
        if not rows[name]:
            continue
        n = [r["n"] for r in rows[name]]
        t = [r["step_cpu_seconds"] for r in rows[name]]
        (line,) = ax.plot(n, t, "o-", label=name)
        if extrapolated.get(name):
            en = [n[-1], *extrapolated[name]]
            et = [t[-1], *extrapolated[name].values()]
            ax.plot(en, et, ":", color=line.get_color())
    grid = np.array([min(ns), max(ns)], dtype=float)
    ax.plot(grid, 1.0 * grid / grid[0], "k--", lw=0.8, label="O(n)")
    ax.plot(grid, 1.0 * (grid / grid[0]) ** 3, "k-.", lw=0.8, label="O(n^3)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="n (observations)",
        ylabel="CPU seconds per ask (compiled, warm-started)",
        title="Hartmann-6, warm-started campaign (dotted: extrapolated)",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "surrogates_scaling.png", dpi=120)
    plt.close(fig)


def scaling(args) -> None:
    names = args.surrogates.split(",")
    rows = {name: [] for name in names}
    for n in (int(n) for n in args.ns.split(",")):
        for name in names:
            if rows[name]:
                last = rows[name][-1]
                power = SCALING_EXPONENT.get(name, 1.0)
                predicted = last["first_ask_seconds"] * (n / last["n"]) ** power
                if predicted > args.max_seconds:
                    continue
            row = scaling_step(name, n, args.seed)
            rows[name].append(row)
            print(
                f"{name} n={n}: first ask {row['first_ask_seconds']:.2f} s "
                f"(cpu {row['first_ask_cpu_seconds']:.2f}), step "
                f"{row['step_seconds']:.2f} s (cpu {row['step_cpu_seconds']:.2f})",
                flush=True,
            )
            write_scaling(args, names, rows)


def run(name: str, seed: int, budget: int) -> dict:
    problem = problems.get("hartmann6")
    space = {f"x{i}": ppbo.Real(lo, hi) for i, (_, lo, hi) in enumerate(problem.space)}
    opt = ppbo.Optimizer(
        space, surrogate=SPECS[name], inference=INFERENCE.get(name), seed=seed
    )
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
        "inference": INFERENCE,
        "machine": {"platform": platform.platform()},
        "jax": jax.__version__,
        "summary": summary,
        "runs": runs,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2))
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
    fig.savefig(out / f"{args.name}.png", dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--surrogates", default=",".join(DEFAULT_SURROGATES))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument(
        "--name", default="surrogates", help="result file stem (regret runs)"
    )
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--ns", default="100,250,500,1000,2000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    if args.scaling:
        if args.surrogates == ",".join(DEFAULT_SURROGATES):
            args.surrogates = ",".join(SCALING)
        scaling(args)
        return
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
