"""One Bayesian-optimisation step in model space: fit, then maximise an acquisition.

:func:`suggest` is the functional core of a campaign: given observations in model
space (inputs in the unit cube, outputs standardised and to be maximised) it fits
the surrogate's hyperparameter posterior (warm-started from the previous one) and
returns the maximiser of the marginalised acquisition. The ask/tell ``Optimizer``
and its storage build on it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from ppbo.acquisition.base import Acquisition
from ppbo.data import Dataset
from ppbo.inference import fit
from ppbo.optimize import optimize_acquisition
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["Suggestion", "suggest", "standardize"]


class Suggestion(NamedTuple):
    """The result of :func:`suggest`.

    Attributes:
        X: suggested points in the unit cube, shape (q, d).
        values: their acquisition values, shape (q,).
        posterior: the posterior the acquisition was computed from.
    """

    X: np.ndarray
    values: np.ndarray
    posterior: Posterior


def standardize(y: Any, maximize: bool = True) -> np.ndarray:
    """Outputs as the models see them: zero mean, unit variance, to be maximised.

    Args:
        y: observed values (n,) in the user's units.
        maximize: False flips the sign first (minimisation problems).

    Returns:
        Standardised values; a constant vector maps to zeros.

    Example:
        >>> standardize([1.0, 2.0, 3.0], maximize=False)
        array([ 1.22474487,  0.        , -1.22474487])
    """
    y = np.asarray(y, dtype=np.float64)
    if not maximize:
        y = -y
    scale = y.std()
    return (y - y.mean()) / (scale if scale > 0 else 1.0)


def suggest(
    key: jax.Array,
    surrogate: Surrogate,
    inference: Any,
    acquisition: Acquisition,
    data: Dataset,
    *,
    init: Posterior | None = None,
    q: int = 1,
    pending: Any = None,
    optimizer_options: dict | None = None,
    **options: Any,
) -> Suggestion:
    """Fit the surrogate to ``data`` and maximise the acquisition.

    Args:
        key: PRNG key; split into one for the fit and one for the optimiser.
        surrogate: e.g. ``ppbo.models.gp.surrogate()``.
        inference: ``ppbo.NUTS(...)``, ``ppbo.Slice(...)``, ``ppbo.MAP()`` ...
        acquisition: e.g. ``ppbo.acquisition.ei``.
        data: observations in model space (unit cube, standardised, maximise).
        init: the previous step's posterior, for warm starts.
        q: number of points to suggest.
        pending: points already under evaluation, (k, d).
        optimizer_options: passed to :func:`ppbo.optimize_acquisition`
            (``num_raw``, ``num_restarts``, ``max_iterations``).
        **options: passed to the acquisition.

    Returns:
        A :class:`Suggestion`.

    Example:
        >>> step = suggest(
        ...     key, posterior.surrogate, ppbo.MAP(), ppbo.acquisition.ei, data,
        ...     optimizer_options={"num_raw": 64},
        ... )
        >>> step.X.shape
        (1, 2)
    """
    key_fit, key_opt = jax.random.split(key)
    posterior = fit(surrogate, data, inference, key_fit, init=init)
    X, values = optimize_acquisition(
        acquisition,
        posterior,
        key_opt,
        q=q,
        pending=pending,
        **(optimizer_options or {}),
        **options,
    )
    return Suggestion(X=X, values=values, posterior=posterior)
