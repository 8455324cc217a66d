"""Benchmark problems with known optima and the immediate-regret runner.

Problems (:mod:`ppbo.benchmarks.problems`): ``get(name, noise_var, **options)``
returns a :class:`Problem`; ``names()`` lists them and ``options(name)`` their
options. The runner (:mod:`ppbo.benchmarks.runner`): a :class:`Method` pairs
``suggest`` and ``recommend`` functions on the unit cube; ``run_one`` scores one
(method, problem, seed) and ``run`` a whole sweep, writing JSON and a PNG of log10
median immediate regret with bootstrap bands.

Example:
    >>> from ppbo import benchmarks
    >>> result = benchmarks.run_one("random", benchmarks.random_search, "branin",
    ...                             seed=0, budget=5, noise_var=1e-3)
    >>> len(result["regret_best_observed"]), result["problem"]
    (5, 'branin')
"""

from ppbo.benchmarks.campaign import Campaign, problem_space
from ppbo.benchmarks.methods import BayesOpt, bayes_opt
from ppbo.benchmarks.problems import Problem, get, names, options
from ppbo.benchmarks.runner import (
    EXECUTORS,
    Method,
    Suggest,
    best_observed,
    bootstrap_median,
    initial_design,
    plot,
    random_search,
    ray_map,
    run,
    run_one,
    summarize,
)

__all__ = [
    "Campaign",
    "problem_space",
    "BayesOpt",
    "bayes_opt",
    "Problem",
    "get",
    "names",
    "options",
    "Method",
    "Suggest",
    "best_observed",
    "random_search",
    "initial_design",
    "run_one",
    "run",
    "summarize",
    "bootstrap_median",
    "plot",
    "ray_map",
    "EXECUTORS",
]
