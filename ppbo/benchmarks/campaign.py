"""Benchmark methods that run ppbo's own campaign, as a user would.

A :class:`Campaign` is a benchmark method whose runs go through
:class:`ppbo.Optimizer` — its initial design, output standardisation, fit,
acquisition and acquisition optimiser — with the user's defaults unless its
``options`` say otherwise. :func:`run_campaign` scores one such run under the
protocol of :func:`ppbo.benchmarks.run_one` (the same noise stream per seed and
evaluation, noise-free immediate regret of the best evaluated point after every
evaluation), so that a regret table measures the product, not a copy of its BO
step. Recommendations (:meth:`ppbo.Optimizer.recommend`, a refit plus a
posterior-mean maximisation) are scored at the evaluations listed in
``recommend_at``; elsewhere the record holds NaN.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ppbo.benchmarks.problems import Problem

__all__ = ["Campaign", "run_campaign", "problem_space"]


@dataclasses.dataclass(frozen=True)
class Campaign:
    """A benchmark method that runs :class:`ppbo.Optimizer` campaigns.

    Args:
        options: keyword arguments of :class:`ppbo.Optimizer` (``acquisition``,
            ``inference``, ``surrogate``, ``n_initial``, ``optimizer_options``
            ...); JSON-ready values or ppbo objects. Empty: the user's defaults.
        recommend_at: evaluation counts after which the campaign's
            recommendation is scored; the budget is always included.
        shared_design: if positive, the first this many evaluations are the
            runner's Latin-hypercube design for the seed (the points every
            :class:`~ppbo.benchmarks.Method` starts from, peers included), told to
            the campaign with :meth:`ppbo.Optimizer.add`; the campaign then asks
            for the rest (give ``n_initial=0`` in ``options`` to skip its own
            design). Runs are then paired with the peers' seed by seed.

    Example:
        >>> from ppbo import benchmarks
        >>> method = Campaign({"inference": "map", "acquisition": "log_ei",
        ...                    "n_initial": 3})
        >>> run = benchmarks.run_one("map", method, "branin", seed=0, budget=5)
        >>> len(run["regret_best_observed"])
        5
    """

    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    recommend_at: tuple[int, ...] = ()
    shared_design: int = 0


def problem_space(problem: Problem):
    """The :class:`ppbo.Space` of a problem: one real parameter per coordinate.

    Example:
        >>> from ppbo.benchmarks import get
        >>> problem_space(get("branin")).names
        ['x1', 'x2']
    """
    from ppbo.space import Real, Space

    return Space(
        {name: Real(float(low), float(high)) for name, low, high in problem.space}
    )


def run_campaign(
    method_name: str,
    method: Campaign,
    problem: Problem,
    seed: int,
    budget: int,
    noise_stream: int,
    score: Any,
) -> dict[str, Any]:
    """Run one campaign on ``problem`` for ``budget`` evaluations and score it.

    Called by :func:`ppbo.benchmarks.run_one`, which resolves the problem and owns
    the noise stream and the regret function ``score(problem, f)``; see there for
    the fields of the returned dict. ``n_initial`` is the campaign's own design
    size, and ``suggest_seconds`` the time of each :meth:`ppbo.Optimizer.ask`
    (design points included).
    """
    from ppbo.benchmarks.runner import RECORD_FIELDS, initial_design
    from ppbo.loop import Optimizer

    names = [name for name, _, _ in problem.space]
    opt = Optimizer(
        problem_space(problem),
        direction=problem.direction,
        seed=int(seed),
        **dict(method.options),
    )
    checkpoints = {int(k) for k in method.recommend_at if 0 < int(k) <= budget}
    checkpoints.add(int(budget))
    record: dict[str, list] = {field: [] for field in RECORD_FIELDS}
    minimize = problem.direction == "minimize"
    best_f = math.inf if minimize else -math.inf
    design = initial_design(problem.dim, min(method.shared_design, budget), seed)
    for t in range(budget):
        start = time.perf_counter()
        if t < len(design):
            trial, seconds = None, 0.0
            x = problem.from_unit(design[t])
        else:
            trial = opt.ask()
            seconds = time.perf_counter() - start
            x = np.array([trial.params[name] for name in names], dtype=np.float64)
        noise = np.random.default_rng([noise_stream, seed, t])
        observed, f = float(problem(x, key=noise)), float(problem.noise_free(x))
        if trial is None:
            opt.add(dict(zip(names, x.tolist(), strict=True)), observed)
        else:
            opt.tell(trial, observed)
        best_f = min(best_f, f) if minimize else max(best_f, f)
        x_rec, f_rec, regret_rec, rec_seconds = None, math.nan, math.nan, 0.0
        if t + 1 in checkpoints:
            start = time.perf_counter()
            params = opt.recommend().params
            rec_seconds = time.perf_counter() - start
            x_rec = np.array([params[name] for name in names], dtype=np.float64)
            f_rec = float(problem.noise_free(x_rec))
            regret_rec = score(problem, f_rec)
        record["x"].append(x.tolist())
        record["y"].append(observed)
        record["f"].append(f)
        record["recommendation"].append(None if x_rec is None else x_rec.tolist())
        record["f_recommendation"].append(f_rec)
        record["regret_recommendation"].append(regret_rec)
        record["regret_best_observed"].append(score(problem, best_f))
        record["suggest_seconds"].append(seconds)
        record["recommend_seconds"].append(rec_seconds)
    return {
        "method": method_name,
        "n_initial": len(design) + int(opt.config["n_initial"]),
        "options": _describe(method.options),
        **record,
    }


def _describe(options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value if isinstance(value, str | int | float | dict) else repr(value)
        for key, value in options.items()
    }
