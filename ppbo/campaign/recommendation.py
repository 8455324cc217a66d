"""Recommendations in the user's units: the minimiser of the posterior mean.

The PES paper recommends the maximiser of the posterior-mixture mean
(Hernández-Lobato, Hoffman and Ghahramani 2014, §4); :func:`recommend_params`
finds it in model space with :func:`ppbo.recommend` and maps it, with its predicted
mean and standard deviation, back to the user's units and direction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax

from ppbo.campaign.transforms import task_view
from ppbo.space import Space
from ppbo.surrogate import Posterior

__all__ = ["Recommended", "recommend_params"]


class Recommended(NamedTuple):
    """A recommendation in the user's units.

    Attributes:
        params: the maximiser (minimiser) of the posterior-mixture mean.
        mean: the predicted objective there (latent, noise-free).
        sd: the predictive standard deviation of the latent objective there.
    """

    params: dict
    mean: float
    sd: float


def recommend_params(
    posterior: Posterior,
    standardization: tuple[float, float],
    space: Space,
    direction: str,
    key: jax.Array,
    *,
    task: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> Recommended:
    """Return the optimiser of the posterior-mixture mean in the user's units.

    Args:
        posterior: fitted in model space (outputs standardised, maximised).
        standardization: ``(shift, scale)`` of the model outputs
            (:class:`~ppbo.campaign.transforms.Standardized`).
        space: the search space.
        direction: ``"minimize"`` or ``"maximize"``.
        key: PRNG key of the optimiser.
        task: the task of a multi-task posterior (None for one task).
        options: passed to :func:`ppbo.recommend` (``num_raw`` ...).

    Example:
        >>> import ppbo
        >>> space = ppbo.Space({"x1": ppbo.Real(0, 1), "x2": ppbo.Real(0, 1)})
        >>> rec = recommend_params(posterior, (0.0, 1.0), space, "maximize", key,
        ...                        options={"num_raw": 64})
        >>> sorted(rec.params)
        ['x1', 'x2']
    """
    from ppbo.optimize import recommend

    if task is not None:
        posterior = task_view(posterior, task)
    rec = recommend(posterior, key, **dict(options or {}))
    params = space.from_unit(rec.x_mean)
    mean, var = posterior.predict_marginal(space.to_unit(params)[None])
    shift, scale = standardization
    sign = 1.0 if direction == "maximize" else -1.0
    return Recommended(
        params=params,
        mean=float(sign * (shift + scale * float(mean[0]))),
        sd=float(scale * math.sqrt(max(float(var[0]), 0.0))),
    )
