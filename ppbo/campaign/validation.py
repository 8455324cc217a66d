"""Checks of what a user hands a campaign, each error naming the field and value.

The :class:`~ppbo.campaign.optimizer.Optimizer` calls these before it stores or
computes anything, so bad input never reaches the storage or a compiled function.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.campaign.designs import DESIGNS
from ppbo.storage.base import Trial

__all__ = [
    "DIRECTIONS",
    "check_value",
    "check_arguments",
    "check_acquisition",
    "check_count",
    "check_task",
    "trial_number",
]

DIRECTIONS = ("minimize", "maximize")


def check_value(value: Any) -> float:
    """Return a told objective value as a float (NaN and +-inf pass; callers decide).

    Raises:
        ValueError: for arrays that are not scalars, floats that are not float64,
            booleans and anything that is not a real number.

    Example:
        >>> import numpy as np
        >>> check_value(np.float64(1.5))
        1.5
        >>> check_value(np.float32(1.5))
        Traceback (most recent call last):
        ...
        ValueError: value must be float64, got float32 value np.float32(1.5); pass float(value)
    """  # noqa: E501
    if isinstance(value, np.ndarray | jax.Array):
        if value.shape != ():
            raise ValueError(
                f"value must be a scalar, got an array of shape {value.shape}"
            )
        if isinstance(value, jax.Array):
            if value.dtype != np.float64 and jnp.issubdtype(value.dtype, jnp.floating):
                raise ValueError(
                    f"value must be float64, got {value.dtype} value {value!r}; pass "
                    "float(value)"
                )
            value = value.item()
        else:
            value = value[()]
    if isinstance(value, np.floating) and value.dtype != np.float64:
        raise ValueError(
            f"value must be float64, got {value.dtype.name} value {value!r}; pass "
            "float(value)"
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"value must be a real number, got {value!r}")
    return float(value)


def _is_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def check_arguments(direction, initial_design, n_initial, seed, name) -> None:
    """Check the scalar arguments of a new campaign.

    Raises:
        ValueError: naming the first invalid argument and its value.

    Example:
        >>> check_arguments("minimize", "lhs", None, 0, None)
        >>> check_arguments("down", "lhs", None, 0, None)
        Traceback (most recent call last):
        ...
        ValueError: direction must be one of ('minimize', 'maximize'), got 'down'
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if initial_design not in DESIGNS:
        raise ValueError(
            f"initial_design must be one of {DESIGNS}, got {initial_design!r}"
        )
    if n_initial is not None:
        if not _is_int(n_initial):
            raise ValueError(f"n_initial must be an integer >= 0, got {n_initial!r}")
        if n_initial < 0:
            raise ValueError(f"n_initial must be >= 0, got {n_initial!r}")
    if not _is_int(seed):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string, got {name!r}")


def check_acquisition(
    surrogate, acquisition, acquisition_samples, acquisition_options=None
) -> None:
    """Check that ``surrogate`` offers what ``acquisition`` needs.

    For the GP-Hedge portfolio (``"gp_hedge"``) its options are checked and every
    base acquisition's needs.

    Raises:
        ppbo.MissingCapabilityError: naming the missing capability.
        ValueError: for ``acquisition_samples`` that is not a positive integer, or
            invalid portfolio options.

    Example:
        >>> from ppbo import acquisition
        >>> from ppbo.models import gp
        >>> check_acquisition(gp.surrogate(), acquisition.log_ei, None)
    """
    from ppbo import acquisition as module

    surrogate.require(*acquisition.requires, by=f"acquisition {acquisition.name!r}")
    check_explore_below(dict(acquisition_options or {}).get("explore_below"))
    if acquisition is module.gp_hedge:
        from ppbo.campaign.portfolio import check_hedge_options

        for arm in check_hedge_options(acquisition_options)["acquisitions"]:
            requires = getattr(module, arm).requires
            surrogate.require(*requires, by=f"acquisition {arm!r} of 'gp_hedge'")
    if acquisition_samples is not None and (
        not _is_int(acquisition_samples) or acquisition_samples < 1
    ):
        raise ValueError(
            "acquisition_samples must be a positive integer or None, got "
            f"{acquisition_samples!r}"
        )


def check_explore_below(value: Any) -> float | None:
    """Return ``acquisition_options["explore_below"]``: a positive number or None.

    Example:
        >>> check_explore_below(1e-3), check_explore_below(None)
        (0.001, None)
        >>> check_explore_below(-1)
        Traceback (most recent call last):
        ...
        ValueError: acquisition_options['explore_below'] must be a positive ... got -1
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            "acquisition_options['explore_below'] must be a positive number or None "
            f"(off), got {value!r}"
        )
    return float(value)


def check_count(n: Any) -> int:
    """Return the batch size of an ask (``None`` means one trial).

    Example:
        >>> check_count(None), check_count(3)
        (1, 3)
        >>> check_count(0)
        Traceback (most recent call last):
        ...
        ValueError: n must be >= 1, got 0
    """
    count = 1 if n is None else n
    if not _is_int(count):
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if count < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return int(count)


def check_task(task: Any, num_tasks: int | None, campaign: str, surrogate: str):
    """Return the task of an ask or tell: None for single-task surrogates.

    Args:
        task: the task the user gave (None: task 0 of a multi-task campaign).
        num_tasks: the surrogate's number of tasks, None for a single task.
        campaign, surrogate: names, for the messages.

    Example:
        >>> check_task(None, 3, "c", "multitask_gp"), check_task(None, None, "c", "gp")
        (0, None)
        >>> check_task(3, 3, "c", "multitask_gp")
        Traceback (most recent call last):
        ...
        ValueError: task must be an integer in [0, 3), got 3
    """
    if num_tasks is None:
        if task is not None:
            raise ValueError(
                f"task={task!r} needs a multi-task surrogate (e.g. 'multitask_gp'); "
                f"campaign {campaign!r} has {surrogate}"
            )
        return None
    task = 0 if task is None else task
    if not _is_int(task) or not 0 <= task < num_tasks:
        raise ValueError(f"task must be an integer in [0, {num_tasks}), got {task!r}")
    return int(task)


def trial_number(trial: Any) -> int:
    """Return the number of a :class:`~ppbo.storage.Trial` or of an integer id.

    Example:
        >>> trial_number(4)
        4
        >>> trial_number("4")
        Traceback (most recent call last):
        ...
        ValueError: trial must be a Trial or an integer id, got '4'
    """
    number = trial.number if isinstance(trial, Trial) else trial
    if not _is_int(number):
        raise ValueError(f"trial must be a Trial or an integer id, got {trial!r}")
    return int(number)
