"""ppbo inside Ray Tune and Optuna, and benchmark sweeps on Ray: regret and wall time.

Three measurements on Branin (noise-free; regret = best value found minus the
optimum 0.397887), written to ``results/{name}.json`` after every finished part
(so an interrupted run keeps what it measured):

- ``tune``: :class:`ppbo.integrations.ray_tune.PPBOSearch` under Tune's
  ``ConcurrencyLimiter`` (``--concurrency`` trials at once on a local Ray cluster
  of that many CPUs), ``--budget`` trials, against the sequential
  :class:`ppbo.Optimizer` campaign with the same options and seed: the
  best-observed regret per seed and its median;
- ``sweep``: ``ppbo.benchmarks.run`` of ``--sweep-runs`` campaign runs with the
  local executor, then with ``executor="ray"`` on ``--concurrency`` local
  workers: wall time of each (and whether the runs agree);
- ``optuna``: an Optuna study with :class:`ppbo.integrations.optuna.PPBOSampler`
  against Optuna's TPE and random samplers, ``--budget`` trials per seed.

Usage: ``python benchmarks/integrations.py [--parts tune sweep optuna] [--seeds 10]
[--budget 30] [--concurrency 2] [--sweep-runs 8] [--optuna-seeds 3]
[--max-minutes 40] [--name integrations]``. Timings depend on the machine and its
load; the JSON records the CPU count and the load average at the start.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

# One persistent compilation cache for this process and its Ray workers (they
# inherit the environment), so that a worker does not pay again for programs
# another process compiled; each part warms it up before it times anything.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), "ppbo-integrations-jax-cache"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import ppbo  # noqa: E402
from ppbo import benchmarks  # noqa: E402

RESULTS = Path(__file__).parent / "results"
PROBLEM = benchmarks.get("branin")
SPACE = benchmarks.problem_space(PROBLEM)
#: Optimizer options shared by the sequential campaign and the Tune searcher: the
#: user's defaults (MAP GP, log-EI, LHS design).
OPTIONS: dict = {}


def branin(x1: float, x2: float) -> float:
    """The noise-free Branin function at one point."""
    return float(PROBLEM.objective(np.array([[x1, x2]], dtype=np.float64))[0])


def _regret(values) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return min(finite) - PROBLEM.optimum_value


def _tune_objective(config):
    from ray import tune

    tune.report({"value": branin(config["x1"], config["x2"])})


def run_sequential(seed: int, budget: int) -> dict:
    start = time.perf_counter()
    opt = ppbo.Optimizer(SPACE, seed=seed, **OPTIONS)
    for _ in range(budget):
        trial = opt.ask()
        opt.tell(trial, branin(**trial.params))
    values = [t.value for t in opt.get_trials()]
    return {
        "seed": seed,
        "regret": _regret(values),
        "seconds": time.perf_counter() - start,
    }


def run_tune(seed: int, budget: int, concurrency: int, folder: Path) -> dict:
    from ray import tune

    from ppbo.integrations.ray_tune import PPBOSearch

    start = time.perf_counter()
    search = PPBOSearch(
        SPACE,
        metric="value",
        mode="min",
        storage=folder / f"tune-{seed}.db",
        name=f"tune-{seed}",
        seed=seed,
        **OPTIONS,
    )
    tuner = tune.Tuner(
        _tune_objective,
        tune_config=tune.TuneConfig(
            search_alg=tune.search.ConcurrencyLimiter(search, concurrency),
            num_samples=budget,
        ),
        run_config=tune.RunConfig(
            storage_path=str(folder / "ray_results"), name=f"seed-{seed}", verbose=0
        ),
    )
    tuner.fit()
    trials = search.optimizer.get_trials()
    return {
        "seed": seed,
        "regret": _regret([t.value for t in trials if t.state == "COMPLETE"]),
        "seconds": time.perf_counter() - start,
        "states": sorted({t.state for t in trials}),
        "trials": len(trials),
    }


def part_tune(args, out: dict, save) -> None:
    import ray

    folder = Path(tempfile.mkdtemp(prefix="ppbo-integrations-"))
    if not ray.is_initialized():
        ray.init(num_cpus=args.concurrency, include_dashboard=False)
    entry = out.setdefault(
        "tune",
        {
            "budget": args.budget,
            "concurrency": args.concurrency,
            "sequential": [],
            "ray_tune": [],
        },
    )
    for seed in range(args.seeds):
        if time.monotonic() > args.deadline:
            entry["stopped"] = f"time limit after {seed} seeds"
            break
        entry["sequential"].append(run_sequential(seed, args.budget))
        entry["ray_tune"].append(run_tune(seed, args.budget, args.concurrency, folder))
        for kind in ("sequential", "ray_tune"):
            regrets = [r["regret"] for r in entry[kind]]
            entry[f"median_regret_{kind}"] = float(np.median(regrets))
            entry[f"median_seconds_{kind}"] = float(
                np.median([r["seconds"] for r in entry[kind]])
            )
        entry["seeds"] = seed + 1
        print(
            f"tune seed {seed}: sequential {entry['sequential'][-1]['regret']:.3g}, "
            f"ray tune {entry['ray_tune'][-1]['regret']:.3g}",
            flush=True,
        )
        save()


def part_sweep(args, out: dict, save) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=args.concurrency, include_dashboard=False)
    methods = {"ppbo": benchmarks.Campaign(dict(OPTIONS))}
    seeds = range(args.sweep_runs)
    timings = {}
    runs = {}
    # warm-up, not timed: two short runs per executor compile the programs (and
    # start the Ray workers), as a long sweep amortises them
    for executor in ("local", "ray"):
        benchmarks.run(methods, ["branin"], [100, 101], 8, executor=executor)
    for executor in ("local", "ray"):
        start = time.perf_counter()
        result = benchmarks.run(
            methods, ["branin"], seeds, args.sweep_budget, executor=executor
        )
        timings[executor] = time.perf_counter() - start
        runs[executor] = result["runs"]
        print(f"sweep {executor}: {timings[executor]:.1f} s", flush=True)

    def same(a, b):
        drop = ("suggest_seconds", "recommend_seconds")
        return json.dumps({k: v for k, v in a.items() if k not in drop}) == json.dumps(
            {k: v for k, v in b.items() if k not in drop}
        )

    out["sweep"] = {
        "runs": args.sweep_runs,
        "budget": args.sweep_budget,
        "workers": args.concurrency,
        "seconds_local": timings["local"],
        "seconds_ray": timings["ray"],
        "ratio_ray_to_local": timings["ray"] / timings["local"],
        "warm": "compiled programs cached and Ray workers started before timing",
        "identical_runs": all(
            same(a, b) for a, b in zip(runs["local"], runs["ray"], strict=True)
        ),
    }
    save()


def part_optuna(args, out: dict, save) -> None:
    import optuna

    from ppbo.integrations.optuna import PPBOSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        return branin(
            trial.suggest_float("x1", -5.0, 10.0), trial.suggest_float("x2", 0.0, 15.0)
        )

    samplers = {
        "ppbo": lambda seed: PPBOSampler(n_startup_trials=4, seed=seed),
        "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
        "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    }
    entry = out.setdefault("optuna", {"budget": args.budget, "runs": {}})
    for name, make in samplers.items():
        results = entry["runs"].setdefault(name, [])
        for seed in range(args.optuna_seeds):
            start = time.perf_counter()
            study = optuna.create_study(sampler=make(seed))
            study.optimize(objective, n_trials=args.budget)
            results.append(
                {
                    "seed": seed,
                    "regret": study.best_value - PROBLEM.optimum_value,
                    "seconds": time.perf_counter() - start,
                }
            )
            print(f"optuna {name} seed {seed}: {results[-1]['regret']:.3g}", flush=True)
        entry[f"median_regret_{name}"] = float(
            np.median([r["regret"] for r in results])
        )
        save()


PARTS = {"sweep": part_sweep, "optuna": part_optuna, "tune": part_tune}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--sweep-runs", type=int, default=8)
    parser.add_argument("--sweep-budget", type=int, default=15)
    parser.add_argument("--optuna-seeds", type=int, default=3)
    parser.add_argument("--max-minutes", type=float, default=40.0)
    parser.add_argument("--name", default="integrations")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.deadline = time.monotonic() + 60.0 * args.max_minutes
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.json"
    out: dict = {
        "config": {k: v for k, v in vars(args).items() if k not in ("deadline", "out")},
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average_at_start": list(os.getloadavg()),
        },
    }

    def save() -> None:
        path.write_text(json.dumps(out, indent=1))

    for part in args.parts:
        PARTS[part](args, out, save)
    out["machine"]["load_average_at_end"] = list(os.getloadavg())
    save()
    return out


if __name__ == "__main__":
    main()
