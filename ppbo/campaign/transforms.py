"""Observations as the models see them: unit-cube inputs, standardised outputs.

Models, inference and acquisitions work in model space: inputs in [0, 1]^d and
outputs with zero mean and unit variance, to be maximised. :func:`standardize_outputs`
is the one output standardisation of ppbo (campaigns, :func:`ppbo.suggest` and the
benchmark methods use it); :func:`model_data` builds the padded
:class:`~ppbo.data.Dataset` a step fits.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import numpy as np

from ppbo.data import Dataset, bucket_capacity
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "Standardized",
    "standardize_outputs",
    "standardize",
    "model_data",
    "task_view",
]

# Campaigns start in a 32-row bucket: padding costs microseconds at this size, and
# a typical campaign of a few dozen evaluations then compiles its fit and
# acquisition once instead of once per 8 new points.
MIN_CAPACITY = 32


class Standardized(NamedTuple):
    """Standardised outputs and the map back: ``value = sign * (shift + scale * y)``.

    Attributes:
        y: the standardised outputs (n,), to be maximised.
        shift: mean of the signed values, in the user's units.
        scale: standard deviation of the signed values (1 for a constant vector).
    """

    y: np.ndarray
    shift: float
    scale: float


def standardize_outputs(
    values: Any, maximize: bool = True, *, scale: bool = True
) -> Standardized:
    """Turn observed values into model outputs: signed, centred and scaled.

    Infinite values are clipped to the range of the finite ones. Values are first
    divided by their largest magnitude, so that values up to the largest float64
    do not overflow the mean and the standard deviation.

    Args:
        values: observed values (n,) in the user's units; at least one finite.
        maximize: False flips the sign (minimisation problems).
        scale: False only flips the sign (e.g. for known hyperparameters given
            in the problem's units).

    Returns:
        A :class:`Standardized`.

    Raises:
        ValueError: if no value is finite.

    Example:
        >>> standardize_outputs([1.0, 2.0, 3.0], maximize=False).y
        array([ 1.22474487,  0.        , -1.22474487])
    """
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        raise ValueError(f"values must include a finite value, got {values!r}")
    values = np.clip(values, values[finite].min(), values[finite].max())
    sign = 1.0 if maximize else -1.0
    if not scale:
        return Standardized(sign * values, 0.0, 1.0)
    magnitude = float(np.max(np.abs(values)))
    magnitude = magnitude if magnitude > 0 else 1.0
    signed = sign * (values / magnitude)
    shift, spread = float(signed.mean()), float(signed.std())
    spread = spread if spread > 0 else 1.0
    return Standardized(
        (signed - shift) / spread, shift * magnitude, spread * magnitude
    )


def standardize(y: Any, maximize: bool = True) -> np.ndarray:
    """Outputs as the models see them: zero mean, unit variance, to be maximised.

    The array of :func:`standardize_outputs`.

    Args:
        y: observed values (n,) in the user's units.
        maximize: False flips the sign first (minimisation problems).

    Returns:
        Standardised values; a constant vector maps to zeros.

    Example:
        >>> standardize([1.0, 2.0, 3.0], maximize=False)
        array([ 1.22474487,  0.        , -1.22474487])
    """
    return standardize_outputs(y, maximize).y


def model_data(
    X: Any,
    values: Any,
    maximize: bool = True,
    *,
    scale: bool = True,
    task: Any = None,
) -> tuple[Dataset, Standardized]:
    """The padded :class:`~ppbo.data.Dataset` of unit-cube inputs and values.

    Args:
        X: inputs in the unit cube, shape (n, d).
        values: observed values (n,) in the user's units.
        maximize: the direction of the problem.
        scale: see :func:`standardize_outputs`.
        task: task ids (n,) for multi-task surrogates (None: task 0); all
            tasks share one standardisation.

    Returns:
        The dataset (capacity a bucket of at least 32 rows, so that a campaign
        compiles once) and its :class:`Standardized` outputs.

    Example:
        >>> data, out = model_data([[0.1], [0.9]], [3.0, 1.0], maximize=False)
        >>> data.n, data.capacity, out.y.round(12).tolist()
        (2, 32, [-1.0, 1.0])
    """
    out = standardize_outputs(values, maximize, scale=scale)
    capacity = bucket_capacity(len(out.y), minimum=MIN_CAPACITY)
    X = np.asarray(X, dtype=np.float64)
    return Dataset(X, out.y, task=task, capacity=capacity), out


@functools.cache
def _task_surrogate(surrogate: Surrogate, task: int) -> Surrogate:
    # one view per surrogate and task: compiled acquisitions are cached per object
    joint = surrogate.predict_joint
    return dataclasses.replace(
        surrogate,
        predict=functools.partial(surrogate.predict, task=task),
        predict_joint=None if joint is None else functools.partial(joint, task=task),
        name=f"{surrogate.name}[task={task}]",
    )


def task_view(posterior: Posterior, task: int) -> Posterior:
    """The posterior of a multi-task surrogate as seen from one task.

    Its predictions are those of task ``task`` (``predict(..., task=task)``), so
    that an acquisition, which predicts without a task, scores that task's
    objective; samples, data and cached factors are shared.

    Example:
        >>> task_view(posterior, 0).surrogate.name
        'gp(matern52, constant)[task=0]'
    """
    return Posterior(
        _task_surrogate(posterior.surrogate, int(task)),
        posterior.samples,
        posterior.data,
        cache=posterior.cache,
        sample_stats=posterior.sample_stats,
        state=posterior.state,
        num_chains=posterior.num_chains,
        method=posterior.method,
    )
