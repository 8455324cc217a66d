"""Reproduce the experiments of the Predictive Entropy Search paper at a chosen scale.

Hernández-Lobato, Hoffman and Ghahramani (2014), "Predictive Entropy Search for
Efficient Global Optimization of Black-box Functions", NeurIPS, §4-5. Three
experiments, each scored by the noise-free immediate regret of the recommendation
(the maximiser of the posterior mean) and of the best evaluated point after every
evaluation, as log10 medians over seeds with 90% bootstrap bands:

``gp_samples``
    Objectives drawn from a GP prior on [0, 1]^2 (squared-exponential kernel,
    lengthscale 0.1, unit signal variance; a different draw per seed), observed
    with Gaussian noise of variance 1e-3. The GP hyperparameters are fixed to
    these true values (``ppbo.Fixed``; outputs not standardised, zero mean), so
    PES, ES and EI differ only in their acquisition. PES averages over 16
    sampled maximisers x* (the one sample repeated 16 times, one x* per copy).
``synthetic``
    Branin, the mixture of cosines and Hartmann-6 with noise variance 1e-3 and 3
    Latin-hypercube initial points; squared-exponential ARD GP with a constant
    mean, hyperparameters marginalised by NUTS (warm-started), 16 evenly spaced
    posterior samples (the paper's authors average over 10 MCMC samples; PES
    draws one x* per sample). PES, PES-NB (PES at the posterior mean of the
    hyperparameters, for the acquisition and the recommendation, still averaging
    over 16 x*), ES and EI; plus a diagnostic PES-NB at the geometric mean of the
    positive hyperparameters (``pes_nb_log``), as the arithmetic mean of
    heavy-tailed lengthscale samples can be far from all of them.
``nnet``
    The NNet task (validation error of a small neural network over weight decay
    and training iterations; ``ppbo.benchmarks.get("nnet")`` with its own noise),
    with the same methods; skipped, with a message, while ppbo has no ``nnet``
    problem.

ES (entropy search on representer points) is gradient-free and costs far more per
step than PES, so it averages over fewer hyperparameter samples and sample paths
(``--es-samples``, ``--es-paths``) and is left out of Hartmann-6 unless ``--full``
or ``--methods`` asks for it. All methods share the initial design and the noise
sequence of a seed. Results go to ``benchmarks/results/pes_paper_<experiment>.json``
(settings, per-seed regret curves and timings, the summary) and ``.png``; the JSON
is rewritten after every finished run, so an interrupted sweep keeps what it did.

``--merge`` keeps the runs already in the JSON files that a sweep does not redo
(to add methods or seeds); ``--replot`` redraws the PNGs from the JSON files.
``--time-step`` instead times
one PES step at n = 50, d = 6 (Hartmann-6) with 16 hyperparameter samples once
compiled: sampling x*, EP, and maximising the acquisition with the default
``optimize_acquisition`` settings (the NUTS refit is timed separately).

Usage::

    python benchmarks/pes_paper.py                      # default scale (~1 hour)
    python benchmarks/pes_paper.py --smoke              # minutes: checks the plumbing
    python benchmarks/pes_paper.py --full               # the paper's scale (days)
    python benchmarks/pes_paper.py --experiments synthetic --problems branin \\
        --methods pes ei --seeds 10 --budget 40 --workers 2 --merge
    python benchmarks/pes_paper.py --time-step
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import platform
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import scipy  # noqa: E402

from ppbo import benchmarks  # noqa: E402
from ppbo.benchmarks.methods import BayesOpt  # noqa: E402

EXPERIMENTS = ("gp_samples", "synthetic", "nnet")
METHODS = ("pes", "pes_nb", "es", "ei", "pes_nb_log")
#: Methods that only differ from PES when hyperparameters are inferred.
POINT_ESTIMATES = {"pes_nb": "mean", "pes_nb_log": "log_mean"}
SYNTHETIC = ("branin", "cosines", "hartmann6")

#: Seeds and budgets (evaluations, design included) per scale. The paper ran 1000
#: GP samples and 250 initialisations of the synthetic functions; "full" uses those
#: counts and budgets, "default" a handful of seeds that fits in about an hour on
#: two cores, "smoke" one seed and a few evaluations.
SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": {"gp_samples": 1, "synthetic": 1, "nnet": 1},
        "budgets": {
            "gp_sample": 6,
            "branin": 6,
            "cosines": 6,
            "hartmann6": 10,
            "nnet": 6,
        },
        "mcmc": (32, 32),
    },
    "default": {
        "seeds": {"gp_samples": 20, "synthetic": 5, "nnet": 5},
        "budgets": {
            "gp_sample": 30,
            "branin": 30,
            "cosines": 30,
            "hartmann6": 40,
            "nnet": 30,
        },
        "mcmc": (128, 128),
    },
    "full": {
        "seeds": {"gp_samples": 1000, "synthetic": 250, "nnet": 250},
        "budgets": {
            "gp_sample": 50,
            "branin": 50,
            "cosines": 50,
            "hartmann6": 100,
            "nnet": 50,
        },
        "mcmc": (256, 256),
    },
}

#: The GP-sample experiment's objective and the hyperparameters given to the model.
GP_SAMPLE = {"d": 2, "lengthscale": 0.1, "outputscale": 1.0, "kernel": "se"}
NOISE_VAR = 1e-3
#: Hyperparameter samples the acquisitions average over (the paper's code: 10).
ACQUISITION_SAMPLES = 16


def _gp_problem_name() -> str:
    options = ",".join(f"{k}={v}" for k, v in GP_SAMPLE.items())
    return f"gp_sample:{options}"


def _method(name: str, args: argparse.Namespace, fixed: bool, d: int) -> BayesOpt:
    """The BayesOpt behind a method name; ``fixed``: known GP hyperparameters."""
    if fixed:
        setting: dict[str, Any] = dict(
            inference="fixed",
            mean="zero",
            standardize=False,
            params={
                "lengthscale": np.full(d, GP_SAMPLE["lengthscale"]),
                "outputscale": GP_SAMPLE["outputscale"],
                "noise": NOISE_VAR,
            },
        )
    else:
        warmup, samples = args.mcmc_warmup, args.mcmc_samples
        setting = dict(
            inference="nuts",
            num_warmup=warmup,
            num_samples=samples,
            thinning=max(1, samples // args.hyper_samples),
        )
    setting.update(kernel=args.kernel, num_raw=args.num_raw)
    if not fixed and args.lengthscale_prior is not None:
        setting.update(lengthscale_prior=args.lengthscale_prior)
    if name == "es":
        return BayesOpt(
            "es",
            max_iterations=0,
            # known hyperparameters: one sample; ES draws no maximisers to average
            acquisition_samples=1 if fixed else args.es_samples,
            acquisition_options={
                "num_paths": args.es_paths,
                "num_representers": args.es_representers,
                "num_fantasies": args.es_fantasies,
            },
            **setting,
        )
    if name == "ei":  # deterministic: every kept sample, nothing to repeat
        return BayesOpt("ei", **setting)
    # PES draws one x* per sample: a one-sample posterior (known or point-estimated
    # hyperparameters) is repeated, so every PES variant averages over as many x*.
    return BayesOpt(
        "pes",
        point_estimate=POINT_ESTIMATES.get(name),
        acquisition_samples=args.hyper_samples,
        **setting,
    )


def _tasks(args: argparse.Namespace, scale: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per (experiment, problem, method, seed), expensive methods first."""
    names = set(benchmarks.names())
    plan: list[tuple[str, str, Any, int]] = []
    for experiment in args.experiments:
        if experiment == "gp_samples":
            plan.append((experiment, "gp_sample", _gp_problem_name(), NOISE_VAR))
        elif experiment == "synthetic":
            for problem in args.problems:
                plan.append((experiment, problem, problem, args.noise_var))
        elif "nnet" not in names:
            print(
                "skipping nnet: ppbo.benchmarks has no 'nnet' problem yet", flush=True
            )
        else:
            # A Problem, not a name: the runner keeps a Problem's own noise.
            plan.append((experiment, "nnet", benchmarks.get("nnet"), None))
    first = args.first_seed
    tasks = []
    for experiment, key, problem, noise_var in plan:
        num_seeds = args.seeds or scale["seeds"][experiment]
        budget = args.budget or scale["budgets"][key]
        fixed = experiment == "gp_samples"
        d = GP_SAMPLE["d"] if fixed else None
        if d is None:
            d = (problem if not isinstance(problem, str) else benchmarks.get(key)).dim
        for method in args.methods or METHODS:
            if fixed and method in POINT_ESTIMATES:
                continue  # with known hyperparameters PES-NB is PES
            if (
                method == "es"
                and key == "hartmann6"
                and not (args.full or args.methods)
            ):
                continue
            for seed in range(first, first + num_seeds):
                # a fresh method per run: no warm start from another run's fit
                bo = _method(method, args, fixed, d)
                settings = dataclasses.asdict(bo.config)
                bo = benchmarks.Method(suggest=bo.suggest, recommend=bo.recommend)
                tasks.append(
                    {
                        "experiment": experiment,
                        "args": (method, bo, problem, seed, budget, 3, noise_var),
                        "settings": settings,
                        "cost": budget * (4 if method == "es" else 1) * (1 + d / 2),
                    }
                )
    return sorted(tasks, key=lambda t: -t["cost"])


def _label(problem: Any) -> str:
    return problem.strip() if isinstance(problem, str) else problem.name


def _run_task(task: dict[str, Any]) -> dict[str, Any]:
    result = benchmarks.run_one(*task["args"])
    result["experiment"] = task["experiment"]
    result["settings"] = task["settings"]
    return result


def _config(args: argparse.Namespace, experiment: str, runs: list[dict]) -> dict:
    fixed = experiment == "gp_samples"
    return {
        "paper": "Hernández-Lobato, Hoffman and Ghahramani (2014), NeurIPS, §4-5",
        "experiment": experiment,
        "scale": args.scale,
        "methods": sorted({r["method"] for r in runs}),
        "problems": sorted({r["problem"] for r in runs}),
        "seeds": sorted({r["seed"] for r in runs}),
        "budgets": {
            p: sorted({r["budget"] for r in runs if r["problem"] == p})
            for p in sorted({r["problem"] for r in runs})
        },
        "n_initial": 3,
        "noise_var": NOISE_VAR if fixed else args.noise_var,
        "kernel": args.kernel,
        "lengthscale_prior": args.lengthscale_prior,
        "hyperparameters": (
            {"fixed": dict(GP_SAMPLE, noise=NOISE_VAR), "mean": "zero"}
            if fixed
            else {
                "inference": "NUTS, warm-started",
                "num_warmup": args.mcmc_warmup,
                "num_samples": args.mcmc_samples,
                "thinning": max(1, args.mcmc_samples // args.hyper_samples),
                "mean": "constant",
                "standardized_outputs": True,
            }
        ),
        "acquisition_samples": {
            "pes": args.hyper_samples,
            "ei": 1 if fixed else args.hyper_samples,
            "es": 1 if fixed else args.es_samples,
            "pes_nb": f"{args.hyper_samples} copies of the point estimate",
            "pes_nb_log": f"{args.hyper_samples} copies of the point estimate",
        },
        "point_estimates": {
            "pes_nb": "posterior mean of every site",
            "pes_nb_log": "geometric mean of lengthscale, outputscale and noise",
        },
        "per_run_settings": "each run's 'settings' holds its BayesOpt config",
        "es": {
            "num_paths": args.es_paths,
            "num_representers": args.es_representers,
            "num_fantasies": args.es_fantasies,
            "optimizer": "raw Sobol search only",
        },
        "num_raw": args.num_raw,
        "workers": args.workers,
        "platform": platform.platform(),
        "versions": {
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "jax": jax.__version__,
        },
    }


#: One colour per method in every panel (the paper's figures compare four lines).
COLORS = {
    "pes": "tab:red",
    "pes_nb": "tab:orange",
    "es": "tab:green",
    "ei": "tab:blue",
    "pes_nb_log": "tab:purple",
}
LABELS = {
    "pes": "PES",
    "pes_nb": "PES-NB",
    "es": "ES",
    "ei": "EI",
    "pes_nb_log": "PES-NB (log-mean)",
}


def plot(summary: dict, path: Path) -> None:
    """Log10 median immediate regret with bootstrap bands, one colour per method.

    Like :func:`ppbo.benchmarks.plot` (top row: recommendation; bottom row: best
    observed point), but a method keeps its colour where another is missing.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    problems = list(summary)
    fig = Figure(figsize=(3.8 * len(problems), 6.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(problems), squeeze=False, sharex="col")
    kinds = ("regret_recommendation", "regret_best_observed")
    titles = ("recommendation", "best observed")
    for j, problem in enumerate(problems):
        entries = summary[problem]
        for i, kind in enumerate(kinds):
            ax = axes[i, j]
            for method in sorted(entries, key=lambda m: METHODS.index(m)):
                entry, band = entries[method], entries[method][f"log10_{kind}"]
                steps = entry["evaluations"]
                color = COLORS.get(method)
                label = f"{LABELS.get(method, method)} ({entry['num_runs']})"
                ax.plot(steps, band["median"], color=color, label=label)
                ax.fill_between(
                    steps, band["low"], band["high"], color=color, alpha=0.15
                )
                ax.axvline(entry["n_initial"], color="0.6", linestyle=":", lw=1)
            ax.set_title(f"{problem.split(':')[0]}: {titles[i]}", fontsize=9)
            ax.set_ylabel("log10 immediate regret")
            if i == 1:
                ax.set_xlabel("evaluations")
        axes[0, j].legend(fontsize=7, title="method (seeds)", title_fontsize=7)
    fig.savefig(Path(path), dpi=110)


def _write(out: Path, experiment: str, config: dict, runs: list, final: bool) -> None:
    result: dict[str, Any] = {"config": config, "complete": final, "runs": runs}
    if final:
        result["summary"] = benchmarks.summarize(runs)
    stem = out / f"pes_paper_{experiment}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    if final:
        plot(result["summary"], stem.with_suffix(".png"))


def replot(args: argparse.Namespace) -> None:
    """Re-summarise and redraw the experiments' JSON files (complete or not)."""
    for experiment in args.experiments:
        path = Path(args.out) / f"pes_paper_{experiment}.json"
        if not path.exists():
            continue
        result = json.loads(path.read_text())
        result["summary"] = benchmarks.summarize(result["runs"])
        path.write_text(json.dumps(result, indent=1))
        plot(result["summary"], path.with_suffix(".png"))
        print(f"redrew {path.with_suffix('.png')} from {len(result['runs'])} runs")


def _report(run: dict) -> None:
    seconds = sum(run["suggest_seconds"]) + sum(run["recommend_seconds"])
    print(
        json.dumps(
            {
                "experiment": run["experiment"],
                "method": run["method"],
                "problem": run["instance"],
                "seed": run["seed"],
                "regret_recommendation": run["regret_recommendation"][-1],
                "regret_best_observed": run["regret_best_observed"][-1],
                "seconds": round(seconds, 1),
            }
        ),
        flush=True,
    )


def sweep(args: argparse.Namespace) -> dict[str, list[dict]]:
    """Run every task, writing each experiment's JSON as its runs arrive."""
    scale = SCALES[args.scale]
    tasks = _tasks(args, scale)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    expected: dict[str, int] = {}
    for task in tasks:
        expected[task["experiment"]] = expected.get(task["experiment"], 0) + 1
    print(f"{len(tasks)} runs: {expected}", flush=True)
    runs: dict[str, list[dict]] = {experiment: [] for experiment in expected}
    if args.merge:
        # keep earlier runs of other (method, problem, seed) triples
        new = {(t["args"][0], _label(t["args"][2]), t["args"][3]) for t in tasks}
        for experiment in expected:
            path = out / f"pes_paper_{experiment}.json"
            if path.exists():
                old = json.loads(path.read_text())["runs"]
                kept = [
                    r for r in old if (r["method"], r["problem"], r["seed"]) not in new
                ]
                runs[experiment] = kept
                expected[experiment] += len(kept)
                print(f"{experiment}: kept {len(kept)} earlier runs", flush=True)

    def collect(results: Iterable[dict]) -> None:
        for run in results:
            experiment = run["experiment"]
            runs[experiment].append(run)
            _report(run)
            done = len(runs[experiment]) == expected[experiment]
            config = _config(args, experiment, runs[experiment])
            _write(out, experiment, config, runs[experiment], final=done)

    start = time.perf_counter()
    if args.workers > 1:
        # spawn, not fork: JAX is multithreaded and must not be forked.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(args.workers, context) as pool:
            futures = [pool.submit(_run_task, task) for task in tasks]
            collect(f.result() for f in concurrent.futures.as_completed(futures))
    else:
        collect(map(_run_task, tasks))
    print(f"wall time {time.perf_counter() - start:.0f} s", flush=True)
    return runs


def time_step(args: argparse.Namespace) -> dict[str, Any]:
    """Time one compiled PES step at n = 50, d = 6 with 16 hyperparameter samples."""
    import ppbo
    from ppbo.acquisition import pes
    from ppbo.campaign import standardize
    from ppbo.models import gp

    problem = benchmarks.get("hartmann6")
    rng = np.random.default_rng(0)
    X = rng.random((50, problem.dim))
    y = standardize(problem(problem.from_unit(X)), maximize=False)
    data = ppbo.Dataset(X, y)
    inference = ppbo.NUTS(num_warmup=256, num_samples=256, thinning=16)
    surrogate = gp.surrogate(kernel=args.kernel)
    posterior = ppbo.fit(surrogate, data, inference, jax.random.key(0))
    rows = []
    for step in range(args.repeats + 1):
        start = time.perf_counter()
        refit = ppbo.fit(
            surrogate, data, inference, jax.random.key(step + 1), init=posterior
        )
        jax.block_until_ready(refit.samples)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        ppbo.optimize_acquisition(pes, refit.thin(16), jax.random.key(100 + step))
        rows.append(
            {"step": step, "fit_s": fit_s, "pes_s": time.perf_counter() - start}
        )
        print(json.dumps(rows[-1]), flush=True)
    warm = rows[1:]
    result = {
        "benchmark": "one PES step, n = 50, d = 6 (Hartmann-6), 16 samples",
        "kernel": args.kernel,
        "nuts": {"num_warmup": 256, "num_samples": 256, "thinning": 16},
        "optimizer": "optimize_acquisition defaults",
        "first_step_compiling": rows[0],
        "median_pes_s": float(np.median([r["pes_s"] for r in warm])),
        "median_refit_s": float(np.median([r["fit_s"] for r in warm])),
        "rows": rows,
        "platform": platform.platform(),
        "jax": jax.__version__,
    }
    path = Path(args.out) / "pes_paper_step.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return result


def main(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--experiments", nargs="+", default=list(EXPERIMENTS), choices=EXPERIMENTS
    )
    parser.add_argument(
        "--problems",
        nargs="+",
        default=list(SYNTHETIC),
        help="problems of the synthetic experiment (ppbo.benchmarks names)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        help="methods to run (default: all; ES not on Hartmann-6 below --full)",
    )
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--full", action="store_true", help="the paper's scale")
    scale.add_argument("--smoke", action="store_true", help="a few-minute check")
    parser.add_argument("--seeds", type=int, help="seeds per experiment")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--budget", type=int, help="evaluations per run for every problem"
    )
    parser.add_argument("--noise-var", type=float, default=NOISE_VAR)
    parser.add_argument("--kernel", default="rbf", help="GP kernel (rbf = SE)")
    parser.add_argument(
        "--lengthscale-prior",
        help="a name of ppbo.models.gp.LENGTHSCALE_PRIORS (default: the GP's)",
    )
    parser.add_argument("--mcmc-warmup", type=int)
    parser.add_argument("--mcmc-samples", type=int)
    parser.add_argument(
        "--hyper-samples",
        type=int,
        default=ACQUISITION_SAMPLES,
        help="evenly spaced NUTS samples kept (and averaged over by PES and EI)",
    )
    parser.add_argument("--es-samples", type=int, help="hyperparameter samples for ES")
    parser.add_argument("--es-paths", type=int, help="ES sample paths")
    parser.add_argument("--es-representers", type=int, default=50)
    parser.add_argument(
        "--es-fantasies", type=int, help="ES Gauss-Hermite nodes over y"
    )
    parser.add_argument("--num-raw", type=int, default=512, help="raw candidates")
    parser.add_argument("--workers", type=int, default=2, help="parallel processes")
    parser.add_argument(
        "--no-compilation-cache",
        action="store_true",
        help="do not use ppbo's persistent JAX compilation cache",
    )
    parser.add_argument(
        "--time-step", action="store_true", help="time one PES step and exit"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed PES steps")
    parser.add_argument(
        "--replot", action="store_true", help="redraw the PNGs from the JSON files"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the runs already in the JSON files that this sweep does not redo",
    )
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    args.scale = "full" if args.full else "smoke" if args.smoke else "default"
    warmup, samples = SCALES[args.scale]["mcmc"]
    args.mcmc_warmup = args.mcmc_warmup or warmup
    args.mcmc_samples = args.mcmc_samples or samples
    args.es_samples = args.es_samples or (args.hyper_samples if args.full else 2)
    args.es_paths = args.es_paths or (1000 if args.full else 500)
    args.es_fantasies = args.es_fantasies or (16 if args.full else 8)
    if not args.no_compilation_cache:
        from ppbo.cli import enable_compilation_cache

        enable_compilation_cache()
    if args.time_step:
        return time_step(args)
    if args.replot:
        return replot(args)
    runs = sweep(args)
    for experiment, members in runs.items():
        summary = benchmarks.summarize(members)
        for problem, by_method in summary.items():
            for method, entry in by_method.items():
                final = entry["final"]
                print(
                    f"{experiment:10s} {problem:28s} {method:7s} median final "
                    f"regret: recommendation {final['regret_recommendation']:.3g}, "
                    f"best observed {final['regret_best_observed']:.3g} "
                    f"({entry['num_runs']} runs)"
                )
    return runs


if __name__ == "__main__":
    main()
