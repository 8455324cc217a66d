"""Immediate-regret sweep: methods x problems x seeds, written as JSON and PNG.

Runs the PES paper's protocol (Hernández-Lobato et al. 2014, Section 5) through
``ppbo.benchmarks.run``: a 3-point Latin-hypercube design shared by all methods for a
seed, Gaussian observation noise (variance 1e-3 by default), and the noise-free
immediate regret of the recommendation and of the best evaluated point after every
evaluation; medians with 90% bootstrap bands go to ``benchmarks/results/``.

Named problems may carry options (``ackley:d=5``); ``gp_sample`` draws a different
function from the GP prior for every seed.

Adding a method: put a factory in ``METHODS``. It receives the parsed arguments and
returns a ``ppbo.benchmarks.Method`` (``suggest`` and ``recommend`` functions
``(key, problem, X_unit, y) -> x_unit``); for ``--workers`` > 1 the method must
pickle (module-level functions or ``functools.partial`` of them).

Usage: ``python benchmarks/regret.py [--problems branin cosines] [--methods
random_search] [--seeds 20] [--budget 30] [--out DIR] [--workers 2]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

from ppbo import benchmarks  # noqa: E402


#: The extension point: method name -> factory building the Method from the parsed
#: command-line arguments. BO methods (EI, PES, ...) are registered here, e.g.
#: ``"ei": lambda args: bo_method(acquisition=ppbo.acquisition.ei, ...)``.
def _bo(acquisition: str, inference: str = "nuts"):
    def factory(args: argparse.Namespace) -> benchmarks.Method:
        return benchmarks.bayes_opt(
            acquisition,
            inference=inference,
            num_warmup=args.mcmc_warmup,
            num_samples=args.mcmc_samples,
        )

    return factory


METHODS: dict[str, Callable[[argparse.Namespace], benchmarks.Method]] = {
    "random_search": lambda args: benchmarks.random_search,
    # fully Bayesian (NUTS) GP with the acquisition marginalised over samples
    "ei": _bo("ei"),
    "log_ei": _bo("log_ei"),
    "pi": _bo("pi"),
    "kg": _bo("kg"),
    # the same with slice sampling, and with one MAP sample
    "ei_slice": _bo("ei", "slice"),
    "ei_map": _bo("ei", "map"),
}


def _report(run: dict) -> None:
    print(
        json.dumps(
            {
                "method": run["method"],
                "problem": run["instance"],
                "seed": run["seed"],
                "final_regret_recommendation": run["regret_recommendation"][-1],
                "final_regret_best_observed": run["regret_best_observed"][-1],
                "seconds": round(
                    sum(run["suggest_seconds"]) + sum(run["recommend_seconds"]), 3
                ),
            }
        ),
        flush=True,
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--problems",
        nargs="+",
        default=["branin", "cosines", "hartmann6"],
        help=f"problem names, optionally name:option=value,...; known: "
        f"{', '.join(benchmarks.names())}",
    )
    parser.add_argument(
        "--methods", nargs="+", default=["random_search"], choices=sorted(METHODS)
    )
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=30, help="evaluations per run")
    parser.add_argument("--n-initial", type=int, default=3)
    parser.add_argument("--mcmc-warmup", type=int, default=256)
    parser.add_argument("--mcmc-samples", type=int, default=256)
    parser.add_argument("--noise-var", type=float, default=1e-3)
    parser.add_argument("--workers", type=int, default=1, help="parallel processes")
    parser.add_argument("--name", default="regret", help="result file stem")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)

    methods = {name: METHODS[name](args) for name in args.methods}
    common = dict(
        methods=methods,
        problems=args.problems,
        seeds=range(args.first_seed, args.first_seed + args.seeds),
        budget=args.budget,
        n_initial=args.n_initial,
        noise_var=args.noise_var,
        out_dir=args.out,
        name=args.name,
        on_run=_report,
    )
    if args.workers > 1:
        # spawn, not fork: JAX is multithreaded and must not be forked.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(args.workers, context) as pool:
            result = benchmarks.run(map_fn=pool.map, **common)
    else:
        result = benchmarks.run(**common)
    for problem, by_method in result["summary"].items():
        for method, entry in by_method.items():
            final = entry["final"]
            print(
                f"{problem:24s} {method:16s} median final regret: recommendation "
                f"{final['regret_recommendation']:.3g}, best observed "
                f"{final['regret_best_observed']:.3g} ({entry['num_runs']} runs)"
            )
    print(f"wrote {Path(args.out) / args.name}.json and .png")
    return result


if __name__ == "__main__":
    main()
