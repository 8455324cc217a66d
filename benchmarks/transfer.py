"""Transfer-learning benchmark: every transfer surrogate through the user's campaign.

Each run is a :class:`ppbo.Optimizer` campaign with ``sources=[...]`` (the code a
user runs) on a task family of :mod:`ppbo.benchmarks.transfer_problems` with
known relatedness: translated and scaled Branin and Hartmann-3, the shifted 1-D
family ``x sin(x + π + s) + x/10``, the Forrester high/low-fidelity pair and a
negative-transfer case with unrelated sources. K = 5 sources of 20-50 points;
the target gets a 3-point design and 20 BO evaluations (noise-free). A run
records the best-observed regret after every target evaluation and the seconds
per BO step (the campaign's own ``step_seconds``).

Methods (``--methods``; a method whose surrogate is not in
:data:`ppbo.campaign.registry.SURROGATES` is listed as "not available"): the
no-transfer GP (``gp``, no sources), the ICM multi-task GP (``multitask_gp``),
``miso_gp``, ``nn_task_gp``, ``bhgp``, Env-GP with the posterior-mode source noise
(``env_gp_mode``; ``env_gp_mode_joint`` fitted to every row instead of the
target's) and fully Bayesian by NUTS (``env_gp_bayes``, the cut posterior:
the kernel from the target's rows, the source noise from the inverse-gamma
update's full conditional; ``env_gp_bayes_joint`` samples the source noise as a
site of the joint density of all rows), ``diff_gp`` (one source per ask, chosen
by the bandit: the campaign's default for Diff-GP with several sources;
``diff_gp_all`` and ``diff_gp_dense`` fit every source at every ask, the second
with the corrections' covariance), bandit source selection with Env-GP
(``bandit_env_gp``), ``metabo_gp`` and ``rgpe``; ``gp_warm`` and
``multitask_gp_warm`` are the GP and the ICM GP whose 3-point design is the warm
start of Feurer et al. (2015)
(``initial_design="sources"``: the best points of the sources nearest the target
by meta-features) instead of the LHS; ``gp_noise_low`` and ``diff_gp_noise_low``
are the GP and Diff-GP with the target noise prior LogNormal(log 1e-4, 2.5) that
MISO, Env-GP and the nearest-neighbour task kernel have by default. Every method
runs with the campaign defaults (MAP, log-EI) unless its entry says otherwise.

Outputs in ``benchmarks/results/``: ``{name}.jsonl`` (one line per run, appended
as runs finish and skipped when present, so a sweep resumes), ``{name}.json``
(medians and 90% bootstrap bands of the regret curves), ``{name}.md`` (ONE table
ranking the methods by median regret after 10 and 20 BO evaluations) and
``{name}.png`` (regret curves).

Usage: ``python benchmarks/transfer.py [--seeds 20] [--methods gp multitask_gp]
[--families sin1d branin] [--name transfer]``; ``--table`` only summarises.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import ppbo  # noqa: E402
from ppbo.benchmarks.runner import bootstrap_median  # noqa: E402
from ppbo.benchmarks.transfer_problems import FAMILIES, make  # noqa: E402
from ppbo.campaign import registry  # noqa: E402
from ppbo.models.sources import TARGET_NOISE_PRIOR  # noqa: E402

RESULTS = Path(__file__).parent / "results"
N_INITIAL, BUDGET = 3, 20
CHECKPOINTS = (10, 20)  # BO evaluations after the design
ENV_MODE = {"name": "env_gp", "variant": "mode"}

#: Method -> Optimizer options; ``"sources": False`` runs without sources.
METHODS: dict[str, dict] = {
    "gp": {"surrogate": "gp", "sources": False},
    "multitask_gp": {"surrogate": "multitask_gp"},
    "miso_gp": {"surrogate": "miso_gp"},
    # MISO fitted to the joint density of all rows (its default is p(y_T | y_S))
    "miso_gp_joint": {"surrogate": {"name": "miso_gp", "likelihood": "joint"}},
    "nn_task_gp": {"surrogate": "nn_task_gp"},
    "bhgp": {"surrogate": "bhgp"},
    "env_gp_mode": {"surrogate": ENV_MODE},
    # Env-GP fitted to all rows (its default before the target-rows fit)
    "env_gp_mode_joint": {"surrogate": ENV_MODE | {"likelihood": "joint"}},
    # the cut posterior (the default): the kernel from the target rows, the source
    # noise from the inverse-gamma update's full conditional
    "env_gp_bayes": {
        "surrogate": {"name": "env_gp", "variant": "bayes"},
        "inference": {"name": "NUTS", "options": {"num_warmup": 64, "num_samples": 64}},
    },
    # the source noise a site of the joint density of all rows (the default before)
    "env_gp_bayes_joint": {
        "surrogate": {"name": "env_gp", "variant": "bayes", "likelihood": "joint"},
        "inference": {"name": "NUTS", "options": {"num_warmup": 64, "num_samples": 64}},
    },
    # one source per ask, chosen by the bandit (the campaign's default for
    # Diff-GP, a single-source model, given several sources)
    "diff_gp": {"surrogate": "diff_gp"},
    # every source in every fit (the default before)
    "diff_gp_all": {"surrogate": "diff_gp", "source_selection": "all"},
    # every source, the corrected source rows' errors with the difference GP's
    # posterior covariance over each source's rows instead of its diagonal
    "diff_gp_dense": {
        "surrogate": {"name": "diff_gp", "corrections": "dense"},
        "source_selection": "all",
    },
    "bandit_env_gp": {"surrogate": ENV_MODE, "source_selection": "bandit"},
    "metabo_gp": {"surrogate": "metabo_gp"},
    "rgpe": {"surrogate": "rgpe"},
    # the warm-start design of Feurer et al. (2015): the sources' best points,
    # nearest source (by meta-features) first, instead of the 3-point LHS
    "gp_warm": {"surrogate": "gp", "initial_design": "sources"},
    "multitask_gp_warm": {"surrogate": "multitask_gp", "initial_design": "sources"},
    # the same two with augmented EI (Huang et al. 2006) instead of log-EI
    "gp_warm_aei": {
        "surrogate": "gp",
        "initial_design": "sources",
        "acquisition": "log_aei",
    },
    "gp_aei": {"surrogate": "gp", "sources": False, "acquisition": "log_aei"},
    # prior ablations (PRIOR_VARIANTS): the model of the named method with some of
    # its default priors replaced
    "gp_noise_low": {"surrogate": "gp", "sources": False, "priors": "noise_low"},
    # the warm start with the GP's noise prior for deterministic objectives
    # (``noise_prior="low"``, the same prior as ``noise_low`` below)
    "gp_warm_noise_low": {
        "surrogate": {"name": "gp", "noise_prior": "low"},
        "initial_design": "sources",
    },
    "diff_gp_noise_low": {"surrogate": "diff_gp", "priors": "noise_low"},
}
# the GP and the warm start with the exploration rule's improvement cut at 1e-2
# output standard deviations instead of the default 1e-3 (benchmarks/README.md,
# "The exploration rule's cut")
METHODS.update(
    {
        f"{name}_explore_cut": {
            **METHODS[name],
            "acquisition_options": {"explore_below": 1e-2},
        }
        for name in ("gp", "gp_warm")
    }
)

#: Prior overrides of the ablation methods: ``noise_low`` is the target noise prior
#: of MISO's, Env-GP's and the nearest-neighbour task kernel's defaults
#: (:data:`ppbo.models.sources.TARGET_NOISE_PRIOR`) instead of the GP's
#: LogNormal(-4, 1), so that ``gp_noise_low`` is the no-transfer GP with the prior
#: those transfer models have.
PRIOR_VARIANTS = {"noise_low": {"noise": TARGET_NOISE_PRIOR}}


def available(method: str) -> bool:
    """Whether the method's surrogate is in the registry."""
    surrogate = METHODS[method]["surrogate"]
    name = surrogate["name"] if isinstance(surrogate, dict) else surrogate
    return name in registry.SURROGATES


def run_one(family: str, method: str, seed: int) -> dict:
    """One campaign: design + BO evaluations on a family's target."""
    task = make(family, seed)
    options = dict(METHODS[method])
    use_sources = options.pop("sources", True)
    if "priors" in options:
        options["surrogate"] = _with_priors(
            task, options["surrogate"], options.pop("priors"), use_sources
        )
    names = [f"x{i}" for i in range(task.dim)]
    bounds = zip(names, task.bounds, strict=True)
    space = ppbo.Space({n: ppbo.Real(float(lo), float(hi)) for n, (lo, hi) in bounds})
    if use_sources:
        options["sources"] = [
            ppbo.Source(s.name, s.X, s.y, meta_features=s.meta_features)
            for s in task.sources
        ]
        options["meta_features"] = task.meta_features
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = ppbo.Optimizer(space, n_initial=N_INITIAL, seed=seed, **options)
        values = []
        for _ in range(N_INITIAL + BUDGET):
            trial = opt.ask()
            x = np.array([[trial.params[n] for n in names]])
            value = float(task.objective(x)[0])
            opt.tell(trial, value)
            values.append(value)
    trials = opt.get_trials()
    steps = [t.extra["step_seconds"] for t in trials if t.origin == "model"]
    regret = np.maximum(task.regret(np.minimum.accumulate(values)), 0.0)
    return {
        "family": family,
        "method": method,
        "seed": seed,
        "n_initial": N_INITIAL,
        "budget": BUDGET,
        "regret": regret.tolist(),
        "seconds_per_step": float(np.mean(steps)) if steps else None,
        "wall_seconds": time.perf_counter() - start,
        "arms": [t.extra.get("source_arm") for t in trials if t.origin == "model"],
    }


def _with_priors(task, spec, variant: str, use_sources: bool):
    """The registry model of ``spec`` built directly with the variant's priors
    (models whose only campaign-filled option is ``num_sources``)."""
    import importlib

    spec = {"name": spec} if isinstance(spec, str) else dict(spec)
    module = importlib.import_module(f"ppbo.models.{spec.pop('name')}")
    if use_sources:
        spec["num_sources"] = len(task.sources)
    return module.surrogate(**spec, priors=PRIOR_VARIANTS[variant])


def _load(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(runs: list[dict], floor: float = 1e-12) -> dict:
    """Medians and 90% bootstrap bands of regret per family and method."""
    groups: dict[str, dict[str, list[dict]]] = {}
    for run in runs:
        groups.setdefault(run["family"], {}).setdefault(run["method"], []).append(run)
    summary: dict = {}
    for family, by_method in groups.items():
        summary[family] = {}
        for method, members in by_method.items():
            regrets = np.array([r["regret"] for r in members])
            median, low, high = bootstrap_median(np.maximum(regrets, floor))
            steps = [r["seconds_per_step"] for r in members if r["seconds_per_step"]]
            summary[family][method] = {
                "num_runs": len(members),
                "median": median.tolist(),
                "low": low.tolist(),
                "high": high.tolist(),
                "seconds_per_step": float(np.median(steps)) if steps else None,
                "at": {
                    str(c): {
                        "median": float(median[N_INITIAL + c - 1]),
                        "low": float(low[N_INITIAL + c - 1]),
                        "high": float(high[N_INITIAL + c - 1]),
                    }
                    for c in CHECKPOINTS
                },
            }
    return summary


def table(summary: dict, methods: list[str]) -> str:
    """ONE markdown table ranking the methods (mean rank over families and
    both checkpoints, by median regret)."""
    families = [f for f in FAMILIES if f in summary]
    ranked = [m for m in methods if any(m in summary[f] for f in families)]
    ranks: dict[str, list[float]] = {m: [] for m in ranked}
    for family in families:
        for c in CHECKPOINTS:
            present = [m for m in ranked if m in summary[family]]
            order = sorted(
                present, key=lambda m: summary[family][m]["at"][str(c)]["median"]
            )
            for position, m in enumerate(order, start=1):
                ranks[m].append(position)
    ranked.sort(key=lambda m: np.mean(ranks[m]) if ranks[m] else np.inf)
    header = ["rank", "method", "mean rank"]
    header += [f"{f} @{c}" for f in families for c in CHECKPOINTS]
    header += ["s/step", "runs"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for i, m in enumerate(ranked, start=1):
        cells = [str(i), m, f"{np.mean(ranks[m]):.2f}"]
        seconds, runs = [], []
        for f in families:
            entry = summary[f].get(m)
            for c in CHECKPOINTS:
                if entry is None:
                    cells.append("–")
                    continue
                at = entry["at"][str(c)]
                cells.append(f"{at['median']:.3g} [{at['low']:.3g}, {at['high']:.3g}]")
            if entry is not None:
                runs.append(entry["num_runs"])
                if entry["seconds_per_step"] is not None:
                    seconds.append(entry["seconds_per_step"])
        cells.append(f"{np.median(seconds):.2f}" if seconds else "–")
        cells.append(str(min(runs)) if runs else "0")
        lines.append("| " + " | ".join(cells) + " |")
    missing = [m for m in methods if m not in ranked]
    text = "\n".join(lines)
    text += (
        f"\n\nMedian best-observed regret after {CHECKPOINTS[0]} and {CHECKPOINTS[1]} "
        f"BO evaluations (after a {N_INITIAL}-point design), 90% bootstrap band in "
        "brackets; s/step: median seconds per BO step (fit + acquisition)."
    )
    if missing:
        text += "\n\nNot available (no registry entry or no runs): " + ", ".join(
            missing
        )
    return text + "\n"


def plot(summary: dict, path: Path) -> None:
    """Median regret curves with bootstrap bands, one panel per family."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    families = [f for f in FAMILIES if f in summary]
    figure = Figure(figsize=(4 * len(families), 3.4))
    FigureCanvasAgg(figure)
    for i, family in enumerate(families):
        ax = figure.add_subplot(1, len(families), i + 1)
        for method, entry in summary[family].items():
            x = np.arange(1, len(entry["median"]) + 1)
            (line,) = ax.plot(x, entry["median"], label=method)
            ax.fill_between(
                x, entry["low"], entry["high"], alpha=0.2, color=line.get_color()
            )
        ax.axvline(N_INITIAL + 0.5, color="grey", linestyle=":")
        ax.set_yscale("log")
        ax.set_title(family)
        ax.set_xlabel("target evaluation")
        if i == 0:
            ax.set_ylabel("best-observed regret")
            ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="run seeds first-seed .. seeds-1"
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--name", default="transfer")
    parser.add_argument("--table", action="store_true", help="only summarise")
    args = parser.parse_args(argv)
    from ppbo.cli import enable_compilation_cache

    enable_compilation_cache()  # runs recompile from disk after clear_caches
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {list(METHODS)}")
    RESULTS.mkdir(exist_ok=True)
    jsonl = RESULTS / f"{args.name}.jsonl"
    done = {(r["family"], r["method"], r["seed"]) for r in _load(jsonl)}
    runnable = [m for m in args.methods if available(m)]
    for m in args.methods:
        if m not in runnable:
            print(f"{m}: not available (no registry entry)", flush=True)
    if not args.table:
        for seed in range(args.first_seed, args.seeds):
            for family in args.families:
                for method in runnable:
                    if (family, method, seed) in done:
                        continue
                    result = run_one(family, method, seed)
                    # each compiled executable holds a few memory maps until the
                    # caches drop it; a long sweep otherwise exhausts the process's
                    # map count and XLA fails with "Cannot allocate memory"
                    jax.clear_caches()
                    with jsonl.open("a") as handle:
                        handle.write(json.dumps(result) + "\n")
                    final = result["regret"][-1]
                    print(
                        f"{family} {method} seed {seed}: regret {final:.3g}, "
                        f"{result['seconds_per_step']:.2f} s/step",
                        flush=True,
                    )
    runs = [r for r in _load(jsonl) if r["method"] in args.methods]
    if not runs:
        print("no runs yet")
        return 0
    summary = summarize(runs)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(summary, indent=1))
    text = table(summary, args.methods)
    (RESULTS / f"{args.name}.md").write_text(text)
    plot(summary, RESULTS / f"{args.name}.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
