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
  against Optuna's TPE and random samplers, ``--budget`` trials per seed; the
  runs of Optuna's BoTorch sampler (``peers/optuna_botorch.py``, its own
  environment) are merged in from ``results/{name}_optuna_botorch.jsonl`` when
  that file exists.

The results file is resumable: an existing ``results/{name}.json`` is read and
extended, and a seed an arm already holds is not run again (``--fresh`` starts
over). ``--first-seed F --seeds N`` runs the Tune seeds ``F .. F + N - 1``,
``--optuna-seeds N`` the Optuna seeds ``0 .. N - 1``.

Usage: ``python benchmarks/integrations.py [--parts tune sweep optuna] [--seeds 10]
[--first-seed 0] [--budget 30] [--concurrency 2] [--sweep-runs 8]
[--optuna-seeds 3] [--max-minutes 40] [--name integrations] [--fresh]``. Timings
depend on the machine and its load; the JSON records the CPU count and the load
average at the start of each invocation.
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
    entry = out.setdefault(
        "tune",
        {
            "budget": args.budget,
            "concurrency": args.concurrency,
            "sequential": [],
            "ray_tune": [],
        },
    )
    if (entry["budget"], entry["concurrency"]) != (args.budget, args.concurrency):
        raise ValueError(
            f"tune: the results file holds budget={entry['budget']}, "
            f"concurrency={entry['concurrency']}; got budget={args.budget}, "
            f"concurrency={args.concurrency} (use another --name or --fresh)"
        )
    entry.pop("stopped", None)
    done = {r["seed"] for r in entry["sequential"]} & {
        r["seed"] for r in entry["ray_tune"]
    }
    todo = [
        seed
        for seed in range(args.first_seed, args.first_seed + args.seeds)
        if seed not in done
    ]
    if not todo:
        return
    import ray

    folder = Path(tempfile.mkdtemp(prefix="ppbo-integrations-"))
    if not ray.is_initialized():
        ray.init(num_cpus=args.concurrency, include_dashboard=False)
    for seed in todo:
        if time.monotonic() > args.deadline:
            entry["stopped"] = f"time limit before seed {seed}"
            break
        sequential = run_sequential(seed, args.budget)
        tuned = run_tune(seed, args.budget, args.concurrency, folder)
        # both arms of a seed are stored together, so an interrupted seed leaves
        # neither arm behind
        for kind, result in (("sequential", sequential), ("ray_tune", tuned)):
            entry[kind] = [r for r in entry[kind] if r["seed"] != seed] + [result]
            entry[kind].sort(key=lambda r: r["seed"])
        excluded = [e for e in entry.pop("excluded", []) if e["seed"] != seed]
        if excluded:
            entry["excluded"] = excluded
        for kind in ("sequential", "ray_tune"):
            regrets = [r["regret"] for r in entry[kind]]
            entry[f"median_regret_{kind}"] = float(np.median(regrets))
            entry[f"median_seconds_{kind}"] = float(
                np.median([r["seconds"] for r in entry[kind]])
            )
        entry["seeds"] = len(entry["ray_tune"])
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
    if entry["budget"] != args.budget:
        raise ValueError(
            f"optuna: the results file holds budget={entry['budget']}, got "
            f"budget={args.budget} (use another --name or --fresh)"
        )
    for name, make in samplers.items():
        results = entry["runs"].setdefault(name, [])
        done = {r["seed"] for r in results}
        for seed in range(args.optuna_seeds):
            if seed in done:
                continue
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
        results.sort(key=lambda r: r["seed"])
        if results:
            entry[f"median_regret_{name}"] = float(
                np.median([r["regret"] for r in results])
            )
        save()
    merge_optuna_botorch(args, entry)
    save()


def merge_optuna_botorch(args, entry: dict) -> None:
    """Merge the BoTorch-sampler peer's JSON lines (if any) into the optuna part.

    Only lines with this part's budget count; a seed run twice keeps its last line.
    """
    path = args.out / f"{args.name}_optuna_botorch.jsonl"
    if not path.exists():
        return
    by_seed = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            if record["budget"] == entry["budget"]:
                by_seed[record["seed"]] = record
    if not by_seed:
        return
    entry["runs"]["botorch"] = [by_seed[seed] for seed in sorted(by_seed)]
    entry["median_regret_botorch"] = float(
        np.median([r["regret"] for r in by_seed.values()])
    )


PARTS = {"sweep": part_sweep, "optuna": part_optuna, "tune": part_tune}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--sweep-runs", type=int, default=8)
    parser.add_argument("--sweep-budget", type=int, default=15)
    parser.add_argument("--optuna-seeds", type=int, default=3)
    parser.add_argument("--max-minutes", type=float, default=40.0)
    parser.add_argument("--name", default="integrations")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fresh", action="store_true", help="start a new results file")
    args = parser.parse_args(argv)
    if args.seeds < 0 or args.first_seed < 0 or args.optuna_seeds < 0:
        parser.error(
            f"--seeds, --first-seed and --optuna-seeds must be >= 0, got "
            f"{args.seeds}, {args.first_seed}, {args.optuna_seeds}"
        )
    args.deadline = time.monotonic() + 60.0 * args.max_minutes
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.json"
    config = {k: v for k, v in vars(args).items() if k not in ("deadline", "out")}
    machine = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()),
    }
    if path.exists() and not args.fresh:
        out = json.loads(path.read_text())
        # one record per later invocation; the first one's stay at the top level
        out.setdefault("resumed", []).append({"config": config, "machine": machine})
        machine = out["resumed"][-1]["machine"]
    else:
        out = {"config": config, "machine": machine}

    def save() -> None:
        path.write_text(json.dumps(out, indent=1))

    for part in args.parts:
        PARTS[part](args, out, save)
    machine["load_average_at_end"] = list(os.getloadavg())
    save()
    return out


if __name__ == "__main__":
    main()
