"""Immediate-regret sweep through ppbo's campaign: methods x problems x seeds.

Every ppbo method here is a :class:`ppbo.benchmarks.Campaign`: the run is a
:class:`ppbo.Optimizer` campaign, the code users run, with the user's defaults
unless the method says otherwise (its own initial design, standardisation, fit,
acquisition and acquisition optimiser). Observations carry Gaussian noise of
variance 1e-3 as in the PES paper (Hernández-Lobato et al. 2014, §5), drawn from a
stream fixed by (seed, evaluation) so that every method sees the same noise; every
evaluated point is scored by the noise-free immediate regret of the best point so
far, and the recommendation (:meth:`ppbo.Optimizer.recommend`) at the checkpoints.

Peers run in their own environments and append JSON lines that this script merges
(``--peers``): ``benchmarks/peers/botorch_regret.py`` writes
``results/regret_botorch.jsonl``. ``--table`` prints the side-by-side table of
median best-observed regret at the checkpoints (30 and 60 evaluations by default)
with 90% bootstrap bands and seconds per step.

Named problems may carry options (``ackley:d=5``); ``gp_sample`` draws a different
function from the GP prior for every seed.

Usage: ``python benchmarks/regret.py [--problems branin hartmann6] [--methods ppbo
ppbo_nuts] [--campaign NAME='{"acquisition": "log_ei"}'] [--seeds 20] [--budget 60]
[--workers 2] [--executor ray [--ray-address ADDRESS]] [--peers
results/regret_botorch.jsonl] [--paired botorch_qlognei] [--name regret]``;
``--executor ray`` sends the runs to a Ray cluster as tasks
(``ppbo.benchmarks.ray_map``); runs are
appended to ``results/{name}.jsonl`` as they finish and skipped when present, so a
sweep resumes; ``--table`` alone only summarises what is there.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import multiprocessing
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from ppbo import benchmarks  # noqa: E402

RESULTS = Path(__file__).parent / "results"
PROBLEMS = ["branin", "hartmann3", "hartmann6", "levy:d=4", "ackley:d=5", "gp_sample"]

#: Method name -> Optimizer options (JSON). "ppbo" is the user's defaults (MAP).
METHODS: dict[str, dict] = {
    "ppbo": {},
    "ppbo_nuts": {"inference": "nuts"},
    "ppbo_slice": {"inference": "slice"},
    "ppbo_pes": {"acquisition": "pes"},
    "ppbo_log_ei": {"acquisition": "log_ei"},
    "ppbo_ei": {"acquisition": "ei"},
    "ppbo_ucb": {"acquisition": "ucb"},
}


@functools.cache
def _variant(name: str) -> dict:
    """Options with ppbo objects (priors, inference configs) for the ablations.

    Names: ``true_hp`` (squared-exponential kernel with the GP samples' true
    lengthscale 0.1 held by a tight prior, noise near 1e-3), ``rbf``,
    ``rbf_dimension_scaled`` (BoTorch's model: squared exponential, the
    dimension-scaled lengthscale prior), ``map32`` (32 MAP restarts),
    ``raw2048`` (2048 raw candidates, 16 restarts), ``noise_low`` (the default GP
    with a lower, wider noise prior, LogNormal(log 1e-4, 2.5), instead of
    LogNormal(-4, 1)), ``nuts_noise_low`` (the NUTS default, ``inference="nuts"``,
    with that noise prior). Cached, so that a process
    compiles each variant's fit and acquisition once.
    """
    import numpyro.distributions as dist

    import ppbo
    from ppbo.models import gp

    if name == "true_hp":
        priors = {
            "lengthscale": dist.LogNormal(np.log(0.1), 0.01),
            "outputscale": dist.LogNormal(0.0, 1.0),
            "noise": dist.LogNormal(np.log(1e-3), 0.5),
        }
        return {"surrogate": gp.surrogate(kernel="rbf", priors=priors)}
    if name == "rbf":
        return {"surrogate": {"name": "gp", "kernel": "rbf"}}
    if name == "rbf_dimension_scaled":
        return {
            "surrogate": {
                "name": "gp",
                "kernel": "rbf",
                "lengthscale_prior": "dimension_scaled",
            }
        }
    if name == "noise_low":
        priors = {"noise": dist.LogNormal(np.log(1e-4), 2.5)}
        return {"surrogate": gp.surrogate(priors=priors)}
    if name == "nuts_noise_low":
        return {**_variant("noise_low"), "inference": "nuts"}
    if name == "map32":
        return {"inference": ppbo.MAP(num_restarts=32)}
    if name == "raw2048":
        return {"optimizer_options": {"num_raw": 2048, "num_restarts": 16}}
    raise KeyError(name)


def _task(task: tuple) -> dict:
    name, options, problem, seed, budget, checkpoints, noise_var, shared = task
    if name == "random_search":
        return benchmarks.run_one(
            name, benchmarks.random_search, problem, seed, budget, 3, noise_var
        )
    if isinstance(options, str):
        options = _variant(options)
    method = benchmarks.Campaign(
        options, recommend_at=tuple(checkpoints), shared_design=shared
    )
    return benchmarks.run_one(name, method, problem, seed, budget, 0, noise_var)


def _load(paths: list[Path]) -> list[dict]:
    runs = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    runs.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by a killed process
                    continue
    return runs


def _at(run: dict, kind: str, k: int) -> float:
    values = run[kind]
    return values[k - 1] if len(values) >= k else float("nan")


def table(runs: list[dict], checkpoints: list[int], level: float = 0.9) -> str:
    """Markdown table: median best-observed (and recommendation) regret per method.

    Cells give the median over seeds with its percentile-bootstrap band, for the
    runs that reached the checkpoint; "s/step" is the median time of one
    suggestion at the last checkpoint's budget.
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for run in runs:
        groups.setdefault((run["problem"], run["method"]), []).append(run)
    head = ["problem", "method", "seeds"]
    for k in checkpoints:
        head += [f"best observed @{k}", f"recommendation @{k}"]
    head.append("s/step")
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for (problem, method), members in sorted(groups.items()):
        row = [problem, method, str(len(members))]
        for k in checkpoints:
            for kind in ("regret_best_observed", "regret_recommendation"):
                values = np.array([_at(r, kind, k) for r in members])
                values = values[np.isfinite(values)]
                if len(values) == 0:
                    row.append("—")
                    continue
                median, low, high = benchmarks.bootstrap_median(
                    values[:, None], level=level
                )
                row.append(f"{median[0]:.3g} [{low[0]:.3g}, {high[0]:.3g}]")
        steps = [
            s for r in members for s in r["suggest_seconds"][r.get("n_initial", 0) :]
        ]
        row.append(f"{np.median(steps):.2f}" if steps else "—")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def paired(runs: list[dict], peer: str, checkpoints: list[int]) -> str:
    """Markdown table: each method against ``peer`` seed by seed.

    For every problem, method and checkpoint: on how many of the seeds both ran
    the method's best observed regret is the lower (ties count half), and the
    two-sided sign-test p-value of that count (exact binomial, ties dropped).
    Medians of a bimodal outcome (a campaign finds the global basin or not) move
    by a factor of ten when one seed of twenty changes sides; the paired count
    does not.
    """
    from scipy.stats import binomtest

    by: dict[tuple[str, str], dict[int, dict]] = {}
    for run in runs:
        by.setdefault((run["problem"], run["method"]), {})[run["seed"]] = run
    head = ["problem", "method"]
    for k in checkpoints:
        head += [f"better than {peer} @{k}", f"sign test p @{k}"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for (problem, method), members in sorted(by.items()):
        theirs = by.get((problem, peer))
        if method == peer or theirs is None:
            continue
        row = [problem, method]
        for k in checkpoints:
            pairs = [
                (
                    _at(members[s], "regret_best_observed", k),
                    _at(theirs[s], "regret_best_observed", k),
                )
                for s in sorted(set(members) & set(theirs))
            ]
            pairs = [(a, b) for a, b in pairs if np.isfinite(a) and np.isfinite(b)]
            if not pairs:
                row += ["—", "—"]
                continue
            wins = sum(a < b for a, b in pairs)
            losses = sum(a > b for a, b in pairs)
            ties = len(pairs) - wins - losses
            p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
            row += [f"{wins + ties / 2:g}/{len(pairs)}", f"{p:.2g}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=PROBLEMS)
    parser.add_argument("--methods", nargs="*", default=["ppbo", "ppbo_nuts"])
    parser.add_argument(
        "--campaign",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="an extra method: a name and ppbo.Optimizer options as JSON",
    )
    parser.add_argument(
        "--variants", nargs="*", default=[], help="ablation variants (_variant)"
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[30, 60])
    parser.add_argument("--noise-var", type=float, default=1e-3)
    parser.add_argument(
        "--shared-design",
        type=int,
        default=0,
        metavar="N",
        help="start every campaign from the runner's N-point design (as the peers "
        "do; pair with n_initial=0 in the options) instead of its own",
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--executor",
        choices=benchmarks.EXECUTORS,
        default="local",
        help="local: this process (or --workers processes); ray: Ray tasks",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="the Ray cluster for --executor ray (default: RAY_ADDRESS or a new "
        "local cluster)",
    )
    parser.add_argument("--name", default="regret")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--peers", nargs="*", type=Path, default=[])
    parser.add_argument("--table", action="store_true", help="only summarise")
    parser.add_argument(
        "--paired",
        metavar="PEER",
        help="also print every method against this one seed by seed (sign test)",
    )
    args = parser.parse_args(argv)

    methods = {}
    for name in args.methods:
        if name != "random_search" and name not in METHODS:
            parser.error(f"--methods: unknown {name!r}; known: {sorted(METHODS)}")
        methods[name] = METHODS.get(name, {})
    for item in args.campaign:
        name, _, text = item.partition("=")
        methods[name] = json.loads(text)
    for name in args.variants:
        methods[name] = name

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.jsonl"
    done = {(r["method"], r["problem"], r["seed"]) for r in _load([path])}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [
        (
            name,
            options,
            problem,
            seed,
            args.budget,
            args.checkpoints,
            args.noise_var,
            args.shared_design,
        )
        for seed in seeds
        for problem in args.problems
        for name, options in methods.items()
        if (name, problem, seed) not in done
    ]
    if not args.table and tasks:
        if args.executor == "ray":
            pool = None
            results = benchmarks.ray_map(
                _task, tasks, address=args.ray_address, ordered=False
            )
        elif args.workers > 1:
            # spawn, not fork: JAX is multithreaded and must not be forked.
            context = multiprocessing.get_context("spawn")
            pool = concurrent.futures.ProcessPoolExecutor(args.workers, context)
            results = pool.map(_task, tasks)
        else:
            pool, results = None, map(_task, tasks)
        with path.open("a") as sink:
            for run in results:
                sink.write(json.dumps(run) + "\n")
                sink.flush()
                print(
                    f"{run['method']:14s} {run['problem']:12s} seed {run['seed']:2d}: "
                    f"best observed {run['regret_best_observed'][-1]:.3g}",
                    flush=True,
                )
        if pool is not None:
            pool.shutdown()

    runs = [
        r
        for r in _load([path, *args.peers])
        if r["problem"] in args.problems and r["seed"] in seeds
    ]
    if not runs:
        return {"config": vars(args), "summary": {}, "table": ""}
    summary = benchmarks.summarize(runs)
    benchmarks.plot(summary, args.out / f"{args.name}.png")
    markdown = table(runs, args.checkpoints)
    if args.paired:
        markdown += "\n\n" + paired(runs, args.paired, args.checkpoints)
    (args.out / f"{args.name}.md").write_text(markdown + "\n")
    config = vars(args) | {
        "out": args.out.name,  # no machine paths in the stored results
        "peers": [path.name for path in args.peers],
    }
    result = {"config": config, "summary": summary, "table": markdown}
    (args.out / f"{args.name}.json").write_text(
        json.dumps(result, default=str, indent=1)
    )
    print(markdown)
    return result


if __name__ == "__main__":
    main()
