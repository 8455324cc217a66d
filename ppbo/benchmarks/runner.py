"""Immediate-regret runner: methods x problems x seeds, medians and bootstrap bands.

A *method* is a :class:`Method`: ``suggest(key, problem, X, y)`` picks the next point
in the unit cube from the evaluations so far, and ``recommend(key, problem, X, y)``
names the point the method would report as the optimum (by default the best
observed point). :func:`run_one` runs one (method, problem, seed) and returns a
JSON-ready dict; :func:`run` maps it over a sweep (any ``map``-like function, so a
process pool or a Ray wrapper can spread the runs out), then :func:`summarize`
takes the median and a bootstrap band of log10 immediate regret per evaluation and
:func:`plot` draws them. ``run(..., executor="ray")`` sends the runs to a Ray
cluster as tasks (:func:`ray_map`; Moritz et al. 2018).

The protocol follows Hernández-Lobato et al. (2014, Section 5): every run starts
from the same Latin-hypercube design for a given seed, observes the objective with
Gaussian noise, and is scored at every evaluation by the noise-free regret of its
recommendation and of its best evaluated point.

References:
    Hernández-Lobato, J. M., Hoffman, M. W. and Ghahramani, Z. (2014). Predictive
    Entropy Search for Efficient Global Optimization of Black-box Functions.
    NeurIPS.
    McKay, M. D., Beckman, R. J. and Conover, W. J. (1979). A Comparison of Three
    Methods for Selecting Values of Input Variables in the Analysis of Output from
    a Computer Code. Technometrics 21.
    Efron, B. and Tibshirani, R. J. (1993). An Introduction to the Bootstrap.
    Chapman & Hall. (Percentile intervals, Chapter 13.)
    Moritz, P., Nishihara, R., Wang, S., Tumanov, A., Liaw, R., Liang, E., et al.
    (2018). Ray: A Distributed Framework for Emerging AI Applications. OSDI.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np
import scipy

from ppbo.benchmarks.problems import Problem, get, options

__all__ = [
    "Method",
    "Suggest",
    "best_observed",
    "random_search",
    "initial_design",
    "run_one",
    "run",
    "ray_map",
    "summarize",
    "bootstrap_median",
    "plot",
]

# Independent NumPy streams for the initial design and the observation noise.
_DESIGN_STREAM, _NOISE_STREAM = 0, 1
# Suggested points this far outside the unit cube are rounding and are clipped.
_UNIT_TOL = 1e-9
# A regret below -_REGRET_RTOL * max(1, |optimum|) means the stated optimum is wrong.
_REGRET_RTOL = 1e-8
_REGRET_KINDS = ("regret_recommendation", "regret_best_observed")
#: The per-evaluation lists of a run's record, one entry per evaluation.
RECORD_FIELDS = (
    "x",
    "y",
    "f",
    "recommendation",
    "f_recommendation",
    *_REGRET_KINDS,
    "suggest_seconds",
    "recommend_seconds",
)


class Suggest(Protocol):
    """The signature of ``Method.suggest`` and ``Method.recommend``."""

    def __call__(
        self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        """Return a point (d,) in the unit cube.

        Args:
            key: a JAX PRNG key for this call.
            problem: the problem being optimised (its ``direction`` says whether
                small or large ``y`` is better).
            X: (n, d) float64 evaluated points, in the unit cube.
            y: (n,) float64 observed (noisy) values, in the problem's units.
        """
        ...


def best_observed(
    key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """Recommend the evaluated point with the best observed (noisy) value.

    Args:
        key: unused.
        problem: the problem; its ``direction`` decides best.
        X: (n, d) evaluated points in the unit cube, n >= 1.
        y: (n,) observed values.

    Returns:
        The (d,) row of ``X`` with the smallest ``y`` when minimising, the largest
        when maximising.

    Example:
        >>> problem = get("branin")
        >>> X = np.array([[0.1, 0.2], [0.5, 0.5]])
        >>> best_observed(None, problem, X, np.array([3.0, 1.0])).tolist()
        [0.5, 0.5]
    """
    index = np.argmin(y) if problem.direction == "minimize" else np.argmax(y)
    return X[index]


@dataclasses.dataclass(frozen=True)
class Method:
    """A benchmark method: where to evaluate next, and what to recommend.

    Both are :class:`Suggest` functions ``(key, problem, X, y) -> (d,)`` on the unit
    cube; calling the method calls ``suggest``. The runner takes a bare function as
    ``Method(suggest=function)``; only a ``Method`` brings its own ``recommend``.
    To be run in other processes, a method must pickle, so build it from
    module-level functions (or ``functools.partial`` of them), not lambdas.

    Attributes:
        suggest: chooses the next point to evaluate.
        recommend: the point the method reports as the optimum after each
            evaluation; :func:`best_observed` by default. A BO method recommends
            the maximiser of its posterior mean (Hernández-Lobato et al. 2014).

    Example:
        >>> def centre(key, problem, X, y):
        ...     return np.full(problem.dim, 0.5)
        >>> method = Method(centre)
        >>> method(jax.random.key(0), get("branin"), np.empty((0, 2)), np.empty(0))
        array([0.5, 0.5])
    """

    suggest: Suggest
    recommend: Suggest = best_observed

    def __call__(
        self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        """Return ``self.suggest(key, problem, X, y)``."""
        return self.suggest(key, problem, X, y)


def _uniform(
    key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
) -> np.ndarray:
    return _numpy_rng(key).random(problem.dim)


#: Random search: independent uniform points on the unit cube; recommends the best
#: observed point.
random_search = Method(suggest=_uniform)


def _numpy_rng(key: jax.Array) -> np.random.Generator:
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())


def initial_design(d: int, n: int, seed: int) -> np.ndarray:
    """Return the seeded Latin-hypercube design shared by all methods for a seed.

    Args:
        d: input dimension.
        n: number of points.
        seed: the run's seed.

    Returns:
        (n, d) points in the unit cube, one per stratum of each input.

    Example:
        >>> U = initial_design(2, 3, seed=0)
        >>> U.shape, np.array_equal(U, initial_design(2, 3, seed=0))
        ((3, 2), True)
        >>> np.sort(np.floor(3 * U), axis=0).tolist()
        [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    """
    from ppbo.campaign.designs import initial_design as design

    return design("lhs", n, d, [_DESIGN_STREAM, int(seed)])


def run_one(
    method_name: str,
    method: Method | Suggest,
    problem: str | Problem,
    seed: int,
    budget: int,
    n_initial: int = 3,
    noise_var: float | None = None,
) -> dict[str, Any]:
    """Run one method on one problem for one seed and score it at every evaluation.

    Evaluations 1 ... ``n_initial`` are the seed's Latin-hypercube design; each later
    one is the method's suggestion given everything observed so far. Evaluation t
    is observed with noise drawn from a stream fixed by (seed, t), so every method
    sees the same noise sequence for a seed. After each evaluation the runner asks
    for a recommendation (the best observed point while the design is incomplete,
    ``method.recommend`` afterwards) and records two noise-free immediate regrets:
    that of the recommendation, and that of the best point evaluated so far (which
    never increases). Keys: evaluation t uses ``fold_in(key(seed), t)``, folded
    again with 0 for ``suggest`` and 1 for ``recommend``.

    Args:
        method_name: the name recorded in the result.
        method: a :class:`Method`, or a bare suggest function (then it recommends
            the best observed point), or a :class:`ppbo.benchmarks.Campaign`: then
            the run is a :class:`ppbo.Optimizer` campaign with its own initial
            design (``n_initial`` is not used), scored on the same noise stream,
            and its recommendation is scored only at the campaign's
            ``recommend_at`` evaluations and the last (NaN elsewhere).
        problem: a :class:`Problem` (used as is), or a name for
            :func:`ppbo.benchmarks.get`, e.g. ``"ackley:d=5"``. A named problem that
            takes a ``seed`` option (``gp_sample``) and does not fix it is drawn
            with this run's seed, so every seed optimises a different function, as
            in the PES paper.
        seed: the run's seed (design, noise, keys and seeded problems).
        budget: total number of evaluations, design included.
        n_initial: number of Latin-hypercube points (3 in the PES protocol).
        noise_var: if not None, the observation noise variance, replacing the
            problem's; a named problem otherwise gets none.

    Returns:
        A JSON-ready dict: ``method``, ``problem`` (the name given, or the
        Problem's name), ``instance`` (the resolved Problem's name), ``seed``,
        ``budget``, ``n_initial``, ``noise_var``, ``direction``, ``optimum_value``,
        ``dim`` and per-evaluation lists of length ``budget``: ``x`` (points in the
        problem's units), ``y`` (observed), ``f`` (noise-free), ``recommendation``
        (points in the problem's units), ``f_recommendation``,
        ``regret_recommendation``, ``regret_best_observed``, ``suggest_seconds``
        and ``recommend_seconds`` (0 where the method was not called).

    Raises:
        ValueError: for a bad budget or design size, a method returning a point of
            the wrong shape, non-finite or outside the unit cube, or a noise-free
            value better than the problem's stated optimum.
    """
    from ppbo.benchmarks.campaign import Campaign, run_campaign

    label = problem.name if isinstance(problem, Problem) else str(problem).strip()
    problem = _resolve(problem, seed, noise_var)
    budget, n_initial, seed = int(budget), int(n_initial), int(seed)
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    if isinstance(method, Campaign):
        record = run_campaign(
            method_name, method, problem, seed, budget, _NOISE_STREAM, _regret
        )
        return _result(label, problem, seed, budget) | record
    if not isinstance(method, Method):
        method = Method(suggest=method)
    if not 0 <= n_initial <= budget:
        raise ValueError(
            f"n_initial must be between 0 and budget = {budget}, got {n_initial}"
        )
    d = problem.dim
    design = initial_design(d, n_initial, seed)
    root = jax.random.key(seed)
    U = np.empty((0, d))
    y = np.empty(0)
    record: dict[str, list] = {field: [] for field in RECORD_FIELDS}
    best_f = math.inf if problem.direction == "minimize" else -math.inf
    for t in range(budget):
        key = jax.random.fold_in(root, t)
        start = time.perf_counter()
        if t < n_initial:
            u, seconds = design[t], 0.0
        else:
            u = method.suggest(jax.random.fold_in(key, 0), problem, U, y)
            seconds = time.perf_counter() - start
            u = _check_unit(u, d, method_name, "suggest")
        x = problem.from_unit(u)
        noise = np.random.default_rng([_NOISE_STREAM, seed, t])
        observed, f = problem(x, key=noise), problem.noise_free(x)
        U, y = np.vstack([U, u]), np.append(y, observed)
        best_f = min(best_f, f) if problem.direction == "minimize" else max(best_f, f)

        start = time.perf_counter()
        if t + 1 < n_initial:
            r, rec_seconds = best_observed(None, problem, U, y), 0.0
        else:
            r = method.recommend(jax.random.fold_in(key, 1), problem, U, y)
            rec_seconds = time.perf_counter() - start
            r = _check_unit(r, d, method_name, "recommend")
        x_rec = problem.from_unit(r)
        f_rec = problem.noise_free(x_rec)

        record["x"].append(x.tolist())
        record["y"].append(float(observed))
        record["f"].append(float(f))
        record["recommendation"].append(x_rec.tolist())
        record["f_recommendation"].append(float(f_rec))
        record["regret_recommendation"].append(_regret(problem, f_rec))
        record["regret_best_observed"].append(_regret(problem, best_f))
        record["suggest_seconds"].append(seconds)
        record["recommend_seconds"].append(rec_seconds)
    return _result(label, problem, seed, budget) | {
        "method": method_name,
        "n_initial": n_initial,
        **record,
    }


def _result(label: str, problem: Problem, seed: int, budget: int) -> dict[str, Any]:
    return {
        "problem": label,
        "instance": problem.name,
        "seed": seed,
        "budget": budget,
        "noise_var": problem.noise_var,
        "direction": problem.direction,
        "optimum_value": problem.optimum_value,
        "dim": problem.dim,
    }


def _resolve(problem: str | Problem, seed: int, noise_var: float | None) -> Problem:
    if isinstance(problem, Problem):
        if noise_var is not None:
            problem = dataclasses.replace(problem, noise_var=noise_var)
        return problem
    if not isinstance(problem, str):
        raise ValueError(f"a problem must be a Problem or a name, got {problem!r}")
    base, _, text = problem.partition(":")
    given = {item.partition("=")[0].strip() for item in text.split(",")}
    extra = {}
    if "seed" in options(base.strip()) and "seed" not in given:
        extra["seed"] = int(seed)
    return get(problem, noise_var=0.0 if noise_var is None else noise_var, **extra)


def _check_unit(u: Any, d: int, method_name: str, stage: str) -> np.ndarray:
    u = np.asarray(u)
    if u.shape != (d,) or not (
        np.issubdtype(u.dtype, np.floating) or np.issubdtype(u.dtype, np.integer)
    ):
        raise ValueError(
            f"method {method_name!r}: {stage} must return a real array of shape "
            f"({d},), got {u.dtype} of shape {u.shape}"
        )
    u = u.astype(np.float64)
    if not np.all(np.isfinite(u)) or np.any((u < -_UNIT_TOL) | (u > 1 + _UNIT_TOL)):
        raise ValueError(
            f"method {method_name!r}: {stage} must return a finite point in the unit "
            f"cube, got {u.tolist()}"
        )
    return np.clip(u, 0.0, 1.0)


def _regret(problem: Problem, f: float) -> float:
    gap = f - problem.optimum_value
    regret = gap if problem.direction == "minimize" else -gap
    if regret < -_REGRET_RTOL * max(1.0, abs(problem.optimum_value)):
        raise ValueError(
            f"{problem.name}: a noise-free value {f!r} beats the stated optimum "
            f"{problem.optimum_value!r}; the problem's optimum is wrong"
        )
    return max(float(regret), 0.0)


def _run_task(task: tuple) -> dict[str, Any]:
    return run_one(*task)


#: Executors of :func:`run`: ``"local"`` (``map_fn`` in this process) and
#: ``"ray"`` (:func:`ray_map`).
EXECUTORS = ("local", "ray")


def _call_with_x64(function: Callable, task: Any, x64: bool) -> Any:
    # a Ray worker is a fresh process: give it the caller's float64 setting, so
    # that its runs equal the local executor's
    jax.config.update("jax_enable_x64", x64)
    return function(task)


def ray_map(
    function: Callable[[Any], Any],
    tasks: Iterable[Any],
    *,
    address: str | None = None,
    num_cpus: float = 1.0,
    ordered: bool = True,
) -> Iterable[Any]:
    """Map ``function`` over ``tasks`` as Ray tasks; yield the results.

    Connects to Ray first if needed: ``ray.init(address=address)`` (None: the
    ``RAY_ADDRESS`` environment variable, else a new local cluster with one
    worker per CPU); an already initialised Ray is used as it is. Every task
    runs with the caller's ``jax_enable_x64`` setting. ``function`` and the tasks
    must pickle (module-level functions, not lambdas defined in ``__main__``).

    Args:
        function: applied to each task, in a Ray worker.
        tasks: the arguments, one per Ray task; all are submitted at once.
        address: the cluster to connect to, as for ``ray.init``.
        num_cpus: CPUs reserved per task (the cluster runs ``CPUs / num_cpus``
            tasks at once).
        ordered: yield results in the order of ``tasks`` (True) or as they
            finish (False).

    Returns:
        An iterator over the results.

    Raises:
        ImportError: if Ray is not installed (the ``ray`` extra).

    Example:
        Not run by the doctests (it starts a Ray cluster, seconds to minutes):

        >>> import ray  # doctest: +SKIP
        >>> _ = ray.init(num_cpus=2, include_dashboard=False)  # doctest: +SKIP
        >>> list(ray_map(abs, [-1, 2, -3]))  # doctest: +SKIP
        [1, 2, 3]
    """
    import ray

    if not ray.is_initialized():
        ray.init(address=address)
    remote = ray.remote(num_cpus=num_cpus)(_call_with_x64)
    x64 = bool(jax.config.jax_enable_x64)
    pending = [remote.remote(function, task, x64) for task in tasks]
    if ordered:
        for ref in pending:
            yield ray.get(ref)
        return
    while pending:
        (ref,), pending = ray.wait(pending, num_returns=1)
        yield ray.get(ref)


def run(
    methods: Mapping[str, Method | Suggest],
    problems: Sequence[str | Problem],
    seeds: Iterable[int],
    budget: int,
    n_initial: int = 3,
    noise_var: float | None = None,
    out_dir: str | Path | None = None,
    name: str = "regret",
    map_fn: Callable[[Callable, Iterable], Iterable] | None = None,
    on_run: Callable[[dict[str, Any]], None] | None = None,
    level: float = 0.9,
    num_resamples: int = 1000,
    floor: float = 1e-12,
    executor: str = "local",
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Run every method on every problem for every seed, summarise and save.

    Each (method, problem, seed) is an independent :func:`run_one` call, so
    ``map_fn`` may run them anywhere: the builtin ``map`` (the default), a
    ``concurrent.futures`` executor's ``map``, or a wrapper around Ray tasks. The
    tasks it receives are tuples of :func:`run_one`'s positional arguments.
    ``executor="ray"`` runs them as Ray tasks (:func:`ray_map`), one CPU each,
    on the cluster at ``ray_address``; the runs equal the local executor's for
    the same seeds, apart from the measured seconds.

    Args:
        methods: name -> method (see :func:`run_one`).
        problems: Problems or problem names (see :func:`run_one`); their labels
            (the name given, or ``Problem.name``) must be distinct.
        seeds: the run seeds; the initial design and noise are shared by all
            methods for a seed.
        budget: evaluations per run, design included (30 in the PES protocol).
        n_initial: Latin-hypercube points per run.
        noise_var: observation noise variance for every problem, or None to keep
            each Problem's own (and none for named problems).
        out_dir: if given, ``{name}.json`` and ``{name}.png`` are written there.
        name: the stem of the output files.
        map_fn: ``map``-like function applied to the module-level task runner and
            the task tuples (None: the builtin ``map``).
        on_run: called with each run's dict as it arrives (progress reports).
        level: coverage of the bootstrap band.
        num_resamples: bootstrap resamples.
        floor: regrets are floored here before log10 (zero regret is -inf).
        executor: ``"local"`` (``map_fn``) or ``"ray"``.
        ray_address: the Ray cluster for ``executor="ray"`` (None: an already
            initialised Ray, ``RAY_ADDRESS``, or a new local cluster).

    Returns:
        ``{"config": ..., "runs": [run_one dicts], "summary": summarize(runs)}``.

    Raises:
        ValueError: for empty or repeated methods, problems or seeds, an unknown
            executor, ``executor="ray"`` with a ``map_fn``, and as
            :func:`run_one`.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if executor == "ray":
        if map_fn is not None:
            raise ValueError("give executor='ray' or a map_fn, not both")
        map_fn = functools.partial(ray_map, address=ray_address)
    elif map_fn is None:
        map_fn = map
    seeds = [int(s) for s in seeds]
    labels = [p.name if isinstance(p, Problem) else str(p).strip() for p in problems]
    for what, items in (("methods", list(methods)), ("problems", labels)):
        if not items or len(set(items)) != len(items):
            raise ValueError(f"{what} must be non-empty and distinct, got {items}")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be non-empty and distinct, got {seeds}")
    tasks = [
        (method_name, method, problem, seed, budget, n_initial, noise_var)
        for problem in problems
        for method_name, method in methods.items()
        for seed in seeds
    ]
    runs = []
    for result in map_fn(_run_task, tasks):
        runs.append(result)
        if on_run is not None:
            on_run(result)
    result = {
        "config": {
            "methods": list(methods),
            "problems": labels,
            "seeds": seeds,
            "budget": int(budget),
            "n_initial": int(n_initial),
            "noise_var": noise_var,
            "level": level,
            "num_resamples": num_resamples,
            "floor": floor,
            "executor": executor,
            "platform": platform.platform(),
            "versions": {
                "numpy": np.__version__,
                "scipy": scipy.__version__,
                "jax": jax.__version__,
            },
        },
        "runs": runs,
        "summary": summarize(
            runs, level=level, num_resamples=num_resamples, floor=floor
        ),
    }
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(result, indent=1))
        plot(result["summary"], out / f"{name}.png")
    return result


def bootstrap_median(
    values: Any, level: float = 0.9, num_resamples: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the median over runs and its percentile-bootstrap band, per column.

    Runs are resampled with replacement ``num_resamples`` times (the same resampled
    runs for every column, so a band follows whole runs); the band is the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled medians.

    Args:
        values: (r, T) one row per run, one column per evaluation.
        level: coverage of the band, in (0, 1).
        num_resamples: bootstrap resamples B.
        seed: seed of the NumPy generator drawing the resamples.

    Returns:
        ``(median, low, high)``, each of shape (T,).

    Raises:
        ValueError: if ``values`` is not a non-empty finite 2-D array or ``level``
            is outside (0, 1).

    Example:
        >>> median, low, high = bootstrap_median([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
        >>> median.tolist(), low.tolist(), high.tolist()
        ([2.0, 3.0], [0.0, 1.0], [4.0, 5.0])
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError(
            f"values must be a non-empty finite (runs, steps) array, got shape "
            f"{values.shape}"
        )
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, values.shape[0], size=(int(num_resamples), values.shape[0]))
    medians = np.stack(
        [np.median(column[index], axis=1) for column in values.T], axis=1
    )  # (B, T)
    low, high = np.quantile(medians, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return np.median(values, axis=0), low, high


def summarize(
    runs: Sequence[Mapping[str, Any]],
    level: float = 0.9,
    num_resamples: int = 1000,
    seed: int = 0,
    floor: float = 1e-12,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Summarise runs: median and bootstrap band of log10 regret per evaluation.

    Args:
        runs: :func:`run_one` results.
        level, num_resamples, seed: as :func:`bootstrap_median`.
        floor: regrets below it count as ``floor`` (log10 of 0 is -inf).

    Returns:
        ``summary[problem][method]`` with ``num_runs``, ``n_initial``,
        ``evaluations`` (1 ... budget), and for ``log10_regret_recommendation`` and
        ``log10_regret_best_observed`` a dict of ``median``, ``low`` and ``high``
        lists (None at evaluations where some run has no score: campaigns score
        their recommendation at a few evaluations only); plus ``final``: the
        median regrets (not logged) after the last evaluation.

    Raises:
        ValueError: if the runs of one (problem, method) differ in budget or
            design size.
    """
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for result in runs:
        groups.setdefault(result["problem"], {}).setdefault(
            result["method"], []
        ).append(result)
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for problem, by_method in groups.items():
        summary[problem] = {}
        for method_name, members in by_method.items():
            shapes = {(r["budget"], r["n_initial"]) for r in members}
            if len(shapes) != 1:
                raise ValueError(
                    f"runs of {method_name!r} on {problem!r} differ in "
                    f"(budget, n_initial): {sorted(shapes)}"
                )
            budget, n_initial = shapes.pop()
            entry: dict[str, Any] = {
                "num_runs": len(members),
                "n_initial": n_initial,
                "evaluations": list(range(1, budget + 1)),
            }
            final = {}
            for kind in _REGRET_KINDS:
                regrets = np.array([r[kind] for r in members], dtype=np.float64)
                # campaigns score their recommendation at a few evaluations only
                scored = np.all(np.isfinite(regrets), axis=0)
                bands = np.full((3, regrets.shape[1]), np.nan)
                if scored.any():
                    bands[:, scored] = bootstrap_median(
                        np.log10(np.maximum(regrets[:, scored], floor)),
                        level,
                        num_resamples,
                        seed,
                    )
                entry[f"log10_{kind}"] = {
                    name: [None if np.isnan(v) else float(v) for v in band]
                    for name, band in zip(("median", "low", "high"), bands, strict=True)
                }
                final[kind] = float(np.median(regrets[:, -1]))
            entry["final"] = final
            summary[problem][method_name] = entry
    return summary


def plot(summary: Mapping[str, Mapping[str, Mapping[str, Any]]], path: str | Path):
    """Draw log10 median regret against evaluations, with bootstrap bands.

    One column per problem; the top row scores the recommendations, the bottom row
    the best evaluated points. A dotted line marks the end of the initial design.
    Uses Matplotlib's object API with the Agg canvas, so no global backend changes.

    Args:
        summary: :func:`summarize`'s result.
        path: where to write the PNG.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    problems = list(summary)
    fig = Figure(figsize=(3.6 * len(problems), 6.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(problems), squeeze=False, sharex="col")
    titles = ("recommendation", "best observed")
    for j, problem in enumerate(problems):
        for i, kind in enumerate(_REGRET_KINDS):
            ax = axes[i, j]
            for method_name, entry in summary[problem].items():
                band = {
                    k: np.array(v, dtype=np.float64)  # None (not scored) -> NaN
                    for k, v in entry[f"log10_{kind}"].items()
                }
                steps = np.array(entry["evaluations"])
                sparse = np.isnan(band["median"]).any()
                (line,) = ax.plot(
                    steps,
                    band["median"],
                    label=method_name,
                    marker="o" if sparse else None,
                )
                if sparse:  # scored at a few evaluations: error bars, not a band
                    ax.errorbar(
                        steps,
                        band["median"],
                        yerr=[
                            band["median"] - band["low"],
                            band["high"] - band["median"],
                        ],
                        fmt="none",
                        color=line.get_color(),
                    )
                else:
                    ax.fill_between(
                        steps,
                        band["low"],
                        band["high"],
                        color=line.get_color(),
                        alpha=0.2,
                    )
                ax.axvline(entry["n_initial"], color="0.6", linestyle=":", lw=1)
            ax.set_title(f"{problem}: {titles[i]}", fontsize=9)
            ax.set_ylabel("log10 immediate regret")
            if i == 1:
                ax.set_xlabel("evaluations")
    axes[0, 0].legend(fontsize=8)
    fig.savefig(Path(path), dpi=110)
