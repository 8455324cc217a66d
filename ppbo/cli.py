"""The ``ppbo`` command.

- ``ppbo run PROBLEM`` runs a campaign on a built-in benchmark (see
  ``ppbo.benchmarks.names()``) with a progress bar, then prints a summary and
  writes the convergence plot (PNG) and the final posterior (netCDF) next to the
  database;
- ``ppbo resume NAME`` continues a stopped ``run`` to its budget;
- ``ppbo show [NAME]`` lists the campaigns, or one campaign's trials;
- ``ppbo create NAME --space JSON``, ``ppbo ask NAME`` and ``ppbo tell NAME``
  drive a campaign on an external objective with JSON in and out (for shell
  scripts and lab processes);
- ``ppbo create NAME --space JSON --preference`` makes a preference campaign
  (``ask`` prints a pair, ``tell --pair ID --winner a|b|tie|skip``), with
  ``--drift-strategy restart|sliding_window|weighted_penalty`` and its option
  ``--horizon H``, ``--window W`` or ``--decay G`` for a drifting objective;
- ``ppbo demo`` fits the fully Bayesian GP to noisy Forrester observations with
  NUTS and slice sampling and plots the predictive distribution.

Every command takes ``--storage`` (a SQLite file, default
``ppbo-output/ppbo.db``). Compiled JAX code is cached in a private per-user
folder (``$PPBO_CACHE_DIR``, else ``$XDG_CACHE_HOME/ppbo/jax`` or
``~/.cache/ppbo/jax``, mode 0700), so a second run starts fast.

Exit status: 0 on success, 2 for bad input (the message names the field and the
value).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["main", "enable_compilation_cache", "cache_dir"]

DEFAULT_STORAGE = os.path.join("ppbo-output", "ppbo.db")


class UsageError(Exception):
    """Bad input from the command line (exit status 2)."""


def cache_dir() -> Path:
    """The private per-user folder for JAX's persistent compilation cache.

    Example:
        >>> cache_dir().name
        'jax'
    """
    override = os.environ.get("PPBO_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "ppbo" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path:
    """Turn on JAX's persistent compilation cache in a private folder.

    The folder is created with mode 0700 (only its owner may read the cached
    executables). Every compilation is cached, so a second ``ppbo run`` skips the
    tens of seconds the first spends compiling.

    Example:
        >>> # enable_compilation_cache()  # what the ppbo command does at start
    """
    import jax

    folder = Path(path) if path is not None else cache_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def _forrester(x):
    import numpy as np

    # Forrester, Sobester and Keane (2008), "Engineering design via surrogate
    # modelling", p. 83.
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def _demo(args: argparse.Namespace) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from ppbo._compat import import_arviz

    az = import_arviz()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import ppbo
    from ppbo.models import gp

    rng = np.random.default_rng(args.seed)
    X = np.sort(rng.random(args.n))[:, None]
    y = _forrester(X[:, 0]) + 0.3 * rng.standard_normal(args.n)
    mean, sd = y.mean(), y.std()
    data = ppbo.Dataset(X, (y - mean) / sd)
    surrogate = gp.surrogate(kernel="matern52", mean="constant")
    grid = np.linspace(0.0, 1.0, 200)[:, None]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    methods = {
        "NUTS": ppbo.NUTS(num_warmup=args.samples, num_samples=args.samples),
        "Slice": ppbo.Slice(num_warmup=args.samples, num_samples=args.samples),
    }
    for ax, (label, inference) in zip(axes, methods.items(), strict=True):
        start = time.perf_counter()
        posterior = ppbo.fit(surrogate, data, inference, jax.random.key(args.seed))
        seconds = time.perf_counter() - start
        print(f"\n== {label}: {posterior.num_samples} samples in {seconds:.1f} s")
        summary = az.summary(posterior.to_arviz(), kind="stats")
        print(summary.to_string() if hasattr(summary, "to_string") else summary)
        report = posterior.diagnostics(warn=False)
        for message in report.warnings or ("no diagnostic warnings",):
            print(f"   {message}")
        mu, var = posterior.predict_marginal(grid)
        mu, band = mean + sd * np.asarray(mu), 2 * sd * np.sqrt(np.asarray(var))
        ax.plot(grid[:, 0], _forrester(grid[:, 0]), "k--", lw=1, label="truth")
        ax.plot(grid[:, 0], mu, label=f"{label} mean")
        ax.fill_between(grid[:, 0], mu - band, mu + band, alpha=0.3, label="±2 sd")
        ax.plot(X[:, 0], y, "k.", label="data")
        ax.set_title(f"fully Bayesian GP, {label}")
        ax.set_xlabel("x")
    axes[0].legend(loc="upper left")
    path = out / "demo_predictive.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")
    return 0


# -- helpers --------------------------------------------------------------------------


def _setup() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    enable_compilation_cache()


def _regret(problem, value: float | None) -> float | None:
    if value is None or problem.optimum_value is None:
        return None
    if problem.direction == "minimize":
        return float(value - problem.optimum_value)
    return float(problem.optimum_value - value)


def _point(problem, params: dict) -> Any:
    import numpy as np

    return np.array([params[name] for name, _, _ in problem.space], dtype=np.float64)


def _format(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _build_problem(spec: dict):
    from ppbo.benchmarks import get

    return get(spec["problem"], noise_var=spec["noise_var"], **spec["options"])


def _inference(name: str, samples: int | None):
    from ppbo.campaign import registry

    try:
        return registry.make_inference(name, samples)
    except ValueError:
        names = [k for k, entry in registry.INFERENCES.items() if entry.by_name]
        raise UsageError(
            f"--inference must be one of {', '.join(names)}, got {name!r}"
        ) from None


def _default_acquisition(model: str) -> str:
    from ppbo.acquisition import default_acquisition
    from ppbo.campaign import registry

    try:
        surrogate, _ = registry.resolve_surrogate(model)
    except ValueError as error:
        raise UsageError(f"--model: {error}") from None
    return default_acquisition(surrogate)


def _free_name(storage, base: str) -> str:
    name, k = base, 1
    while storage.get_campaign(name) is not None:
        k += 1
        name = f"{base}-{k}"
    return name


def _campaign_loop(opt, problem, spec: dict, budget: int, seed: int, quiet: bool):
    """Evaluate until ``budget`` trials are finished, with a progress bar."""
    import numpy as np
    from tqdm.auto import tqdm

    from ppbo.campaign.run import run
    from ppbo.storage import TrialState

    finished = len(opt.get_trials(TrialState.FINISHED))
    bar = tqdm(
        total=budget,
        initial=finished,
        desc=opt.name,
        unit="eval",
        disable=quiet,
        dynamic_ncols=True,
    )
    last = [time.perf_counter()]  # when the previous evaluation was reported

    def objective(trial):
        rng = np.random.default_rng([seed, trial.number])
        return float(problem(_point(problem, trial.params), rng))

    def progress(opt, trial):
        seconds = time.perf_counter() - last[0]  # ask and evaluation
        best = opt.best_trial
        regret = None
        if best is not None and problem.optimum_value is not None:
            regret = _regret(problem, problem.noise_free(_point(problem, best.params)))
        bar.set_postfix(
            value=_format(trial.value),
            best=_format(None if best is None else best.value),
            regret=_format(regret),
            s_per_step=f"{seconds:.2f}",
            mcmc_warnings=len(trial.extra.get("diagnostics", ())),
            refresh=False,
        )
        bar.update(1)
        last[0] = time.perf_counter()

    run(opt, objective, budget, rerun_running=True, callback=progress)
    bar.close()


def _convergence_plot(opt, problem, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    trials = opt.get_trials()
    sign = 1.0 if problem.direction == "minimize" else -1.0
    best, regrets, numbers = math.inf, [], []
    for t in trials:
        if t.state != "COMPLETE":
            continue
        true = float(problem.noise_free(_point(problem, t.params)))
        best = min(best, sign * true)
        numbers.append(t.number + 1)
        regrets.append(sign * best)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if problem.optimum_value is not None:
        gap = np.maximum(np.abs(np.array(regrets) - problem.optimum_value), 1e-12)
        ax.semilogy(numbers, gap, marker=".")
        ax.set_ylabel("immediate regret of the best point")
    else:
        ax.plot(numbers, regrets, marker=".")
        ax.set_ylabel("best value (noise-free)")
    ax.set_xlabel("evaluations")
    ax.set_title(f"{opt.name}: {problem.name}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _finish_run(opt, problem, storage_path: str, started: float) -> None:
    out = Path(storage_path).resolve().parent
    best = opt.best_trial
    print(
        f"\ncampaign {opt.name!r}: {len(opt.get_trials())} trials in "
        f"{time.perf_counter() - started:.1f} s"
    )
    counts: dict[str, int] = {}
    for t in opt.get_trials():
        counts[t.state] = counts.get(t.state, 0) + 1
    print("  states: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if best is not None:
        print(f"  best value {best.value:.6g} at {best.params} (trial {best.number})")
        regret = _regret(problem, problem.noise_free(_point(problem, best.params)))
        if regret is not None:
            print(f"  regret of the best point {regret:.3g}")
    try:
        posterior = opt.fit()
        recommended = opt.recommend()
    except ValueError as error:
        print(f"  no model: {error}")
        return
    true = problem.noise_free(_point(problem, recommended.params))
    line = f"  recommended {recommended.params}: predicted {recommended.mean:.6g}"
    regret = _regret(problem, true)
    if regret is not None:
        line += f", regret {regret:.3g}"
    print(line)
    report = posterior.diagnostics(warn=False)
    for message in report.warnings:
        print(f"  MCMC: {message}")
    plot = out / f"{opt.name}-convergence.png"
    _convergence_plot(opt, problem, plot)
    netcdf = out / f"{opt.name}-posterior.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior.to_arviz().to_netcdf(str(netcdf), engine="h5netcdf")
    print(f"  wrote {plot}\n  wrote {netcdf}\n  database {storage_path}")


# -- commands -------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    import ppbo
    from ppbo.benchmarks import names, problem_space
    from ppbo.storage import open_storage

    if args.problem not in names():
        raise UsageError(f"PROBLEM must be one of {names()}, got {args.problem!r}")
    if args.budget < 1:
        raise UsageError(f"--budget must be >= 1, got {args.budget}")
    if args.noise_var < 0:
        raise UsageError(f"--noise-var must be >= 0, got {args.noise_var}")
    _setup()
    spec = {"problem": args.problem, "noise_var": args.noise_var, "options": {}}
    problem = _build_problem(spec)
    storage = open_storage(args.storage)
    if args.name is not None and storage.get_campaign(args.name) is not None:
        raise UsageError(
            f"--name {args.name!r} already exists in {args.storage}; continue it "
            f"with: ppbo resume {args.name} --storage {args.storage}"
        )
    acquisition = args.acquisition or _default_acquisition(args.model)
    name = args.name or _free_name(
        storage, f"{args.problem}-{acquisition}-seed{args.seed}"
    )
    try:
        opt = ppbo.Optimizer(
            problem_space(problem),
            surrogate=args.model,
            inference=_inference(args.inference, args.samples),
            acquisition=acquisition,
            direction=problem.direction,
            n_initial=args.n_initial,
            seed=args.seed,
            storage=storage,
            name=name,
            metadata={"cli": spec | {"budget": args.budget}},
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    started = time.perf_counter()
    _campaign_loop(opt, problem, spec, args.budget, args.seed, args.quiet)
    _finish_run(opt, problem, args.storage, started)
    return 0


def _load(args: argparse.Namespace):
    import ppbo

    _setup()
    if not Path(args.storage).exists():
        raise UsageError(f"--storage {args.storage!r} does not exist")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ppbo.CampaignWarning)
        try:
            opt = ppbo.Optimizer.load(args.storage, args.name)
        except ValueError as error:
            raise UsageError(str(error)) from None
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return opt


def _resume(args: argparse.Namespace) -> int:
    opt = _load(args)
    spec = opt.config.get("metadata", {}).get("cli")
    if spec is None:
        raise UsageError(
            f"campaign {args.name!r} was not started by 'ppbo run'; drive it with "
            "'ppbo ask' / 'ppbo tell' or ppbo.Optimizer"
        )
    budget = args.budget if args.budget is not None else spec["budget"]
    started = time.perf_counter()
    _campaign_loop(
        opt, _build_problem(spec), spec, budget, opt.config["seed"], args.quiet
    )
    _finish_run(opt, _build_problem(spec), args.storage, started)
    return 0


def _show(args: argparse.Namespace) -> int:
    import pandas as pd

    from ppbo.storage import open_storage

    if not Path(args.storage).exists():
        raise UsageError(f"--storage {args.storage!r} does not exist")
    if args.name is None:
        storage = open_storage(args.storage)
        rows = []
        for c in storage.list_campaigns():
            trials = storage.get_trials(c.id)
            rows.append(
                {
                    "name": c.name,
                    "trials": len(trials),
                    "complete": sum(t.state == "COMPLETE" for t in trials),
                    "running": sum(t.state == "RUNNING" for t in trials),
                    "direction": c.config.get("direction"),
                    "acquisition": c.config.get("acquisition", {}).get("name"),
                    "sources": len(c.config.get("sources") or []),
                }
            )
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print(pd.DataFrame(rows).to_string(index=False) if rows else "no campaigns")
        return 0
    if _is_preference(args):
        return _show_pairs(args)
    opt = _load(args)
    table = opt.trials
    if args.json:
        print(table.to_json(orient="records", indent=2))
        return 0
    columns = ["number", "state", "value", "origin"]
    columns += [c for c in table.columns if c.startswith("params_")]
    with pd.option_context("display.width", 200, "display.max_rows", 1000):
        print(table[columns].to_string(index=False))
    best = opt.best_trial
    if best is not None:
        print(f"best: trial {best.number}, value {best.value:.6g}, {best.params}")
    sources = opt.config.get("sources") or []
    if sources:
        counts = ", ".join(f"{s['name']} ({len(s['values'])} points)" for s in sources)
        transfer = opt.config.get("transfer") or {}
        if transfer.get("source_selection") == "bandit":
            counts += f"; one per ask, by the bandit (gamma {transfer['gamma']:g})"
        print(f"sources: {counts}")
    return 0


def _read_json(text: str, what: str) -> Any:
    if text == "-":
        text = sys.stdin.read()
    elif Path(text).is_file():
        text = Path(text).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{what} is not valid JSON: {error}") from None


def _create(args: argparse.Namespace) -> int:
    import ppbo
    from ppbo.storage import DuplicateCampaignError

    _setup()
    description = _read_json(args.space, "--space")
    try:
        if isinstance(description, dict):
            space = ppbo.Space(
                {name: _dimension(name, spec) for name, spec in description.items()}
            )
        else:
            space = ppbo.Space.from_json(description)
        if args.preference:
            return _create_preference(args, space)
        _refuse_drift_options(args)
        sources = [
            source
            for path in args.source or []
            for source in ppbo.transfer.read_source(path, space)
        ]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ppbo.CampaignWarning)
            _create_campaign(args, space, sources)
        for warning in caught:
            print(f"warning: {warning.message}", file=sys.stderr)
    except DuplicateCampaignError:
        raise UsageError(
            f"NAME {args.name!r} already exists in {args.storage}; drive it with: "
            f"ppbo ask {args.name} --storage {args.storage}"
        ) from None
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None
    print(json.dumps({"name": args.name, "storage": args.storage}))
    return 0


def _create_campaign(args: argparse.Namespace, space, sources) -> None:
    import ppbo

    ppbo.Optimizer(
        space,
        surrogate=args.model,
        inference=_inference(args.inference, args.samples),
        acquisition=args.acquisition,
        direction=args.direction,
        initial_design=args.initial_design or "lhs",
        n_initial=args.n_initial,
        seed=args.seed,
        storage=args.storage,
        name=args.name,
        sources=sources or None,
        source_selection=args.source_selection,
    )


def _dimension(name: str, spec: Any):
    import ppbo

    if not isinstance(spec, dict) or "type" not in spec:
        raise UsageError(
            f"--space entry {name!r} must be an object with a 'type' (real, integer, "
            f"categorical), got {spec!r}"
        )
    spec = dict(spec)
    kind = spec.pop("type")
    table = {
        "real": ppbo.Real,
        "integer": ppbo.Integer,
        "categorical": ppbo.Categorical,
    }
    if kind not in table:
        raise UsageError(f"--space entry {name!r} has unknown type {kind!r}")
    try:
        return table[kind](**spec)
    except TypeError as error:
        raise UsageError(f"--space entry {name!r}: {error}") from None


def _trial_json(trial) -> dict:
    out = {
        "trial": trial.number,
        "params": trial.params,
        "state": trial.state,
        "value": trial.value,
    }
    return out if trial.task is None else out | {"task": trial.task}


def _ask(args: argparse.Namespace) -> int:
    if _is_preference(args):
        return _ask_pair(args)
    opt = _load(args)
    if args.running:  # re-ask: the trials still out, e.g. after a crash
        print(json.dumps([_trial_json(t) for t in opt.get_trials("RUNNING")]))
        return 0
    if args.n < 1:
        raise UsageError(f"--n must be >= 1, got {args.n}")
    try:
        trials = opt.ask(args.n, task=args.task)
    except ValueError as error:
        raise UsageError(f"--task: {error}") from None
    out = [_trial_json(t) for t in trials]
    print(json.dumps(out[0] if args.n == 1 else out))
    return 0


def _tell(args: argparse.Namespace) -> int:
    if _is_preference(args):
        return _tell_pair(args)
    if args.pair is not None or args.winner is not None or args.anchor_json:
        raise UsageError(
            f"--pair, --winner and --anchor-json are for preference campaigns; "
            f"{args.name!r} is not one (create it with --preference)"
        )
    opt = _load(args)
    if args.json is not None:
        message = _read_json(args.json, "the tell JSON")
        records = message if isinstance(message, list) else [message]
    else:
        records = [
            {
                "trial": args.trial,
                "value": args.value,
                "failed": args.failed,
                "abandon": args.abandon,
            }
        ]
    if args.task is not None:  # the task of every record without its own
        records = [
            {"task": args.task} | r if isinstance(r, dict) else r for r in records
        ]
    results = []
    for record in records:
        if not isinstance(record, dict):
            raise UsageError(f"each tell must be a JSON object, got {record!r}")
        unknown = set(record) - {
            "trial",
            "value",
            "failed",
            "abandon",
            "message",
            "params",
            "task",
        }
        if unknown:
            raise UsageError(f"unknown field {sorted(unknown)[0]!r} in {record!r}")
        try:
            if record.get("trial") is None and "params" in record:
                trial = opt.add(
                    record["params"], record.get("value"), task=record.get("task")
                )
            elif record.get("trial") is None:
                raise UsageError(f"a tell needs 'trial' (or 'params'), got {record!r}")
            elif record.get("abandon"):
                trial = opt.abandon(record["trial"], record.get("message"))
            elif record.get("failed"):
                trial = opt.tell(
                    record["trial"], failed=True, message=record.get("message")
                )
            else:
                value = record.get("value")
                if isinstance(value, str):
                    value = float(value)  # "nan", "inf" from shell scripts
                trial = opt.tell(
                    record["trial"],
                    value,
                    message=record.get("message"),
                    task=record.get("task"),
                )
        except (KeyError, ValueError) as error:
            raise UsageError(str(error).strip("'\"")) from None
        results.append(_trial_json(trial))
    print(json.dumps(results[0] if len(results) == 1 else results))
    return 0


# -- preference campaigns (ppbo.PreferenceOptimizer) ----------------------------------


def _is_preference(args: argparse.Namespace) -> bool:
    from ppbo.storage import open_storage

    if args.name is None or not Path(args.storage).exists():
        return False
    campaign = open_storage(args.storage).get_campaign(args.name)
    return campaign is not None and campaign.config.get("kind") == "preference"


def _create_preference(args: argparse.Namespace, space) -> int:
    import ppbo

    for flag in ("--initial-design", "--source"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            raise UsageError(
                f"{flag} is not for preference campaigns (their design is a Sobol' "
                f"design of pairs), got {flag} {value}"
            )
    direction = args.direction if "--direction" in sys.argv else "maximize"
    inference = args.inference if args.inference in ("laplace", "nuts") else "laplace"
    options = {
        "acquisition": args.acquisition or "eubo",
        "inference": inference,
        "seed": args.seed,
        "n_initial": args.n_initial,
        "anchor_budget": args.anchor_budget,
        "anchor_noise": args.anchor_noise,
        "evidence": args.anchor_evidence,
        "direction": direction,
    }
    if args.samples is not None:
        options["num_samples"] = args.samples
    options |= _drift_options(args)
    ppbo.PreferenceOptimizer(space, storage=args.storage, name=args.name, **options)
    print(json.dumps({"name": args.name, "storage": args.storage}))
    return 0


# each drift strategy's one option: its flag and its strategy_options key
_DRIFT_OPTIONS = {
    "restart": ("--horizon", "horizon"),
    "sliding_window": ("--window", "window"),
    "weighted_penalty": ("--decay", "decay"),
}


def _refuse_drift_options(args: argparse.Namespace) -> None:
    for flag in ("--drift-strategy", "--horizon", "--window", "--decay"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            raise UsageError(
                f"{flag} is for preference campaigns (add --preference), got "
                f"{flag} {value}"
            )


def _drift_options(args: argparse.Namespace) -> dict:
    """``anchor_strategy`` and ``strategy_options`` from the drift flags."""
    strategy = args.drift_strategy
    if strategy is not None and strategy not in _DRIFT_OPTIONS:
        raise UsageError(
            f"--drift-strategy must be one of {', '.join(_DRIFT_OPTIONS)}, got "
            f"{strategy!r}"
        )
    for owner, (flag, keyword) in _DRIFT_OPTIONS.items():
        value = getattr(args, keyword)
        if value is not None and owner != strategy:
            given = "no --drift-strategy" if strategy is None else strategy
            raise UsageError(
                f"{flag} {value} is the option of --drift-strategy {owner}, got {given}"
            )
    if strategy is None:
        return {}
    flag, keyword = _DRIFT_OPTIONS[strategy]
    text = getattr(args, keyword)
    if text is None:
        raise UsageError(f"--drift-strategy {strategy} needs {flag}")
    if keyword == "decay":
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0.0 < value <= 1.0:  # also refuses NaN
            raise UsageError(f"{flag} must be a number in (0, 1], got {text!r}")
    else:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise UsageError(f"{flag} must be an integer >= 1, got {text!r}")
    return {"anchor_strategy": strategy, "strategy_options": {keyword: value}}


def _load_preference(args: argparse.Namespace):
    import ppbo

    _setup()
    return ppbo.PreferenceOptimizer.load(args.storage, args.name)


def _ask_pair(args: argparse.Namespace) -> int:
    opt = _load_preference(args)
    if args.running:
        running = [p.to_json() for p in opt.get_pairs() if p.winner is None]
        print(json.dumps(running))
        return 0
    if args.n != 1:
        raise UsageError(f"--n: a preference campaign asks one pair, got {args.n}")
    print(json.dumps(opt.ask().to_json()))
    return 0


def _tell_pair(args: argparse.Namespace) -> int:
    for flag, value in (
        ("--trial", args.trial),
        ("--value", args.value),
        ("--json", args.json),
    ):
        if value is not None:
            raise UsageError(
                f"{flag} is for ordinary campaigns; {args.name!r} is a preference "
                "campaign: tell --pair ID --winner a|b|tie|skip or --anchor-json"
            )
    opt = _load_preference(args)
    if args.anchor_json is not None:
        if args.pair is not None or args.winner is not None:
            raise UsageError("--anchor-json cannot be combined with --pair/--winner")
        record = _read_json(args.anchor_json, "--anchor-json")
        keys = set(record) if isinstance(record, dict) else set()
        if not {"params", "value"} <= keys <= {"params", "value", "noise"}:
            raise UsageError(
                '--anchor-json must be an object {"params": {...}, "value": number} '
                '(and "noise": its measurement variance, for --anchor-noise known), '
                f"got {record!r}"
            )
        value = record["value"]
        if isinstance(value, str):
            try:
                value = float(value)  # "nan" from shell scripts is refused below
            except ValueError:
                raise UsageError(
                    f"--anchor-json value must be a number, got {value!r}"
                ) from None
        try:
            anchor = opt.add_anchor(record["params"], value, record.get("noise"))
        except ValueError as error:
            raise UsageError(f"--anchor-json: {error}") from None
        print(
            json.dumps(
                {
                    "anchor": anchor.id,
                    "params": anchor.params,
                    "value": anchor.value,
                    "active": anchor.active,
                }
            )
        )
        return 0
    if args.pair is None:
        raise UsageError("--pair is required (the id printed by 'ppbo ask')")
    if args.winner is None:
        raise UsageError("--winner is required: a, b, tie or skip")
    if args.winner not in ("a", "b", "tie", "skip"):
        raise UsageError(f"--winner must be a, b, tie or skip, got {args.winner!r}")
    try:
        pair = opt.tell(args.pair, args.winner)
    except KeyError:
        raise UsageError(
            f"--pair {args.pair} does not exist in campaign {args.name!r}"
        ) from None
    except ValueError as error:
        raise UsageError(f"--pair {args.pair}: {error}") from None
    print(json.dumps(pair.to_json()))
    return 0


def _show_pairs(args: argparse.Namespace) -> int:
    opt = _load_preference(args)
    pairs = [p.to_json() for p in opt.get_pairs()]
    anchors = [
        {"anchor": a.id, "params": a.params, "value": a.value, "active": a.active}
        | ({} if a.noise is None else {"noise": a.noise})
        for a in opt.get_anchors()
    ]
    if args.json:
        print(json.dumps({"pairs": pairs, "anchors": anchors}, indent=2))
        return 0
    print(
        f"preference campaign {opt.name!r}: {len(pairs)} pairs, {len(anchors)} anchors"
    )
    for p in pairs:
        print(
            f"pair {p['id']:>4}  {p['winner'] or 'RUNNING':>7}  a={p['a']}  b={p['b']}"
        )
    for a in anchors:
        flag = "" if a["active"] else "  (inactive)"
        print(f"anchor {a['anchor']:>3}  value={a['value']:.6g}  {a['params']}{flag}")
    return 0


def _model(text: str) -> Any:
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None
    return text


def _storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage",
        default=DEFAULT_STORAGE,
        help=f"SQLite database file (default: {DEFAULT_STORAGE})",
    )


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--acquisition",
        default=None,
        help=(
            "log_ei (default), log_nei, log_jei, log_aei, pes, ei, ucb, kg, "
            "thompson, mes, es"
        ),
    )
    parser.add_argument(
        "--model",
        default="gp",
        type=_model,
        help="gp, gp-<kernel> (matern52, rbf, ...), multitask_gp or a JSON spec "
        '{"name": "multitask_gp", "num_tasks": 3}',
    )
    parser.add_argument(
        "--inference", default="map", help="map (default), nuts or slice"
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help="MCMC warm-up and samples (NUTS default: 256 warm-up, 64 samples)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--n-initial", type=int, default=None, help="initial design size"
    )


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2), like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ppbo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    _campaign_commands(commands)
    _ask_tell_commands(commands)
    return parser


def _campaign_commands(commands) -> None:

    run = commands.add_parser("run", help="run a campaign on a built-in benchmark")
    run.add_argument("problem", help="benchmark name, e.g. branin, hartmann6")
    run.add_argument("--budget", type=int, default=30, help="evaluations (30)")
    run.add_argument("--noise-var", type=float, default=0.0)
    run.add_argument("--name", default=None, help="campaign name (default: generated)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _model_options(run)
    _storage_option(run)

    resume = commands.add_parser("resume", help="continue a stopped 'ppbo run'")
    resume.add_argument("name")
    resume.add_argument("--budget", type=int, default=None, help="new total budget")
    resume.add_argument("--quiet", action="store_true")
    _storage_option(resume)

    show = commands.add_parser("show", help="list campaigns or one campaign's trials")
    show.add_argument("name", nargs="?")
    show.add_argument("--json", action="store_true", help="print JSON")
    _storage_option(show)

    create = commands.add_parser("create", help="create a campaign for ask/tell")
    create.add_argument("name")
    create.add_argument(
        "--space",
        required=True,
        help='JSON object, file or "-": {"lr": {"type": "real", "low": 1e-4, '
        '"high": 0.1, "log": true}, ...}',
    )
    create.add_argument("--direction", default="minimize")
    create.add_argument(
        "--preference",
        action="store_true",
        help="a preference campaign: ask pairs, tell winners (a|b|tie|skip) and "
        "anchors; --direction refers to the anchors' values (default maximize)",
    )
    create.add_argument(
        "--anchor-budget", type=int, default=None, help="most anchors kept"
    )
    create.add_argument(
        "--anchor-noise",
        default="homoscedastic",
        help="or heteroscedastic, or known (each anchor's variance, given as "
        '"noise" in --anchor-json)',
    )
    create.add_argument(
        "--anchor-evidence",
        default="separate",
        help="preference: the hyperparameter criterion, separate (the duels' and "
        "the anchors' evidences added) or joint (the tempered model's evidence)",
    )
    create.add_argument(
        "--drift-strategy",
        default=None,
        metavar="STRATEGY",
        help="preference: forget or down-weight old duels and anchors of a drifting "
        "objective: restart (with --horizon), sliding_window (with --window) or "
        "weighted_penalty (with --decay)",
    )
    create.add_argument(
        "--horizon",
        default=None,
        metavar="H",
        help="restart: use the duels and anchors of the last H pairs asked",
    )
    create.add_argument(
        "--window",
        default=None,
        metavar="W",
        help="sliding_window: use the W most recent duels and anchors",
    )
    create.add_argument(
        "--decay",
        default=None,
        metavar="G",
        help="weighted_penalty: likelihood weight G**age, 0 < G <= 1",
    )
    create.add_argument(
        "--source",
        action="append",
        metavar="FILE",
        help="a source task's evaluations (repeatable): a CSV file with the "
        'parameter names and "value" as columns, or a JSON file {"name": ..., '
        '"params": [{...}, ...], "values": [...]} (or a list of them)',
    )
    create.add_argument(
        "--initial-design",
        default=None,
        choices=["lhs", "sobol", "random", "sources"],
        help="the first --n-initial trials: lhs (default), sobol, random, or "
        "sources (the best points of the --source tasks, Feurer et al. 2015)",
    )
    create.add_argument(
        "--source-selection",
        default=None,
        choices=["all", "bandit"],
        help="all (every source in every fit) or bandit (one source per ask, "
        "Ramachandran et al. 2018); default: bandit for diff_gp with several "
        "sources, else all",
    )
    _model_options(create)
    _storage_option(create)


def _ask_tell_commands(commands) -> None:
    ask = commands.add_parser("ask", help="suggest trials; prints JSON")
    ask.add_argument("name")
    ask.add_argument("--n", type=int, default=1)
    ask.add_argument(
        "--running",
        action="store_true",
        help="print the RUNNING trials (asked, not told) instead of asking",
    )
    ask.add_argument(
        "--task", type=int, default=None, help="task to ask for (multi-task models)"
    )
    _storage_option(ask)

    tell = commands.add_parser("tell", help="record results; prints JSON")
    tell.add_argument("name")
    tell.add_argument("--trial", type=int)
    tell.add_argument("--value", type=float)
    tell.add_argument("--failed", action="store_true")
    tell.add_argument("--abandon", action="store_true")
    tell.add_argument(
        "--task", type=int, default=None, help="task of the told trials (multi-task)"
    )
    tell.add_argument("--pair", type=int, default=None, help="pair id (preference)")
    tell.add_argument("--winner", default=None, help="a, b, tie or skip (preference)")
    tell.add_argument(
        "--anchor-json",
        default=None,
        help='preference: an anchor {"params": {...}, "value": 1.2} (or "-"); '
        'with --anchor-noise known also "noise": its variance',
    )
    tell.add_argument(
        "--json",
        default=None,
        help='JSON (or "-" for stdin): {"trial": 3, "value": 1.2} or a list',
    )
    _storage_option(tell)

    demo = commands.add_parser("demo", help="fit a fully Bayesian GP and plot it")
    demo.add_argument("--n", type=int, default=12, help="number of observations")
    demo.add_argument("--samples", type=int, default=256, help="MCMC warm-up/samples")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", default=os.environ.get("PPBO_OUT", "ppbo-output"))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppbo`` command.

    Example:
        >>> # $ ppbo run branin --budget 30
        >>> # $ ppbo show branin-ei-seed0
    """
    args = _parser().parse_args(argv)
    handlers = {
        "run": _run,
        "resume": _resume,
        "show": _show,
        "create": _create,
        "ask": _ask,
        "tell": _tell,
        "demo": _demo,
    }
    try:
        return handlers[args.command](args)
    except UsageError as error:
        message = str(error)
    except (ValueError, KeyError, TypeError, OSError) as error:
        message = str(error).strip("'\"")
    except Exception as error:  # one line, never a traceback
        from ppbo.storage import StorageError

        message = str(error)
        if not isinstance(error, StorageError):
            message = f"{type(error).__name__}: {message}"
    first, *_ = message.splitlines() or [""]
    print(f"ppbo {args.command}: error: {first}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
