"""Initial designs on the unit cube.

Latin hypercube sampling (McKay, Beckman and Conover 1979), scrambled Sobol
points (Sobol' 1967; Owen 1998), or uniform points: one function for the
campaign's own design and the benchmarks' shared design. With source tasks, the
meta-learned warm start of Feurer, Springenberg and Hutter (2015): the best
points of the most similar sources (:func:`source_design`).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from scipy.stats import qmc

__all__ = ["DESIGNS", "initial_design", "source_design"]

#: The designs a campaign can be created with; ``"sources"`` needs sources.
DESIGNS = ("lhs", "sobol", "random", "sources")


def initial_design(kind: str, n: int, d: int, seed: int | Sequence[int]) -> np.ndarray:
    """``n`` design points in [0, 1]^d.

    Args:
        kind: ``"lhs"``, ``"sobol"`` or ``"random"``.
        n: number of points.
        d: input dimension.
        seed: an integer (scipy's ``seed``), or a sequence of integers (e.g.
            ``[stream, seed]``) seeding ``numpy.random.default_rng``.

    Returns:
        (n, d) points; the same arguments give the same points.

    Raises:
        ValueError: for an unknown ``kind``.

    Example:
        >>> U = initial_design("lhs", 3, 2, seed=0)
        >>> np.sort(np.floor(3 * U), axis=0).tolist()
        [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    """
    rng = np.random.default_rng(seed)
    # an integer seed goes to scipy's legacy ``seed`` argument, as campaigns
    # stored before this module did, so that their designs stay the same
    legacy = isinstance(seed, numbers.Integral)
    source = {"seed": int(seed)} if legacy else {"rng": rng}
    if kind == "lhs":
        return qmc.LatinHypercube(d, **source).random(n)
    if kind == "sobol":
        return qmc.Sobol(d, scramble=True, **source).random(n)
    if kind == "random":
        return rng.random((n, d))
    if kind == "sources":
        raise ValueError(
            "initial_design='sources' is built from the campaign's sources: "
            "use source_design"
        )
    raise ValueError(f"initial_design must be one of {DESIGNS}, got {kind!r}")


def source_design(
    X: np.ndarray,
    y: np.ndarray,
    ids: np.ndarray,
    n: int,
    fallback: np.ndarray,
    *,
    meta_features: np.ndarray | None = None,
    target_meta_features: np.ndarray | None = None,
) -> np.ndarray:
    """The warm-start design: the best points of the sources nearest the target.

    Feurer, Springenberg and Hutter (2015), "Initializing Bayesian
    hyperparameter optimization via meta-learning" (AAAI), Algorithm 1: order the
    source tasks by the distance of their meta-features to the target's (their
    eq. (1), the L1 distance; each meta-feature here is first divided by its range
    over the sources and the target, so that features in different units weigh
    alike) and evaluate the best known point of the nearest source first, of the
    second nearest next, and so on. When ``n`` exceeds the number of sources the
    order repeats with each source's second best point, then its third, ...
    Without meta-features the sources keep the order they were given in. A point
    already in the design is skipped; when the sources run out, the rest of the
    design is ``fallback``'s rows at the same positions.

    Args:
        X: (m, d) the sources' points in the unit cube.
        y: (m,) their values, larger is better (the campaign's model space).
        ids: (m,) the source of each row, ``0 ... K - 1``.
        n: the design size.
        fallback: (n, d) the space-filling design whose rows fill the slots the
            sources cannot.
        meta_features: (K, f) the sources' meta-features, or None.
        target_meta_features: (f,) the target's, or None.

    Returns:
        (n, d) design points; the same arguments give the same points.

    Example:
        >>> X = np.array([[0.1], [0.2], [0.8], [0.9]])
        >>> y = np.array([1.0, 2.0, 5.0, 0.0])
        >>> ids = np.array([0, 0, 1, 1])
        >>> source_design(X, y, ids, 3, np.full((3, 1), 0.5),
        ...               meta_features=np.array([[0.0], [3.0]]),
        ...               target_meta_features=np.array([2.5])).ravel().tolist()
        [0.8, 0.2, 0.9]
    """
    X, y, ids = np.asarray(X, np.float64), np.asarray(y, np.float64), np.asarray(ids)
    K = int(ids.max()) + 1 if ids.size else 0
    order = np.arange(K)
    if meta_features is not None and target_meta_features is not None and K:
        rows = np.vstack(
            [
                np.asarray(meta_features, np.float64),
                np.asarray(target_meta_features, np.float64)[None],
            ]
        )
        span = np.ptp(rows, axis=0)
        scaled = rows / np.where(span > 0, span, 1.0)
        distance = np.abs(scaled[:-1] - scaled[-1]).sum(axis=1)
        order = np.argsort(distance, kind="stable")
    # each source's rows, best first (ties by position, so the order is fixed)
    ranked = [
        np.flatnonzero(ids == k)[np.argsort(-y[ids == k], kind="stable")] for k in order
    ]
    design = np.array(fallback, dtype=np.float64, copy=True)
    chosen: list[np.ndarray] = []
    depth = 0
    while len(chosen) < n and any(depth < len(r) for r in ranked):
        for rows_k in ranked:
            if len(chosen) == n or depth >= len(rows_k):
                continue
            point = X[rows_k[depth]]
            if not any(np.allclose(point, c, rtol=0.0, atol=1e-12) for c in chosen):
                chosen.append(point)
        depth += 1
    for i, point in enumerate(chosen):
        design[i] = point
    return design
