"""Run a campaign on a Python objective: :func:`run`, :func:`minimize` and co.

:func:`run` is the one objective loop of ppbo: it evaluates the trials an
:class:`~ppbo.campaign.optimizer.Optimizer` asks for until the campaign holds its
budget of finished trials, records failures, and reports each evaluation to a
progress callback. :func:`minimize` / :func:`maximize` and the ``ppbo`` command's
``run`` and ``resume`` use it.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ppbo.campaign.optimizer import CampaignWarning, Optimizer, Recommended
from ppbo.storage.base import Trial, TrialState

__all__ = ["Result", "run", "minimize", "maximize"]


class Result(NamedTuple):
    """The outcome of :func:`minimize` / :func:`maximize`.

    Attributes:
        best_params: parameters of the best COMPLETE trial.
        best_value: its value.
        recommended: the posterior-mean recommendation (:class:`Recommended`),
            or None when the model could not be fitted.
        trials: every trial, as a table.
        optimizer: the :class:`Optimizer` (to continue the campaign).
    """

    best_params: dict | None
    best_value: float | None
    recommended: Recommended | None
    trials: Any
    optimizer: Optimizer


def run(
    opt: Optimizer,
    objective: Callable[[Trial], Any],
    budget: int,
    *,
    rerun_running: bool = False,
    callback: Callable[[Optimizer, Trial], Any] | None = None,
) -> None:
    """Evaluate asked trials until ``opt`` holds ``budget`` finished trials.

    An exception raised by ``objective`` marks the trial FAILED (its message
    kept, a :class:`~ppbo.CampaignWarning` issued); NaN too (see
    :meth:`Optimizer.tell`).

    Args:
        opt: the campaign.
        objective: called with each RUNNING trial; returns its value.
        budget: total number of finished (COMPLETE, FAILED, ABANDONED) trials.
        rerun_running: first evaluate the trials left RUNNING by an earlier
            process.
        callback: progress report, called as ``callback(opt, trial)`` with the
            told trial after each evaluation.

    Raises:
        ValueError: for a budget that is not a positive integer.

    Example:
        >>> opt = ppbo.Optimizer({"x": ppbo.Real(0.0, 1.0)}, n_initial=2)
        >>> run(opt, lambda trial: trial.params["x"], budget=2)
        >>> len(opt.get_trials("COMPLETE"))
        2
    """
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise ValueError(f"budget must be a positive integer, got {budget!r}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget!r}")

    def evaluate(trial: Trial) -> None:
        try:
            value = objective(trial)
        except Exception as error:  # the objective's own failure: record it
            warnings.warn(
                f"trial {trial.number}: the objective raised {error!r}; marked FAILED",
                CampaignWarning,
                stacklevel=3,
            )
            trial = opt.tell(trial, failed=True, message=repr(error))
        else:
            trial = opt.tell(trial, value)
        if callback is not None:
            callback(opt, trial)

    if rerun_running:
        for trial in opt.get_trials(TrialState.RUNNING):
            evaluate(trial)
    while len(opt.get_trials(TrialState.FINISHED)) < budget:
        evaluate(opt.ask())


def _run(
    fn: Callable[[dict], Any],
    space: Any,
    budget: int,
    direction: str,
    rerun_running: bool,
    callback: Callable[[Optimizer, Trial], Any] | None,
    recommend_options: Mapping[str, Any] | None,
    kwargs: dict,
) -> Result:
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise ValueError(f"budget must be a positive integer, got {budget!r}")
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget!r}")
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {fn!r}")
    kwargs.setdefault("load_if_exists", True)
    opt = Optimizer(space, direction=direction, **kwargs)
    run(
        opt,
        lambda trial: fn(dict(trial.params)),
        budget,
        rerun_running=rerun_running,
        callback=callback,
    )
    best = opt.best_trial
    try:
        recommended = opt.recommend(**dict(recommend_options or {}))
    except ValueError:
        recommended = None
    return Result(
        best_params=None if best is None else dict(best.params),
        best_value=None if best is None else best.value,
        recommended=recommended,
        trials=opt.trials,
        optimizer=opt,
    )


def minimize(
    fn: Callable[[dict], Any],
    space: Any,
    budget: int,
    *,
    rerun_running: bool = False,
    callback: Callable[[Optimizer, Trial], Any] | None = None,
    recommend_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Result:
    """Minimise ``fn(params) -> float`` over ``space`` with ``budget`` evaluations.

    The campaign runs until it holds ``budget`` finished (COMPLETE, FAILED or
    ABANDONED) trials, so calling it again with the same ``storage`` and ``name``
    resumes a stopped campaign. An exception raised by ``fn`` marks the trial
    FAILED (its message kept, a :class:`CampaignWarning` issued); NaN too.

    Args:
        fn: the objective, called with a dict of parameters.
        space: a :class:`ppbo.Space` or mapping of name -> dimension.
        budget: total number of finished trials.
        rerun_running: evaluate trials left RUNNING by an earlier process first.
        callback: called as ``callback(optimizer, trial)`` after each evaluation.
        recommend_options: passed to :meth:`Optimizer.recommend`.
        **kwargs: :class:`Optimizer` arguments (``storage``, ``name``, ``seed``,
            ``acquisition``, ...); an existing campaign ``name`` is loaded.

    Returns:
        A :class:`Result`.

    Example:
        >>> result = minimize(lambda p: (p["x"] - 0.3) ** 2,
        ...                   {"x": ppbo.Real(0.0, 1.0)}, budget=4,
        ...                   inference=ppbo.MAP(num_restarts=2),
        ...                   optimizer_options={"num_raw": 32, "num_restarts": 2})
        >>> len(result.trials), result.best_value < 0.1
        (4, True)
    """
    options = (rerun_running, callback, recommend_options)
    return _run(fn, space, budget, "minimize", *options, kwargs)


def maximize(
    fn: Callable[[dict], Any],
    space: Any,
    budget: int,
    *,
    rerun_running: bool = False,
    callback: Callable[[Optimizer, Trial], Any] | None = None,
    recommend_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Result:
    """Maximise ``fn(params) -> float``; see :func:`minimize`.

    Example:
        >>> result = maximize(lambda p: -abs(p["n"] - 2), {"n": ppbo.Integer(0, 5)},
        ...                   budget=3, inference=ppbo.MAP(num_restarts=2))
        >>> result.best_value <= 0
        True
    """
    options = (rerun_running, callback, recommend_options)
    return _run(fn, space, budget, "maximize", *options, kwargs)
