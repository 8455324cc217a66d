"""Transfer-learning task families with known relatedness: a target and K sources.

Each family draws, from a seed, a target objective and ``K`` source tasks with
``n_k`` evaluations each (uniform random points in the target's box, noise-free
values), in the target's units. The families:

================  ===  ====================================================
name              d    tasks
================  ===  ====================================================
``branin``        2    ``a · branin(x - δ·w)``, δ ~ U[-0.1, 0.1]^d (a fraction
                       of the box widths w), a ~ U[0.9, 1.1] per task
``hartmann3``     3    the same on Hartmann-3
``sin1d``         1    ``x sin(x + π + s) + x / 10`` on [0, 10]; the target
                       has s = 0, source i = 1..K has s_i = π i / 12
``forrester``     1    target: Forrester's high fidelity ``(6x-2)² sin(12x-4)``
                       on [0, 1]; sources: its low fidelity
                       ``A f(x) + B (x - 0.5) - C`` with (A, B, C) =
                       (0.5, 10, -5) for source 0, the others with A ~
                       U[0.4, 0.6], B ~ U[5, 15], C ~ U[-7, -3]
``negative``      1    target: ``sin1d`` with s = 0; sources unrelated to
                       it: the negated target and random sums of four
                       cosines (negative transfer)
================  ===  ====================================================

The translated and scaled families follow the survey's benchmark protocol
(Bai et al. 2023); the shifted 1-D family is the synthetic family of Shilton et
al. (2017) and Joy et al. (2019); the Forrester pair is that of Forrester,
Sóbester and Keane (2008, §8.5). Each task's meta-features are its generating
parameters (δ and a; s; (A, B, C); an arbitrary code for the unrelated sources),
so that meta-feature kernels see the true relatedness.

The target's optimum is found by a dense Sobol search and L-BFGS-B polishing
(regret is measured against it).

References:
    Bai, T. et al. (2023). Transfer learning for Bayesian optimization: a survey.
    arXiv:2302.05927.

    Shilton, A., Gupta, S., Rana, S. and Venkatesh, S. (2017). Regret bounds for
    transfer learning in Bayesian optimisation. AISTATS.

    Joy, T. T., Rana, S., Gupta, S. and Venkatesh, S. (2019). A flexible transfer
    learning framework for Bayesian optimization with convergence guarantee.
    Expert Systems with Applications 115.

    Forrester, A., Sóbester, A. and Keane, A. (2008). Engineering Design via
    Surrogate Modelling. Wiley.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.stats import qmc

from ppbo.benchmarks.problems import (
    _HARTMANN3_A,
    _HARTMANN3_P,
    _branin,
    _forrester,
    _hartmann,
)

__all__ = ["TransferTask", "SourceData", "FAMILIES", "names", "make"]

FAMILIES = ("branin", "hartmann3", "sin1d", "forrester", "negative")
_INDEX = {name: i for i, name in enumerate(FAMILIES)}


@dataclasses.dataclass(frozen=True, eq=False)
class SourceData:
    """One source task's evaluations in the target's units.

    Attributes:
        name: the source's name.
        X: points (n, d).
        y: values (n,).
        meta_features: the task's generating parameters (f,).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    meta_features: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class TransferTask:
    """A target objective with its sources (minimised).

    Attributes:
        family: the family's name.
        seed: the seed it was drawn with.
        bounds: the box (d, 2).
        objective: the target, a function of points (m, d) -> values (m,).
        sources: the K sources.
        meta_features: the target's generating parameters (f,).
        optimum: the target's minimum over the box.
    """

    family: str
    seed: int
    bounds: np.ndarray
    objective: Callable[[np.ndarray], np.ndarray]
    sources: tuple[SourceData, ...]
    meta_features: np.ndarray
    optimum: float

    @property
    def dim(self) -> int:
        """The number of inputs."""
        return len(self.bounds)

    def regret(self, values: Any) -> np.ndarray:
        """Regret ``f(x) - f*`` of target values (minimisation).

        Example:
            >>> task = make("sin1d", 0, num_sources=2)
            >>> float(task.regret(task.optimum))
            0.0
        """
        return np.asarray(values, dtype=np.float64) - self.optimum


def names() -> list[str]:
    """The family names.

    Example:
        >>> names()[:2]
        ['branin', 'hartmann3']
    """
    return list(FAMILIES)


def _translated_scaled(base, bounds, params):
    delta, scale = params[:-1], params[-1]
    width = bounds[:, 1] - bounds[:, 0]

    def f(x):
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        return scale * base(x - delta * width)

    return f


def _sin1d(shift):
    def f(x):
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))[:, 0]
        return x * np.sin(x + np.pi + shift) + x / 10.0

    return f


def _forrester_low(A, B, C):
    def f(x):
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        return A * _forrester(x) + B * (x[:, 0] - 0.5) - C

    return f


def _cosines(rng):
    a = rng.normal(0.0, 2.0, 4)
    w = rng.uniform(0.2, 2.0, 4)
    phase = rng.uniform(0.0, 2 * np.pi, 4)

    def f(x):
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))[:, :1]
        return np.sum(a * np.cos(w * x + phase), axis=1)

    return f


def _hartmann3(x):
    return _hartmann(x, _HARTMANN3_A, _HARTMANN3_P)


def _tasks(family: str, rng: np.random.Generator, K: int):
    """The box, the target's (objective, meta) and K sources' (objective, meta)."""
    if family in ("branin", "hartmann3"):
        base, bounds = {
            "branin": (_branin, np.array([[-5.0, 10.0], [0.0, 15.0]])),
            "hartmann3": (_hartmann3, np.array([[0.0, 1.0]] * 3)),
        }[family]
        d = len(bounds)
        tasks = []
        for _ in range(K + 1):
            params = np.concatenate(
                [rng.uniform(-0.1, 0.1, d), [rng.uniform(0.9, 1.1)]]
            )
            tasks.append((_translated_scaled(base, bounds, params), params))
        return bounds, tasks[0], tasks[1:]
    if family == "sin1d":
        bounds = np.array([[0.0, 10.0]])
        shifts = [0.0] + [np.pi * i / 12 for i in range(1, K + 1)]
        return bounds, *_split([(_sin1d(s), np.array([s])) for s in shifts])
    if family == "forrester":
        bounds = np.array([[0.0, 1.0]])
        target = (lambda x: _forrester(np.atleast_2d(x)), np.array([1.0, 0.0, 0.0]))
        sources = []
        for k in range(K):
            if k == 0:
                A, B, C = 0.5, 10.0, -5.0
            else:
                A, B, C = rng.uniform(0.4, 0.6), rng.uniform(5, 15), rng.uniform(-7, -3)
            sources.append((_forrester_low(A, B, C), np.array([A, B, C])))
        return bounds, target, sources
    if family == "negative":
        bounds = np.array([[0.0, 10.0]])
        target = _sin1d(0.0)
        sources = [(lambda x: -target(x), np.array([1.0]))]
        sources += [(_cosines(rng), np.array([2.0 + k])) for k in range(K - 1)]
        return bounds, (target, np.array([0.0])), sources
    raise ValueError(f"family must be one of {list(FAMILIES)}, got {family!r}")


def _split(tasks):
    return tasks[0], tasks[1:]


def _minimum(f, bounds: np.ndarray, seed: int) -> float:
    d = len(bounds)
    unit = qmc.Sobol(d, scramble=True, seed=seed).random(2**12)
    X = bounds[:, 0] + unit * (bounds[:, 1] - bounds[:, 0])
    values = f(X)
    best = float(values.min())
    for i in np.argsort(values)[:5]:
        result = minimize(
            lambda x: float(f(x[None])[0]), X[i], method="L-BFGS-B", bounds=bounds
        )
        best = min(best, float(result.fun))
    return best


def make(
    family: str,
    seed: int,
    *,
    num_sources: int = 5,
    min_points: int = 20,
    max_points: int = 50,
) -> TransferTask:
    """Draw a family's target and sources from ``seed``.

    Args:
        family: one of :data:`FAMILIES`.
        seed: the draw's seed (the same seed gives the same tasks).
        num_sources: K.
        min_points, max_points: each source has ``n_k ~ U{min, ..., max}``
            evaluations at uniform random points of the box.

    Returns:
        A :class:`TransferTask`.

    Raises:
        ValueError: for an unknown family or bad sizes.

    Example:
        >>> task = make("sin1d", 0)
        >>> len(task.sources), task.sources[1].meta_features.tolist()
        (5, [0.5235987755982988])
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {list(FAMILIES)}, got {family!r}")
    if not 1 <= int(min_points) <= int(max_points) or int(num_sources) < 1:
        raise ValueError(
            f"need num_sources >= 1 and 1 <= min_points <= max_points, got "
            f"{num_sources}, {min_points}, {max_points}"
        )
    rng = np.random.default_rng([_INDEX[family], int(seed)])
    bounds, (target, meta), described = _tasks(family, rng, int(num_sources))
    sources = []
    for k, (f, params) in enumerate(described):
        n = int(rng.integers(min_points, max_points + 1))
        X = bounds[:, 0] + rng.random((n, len(bounds))) * (bounds[:, 1] - bounds[:, 0])
        sources.append(SourceData(f"{family}-{k}", X, f(X), np.asarray(params)))
    return TransferTask(
        family=family,
        seed=int(seed),
        bounds=bounds,
        objective=target,
        sources=tuple(sources),
        meta_features=np.asarray(meta, dtype=np.float64),
        optimum=_minimum(target, bounds, int(seed)),
    )
