"""Space-filling initial designs on the unit cube.

Latin hypercube sampling (McKay, Beckman and Conover 1979), scrambled Sobol
points (Sobol' 1967; Owen 1998), or uniform points. One function for the
campaign's own design and the benchmarks' shared design.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from scipy.stats import qmc

__all__ = ["DESIGNS", "initial_design"]

DESIGNS = ("lhs", "sobol", "random")


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
    raise ValueError(f"initial_design must be one of {DESIGNS}, got {kind!r}")
