"""A campaign's trials: as a table, as model-space data, and their told outcomes.

The functions here read and write trials through a :class:`ppbo.storage.Storage`
and a :class:`ppbo.Space`; the :class:`~ppbo.campaign.optimizer.Optimizer` is a
façade over them. Told values follow the campaign semantics of ppbo: NaN marks a
trial FAILED (kept, excluded from the model), ``+-inf`` completes it and the model
sees it clipped to the range of the finite values.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ppbo.campaign.transforms import model_data
from ppbo.campaign.validation import check_value
from ppbo.data import Dataset
from ppbo.space import Space
from ppbo.storage.base import Trial, TrialState

__all__ = [
    "CampaignWarning",
    "trials_frame",
    "best_trial",
    "complete_data",
    "pending_points",
    "finish",
]


class CampaignWarning(UserWarning):
    """Something a campaign did with a told value that the user should know."""


def trials_frame(trials: list[Trial], names: list[str]):
    """Return the trials as a pandas DataFrame, like Optuna's ``trials_dataframe()``.

    One row per trial, one ``params_<name>`` column per parameter of ``names``.

    Example:
        >>> trials_frame([], ["x"]).columns.tolist()[:5]
        ['number', 'state', 'value', 'origin', 'params_x']
    """
    import pandas as pd

    rows = [
        {"number": t.number, "state": t.state, "value": t.value, "origin": t.origin}
        | {f"params_{k}": v for k, v in t.params.items()}
        | {
            "created": t.created,
            "finished": t.finished,
            "iteration": t.iteration,
            "message": t.message,
        }
        for t in trials
    ]
    columns = ["number", "state", "value", "origin"]
    columns += [f"params_{k}" for k in names]
    columns += ["created", "finished", "iteration", "message"]
    return pd.DataFrame(rows, columns=columns)


def best_trial(trials: list[Trial], direction: str) -> Trial | None:
    """Return the COMPLETE trial with the best value (the first of ties), or None.

    Example:
        >>> best_trial([], "minimize") is None
        True
    """
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        return None
    sign = 1.0 if direction == "minimize" else -1.0
    return min(complete, key=lambda t: (sign * t.value, t.number))


def complete_data(
    trials: list[Trial], space: Space, direction: str, multitask: bool
) -> tuple[Dataset | None, tuple[float, float]]:
    """Return the COMPLETE trials in model space and the standardisation.

    Args:
        trials: the campaign's trials (other states are left out).
        space: the search space (inputs go to the unit cube).
        direction: ``"minimize"`` or ``"maximize"``.
        multitask: whether the data carry each trial's task id.

    Returns:
        ``(data, (shift, scale))``; ``data`` is None until a trial has completed
        with a finite value.

    Example:
        >>> import ppbo
        >>> complete_data([], ppbo.Space({"x": ppbo.Real(0, 1)}), "minimize", False)
        (None, (0.0, 1.0))
    """
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    values = np.array([t.value for t in complete], dtype=np.float64)
    if not np.isfinite(values).any():
        return None, (0.0, 1.0)
    X = np.stack([space.to_unit(t.params) for t in complete])
    tasks = None
    if multitask:
        tasks = np.array([t.task or 0 for t in complete], dtype=np.int64)
    data, out = model_data(X, values, direction == "maximize", task=tasks)
    return data, (out.shift, out.scale)


def pending_points(
    trials: list[Trial], space: Space
) -> tuple[list[np.ndarray], list[int | None]]:
    """Return the RUNNING trials' unit-cube points and their tasks.

    Example:
        >>> import ppbo
        >>> pending_points([], ppbo.Space({"x": ppbo.Real(0, 1)}))
        ([], [])
    """
    running = [t for t in trials if t.state == TrialState.RUNNING]
    return [space.to_unit(t.params) for t in running], [t.task for t in running]


def finish(
    storage: Any,
    campaign: Any,
    number: int,
    value: Any,
    *,
    failed: bool = False,
    message: str | None = None,
) -> Trial:
    """Record a trial's outcome in ``storage``: COMPLETE with ``value``, or FAILED.

    Args:
        storage: the campaign's :class:`ppbo.storage.Storage`.
        campaign: the stored campaign (its ``id`` and ``name``).
        number: the trial's number.
        value: the objective value; NaN marks the trial FAILED with a
            :class:`CampaignWarning`, ``+-inf`` completes it with one.
        failed: mark the trial FAILED instead (``value`` must be None).
        message: an optional note kept with the trial.

    Raises:
        ValueError: for a value and ``failed=True`` together, no value, or a value
            that is not a real scalar (see :func:`~ppbo.campaign.validation.check_value`).

    Example:
        >>> import ppbo
        >>> storage = ppbo.storage.SQLiteStorage(":memory:")
        >>> campaign = storage.create_campaign("demo", {})
        >>> (trial,) = storage.add_trials(campaign.id, [{"params": {"x": 0.5}}])
        >>> finish(storage, campaign, trial.number, 2.0).state
        'COMPLETE'
    """  # noqa: E501
    if failed:
        if value is not None:
            raise ValueError(
                f"tell(trial {number}) got value={value!r} and failed=True; "
                "give one of them"
            )
        return _finish(storage, campaign, number, TrialState.FAILED, None, message)
    if value is None:
        raise ValueError(
            f"tell(trial {number}) needs a value (or failed=True / abandon())"
        )
    value = check_value(value)
    if math.isnan(value):
        warnings.warn(
            f"trial {number}: the objective returned NaN; the trial is marked FAILED "
            "and excluded from the model",
            CampaignWarning,
            stacklevel=3,
        )
        message = message or "objective returned NaN"
        return _finish(storage, campaign, number, TrialState.FAILED, None, message)
    if math.isinf(value):
        warnings.warn(
            f"trial {number}: value {value} is stored as told; the model sees it "
            "clipped to the range of the finite values",
            CampaignWarning,
            stacklevel=3,
        )
    return _finish(storage, campaign, number, TrialState.COMPLETE, value, message)


def _finish(storage, campaign, number, state, value, message) -> Trial:
    return storage.finish_trial(campaign.id, number, state, value, message)
