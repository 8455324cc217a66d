"""What a campaign asks next: design points, random points or one BO step.

:func:`propose` turns a campaign's configuration (:class:`Setup`) and its trials
into the rows of the next trials: the first ``n_initial`` come from the initial
design (trial ``i`` gets design point ``i``), then uniformly random points until a
trial has completed with a finite value, then the suggestions of
:func:`ppbo.campaign.step.step` with RUNNING trials as pending points (the Kriging
believer of Ginsbourger, Le Riche and Carraro 2010).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import numpy as np

from ppbo.acquisition.base import Acquisition
from ppbo.campaign.designs import initial_design, source_design
from ppbo.campaign.keys import campaign_key
from ppbo.campaign.portfolio import hedge_step, latest_record
from ppbo.campaign.step import step
from ppbo.campaign.transfer import Model, Transfer
from ppbo.campaign.transforms import task_view
from ppbo.campaign.trials import complete_data, pending_points
from ppbo.space import Real, Space
from ppbo.storage.base import Trial, TrialState
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["Setup", "propose"]


@dataclasses.dataclass(frozen=True)
class Setup:
    """A campaign's components and settings, as its stored configuration says.

    Attributes:
        space: the search space.
        surrogate, inference, acquisition: the resolved components.
        config: the stored configuration (JSON), see
            :class:`~ppbo.campaign.optimizer.Optimizer`.
        transfer: the campaign's source tasks
            (:class:`~ppbo.campaign.transfer.Transfer`), None without sources.
    """

    space: Space
    surrogate: Surrogate
    inference: Any
    acquisition: Acquisition
    config: Mapping[str, Any]
    transfer: Transfer | None = None

    @property
    def direction(self) -> str:
        """``"minimize"`` or ``"maximize"``."""
        return self.config["direction"]

    @property
    def num_tasks(self) -> int | None:
        """The number of tasks of a multi-task surrogate, None for one task."""
        # declared by multi-task surrogates (models/multitask_gp.py's extras);
        # with sources, the tasks of the ICM model are the campaign's own business
        if self.transfer is not None:
            return None
        num = self.surrogate.extras.get("num_tasks")
        return None if num is None else int(num)

    @property
    def acquisition_samples(self) -> int | None:
        """How many posterior samples the acquisition averages over (None: the
        step's default, :data:`ppbo.campaign.step.ACQUISITION_SAMPLES` of a
        larger posterior)."""
        return self.config.get("acquisition_samples") or self.acquisition.num_samples

    @property
    def optimizer_options(self) -> dict:
        """Options of :func:`ppbo.optimize_acquisition` (and of recommendations)."""
        return dict(self.config.get("optimizer_options") or {})

    def data(self, trials: list[Trial]):
        """The COMPLETE trials in model space and the standardisation."""
        model = self.model(trials)
        return model.data, model.standardization

    def model(self, trials: list[Trial]) -> Model:
        """The surrogate and data the next ask fits (sources included).

        Without sources: the configured surrogate and the COMPLETE trials; with
        sources, :meth:`ppbo.campaign.transfer.Transfer.model`.
        """
        data, standardization = complete_data(
            trials, self.space, self.direction, self.num_tasks is not None
        )
        if self.transfer is None:
            return Model(self.surrogate, data, standardization, {})
        return self.transfer.model(data, standardization, trials)


def propose(
    setup: Setup,
    trials: list[Trial],
    count: int,
    task: int | None,
    previous: Posterior | None,
) -> tuple[list[dict], Posterior | None]:
    """Return the rows of the next ``count`` trials and the step's posterior.

    Args:
        setup: the campaign's components and configuration.
        trials: every trial so far, by number.
        count: how many trials to ask.
        task: the task asked for (multi-task surrogates), else None.
        previous: the posterior of the previous model-based ask (a warm start).

    Returns:
        ``(rows, posterior)``: trial rows for :meth:`ppbo.storage.Storage.add_trials`
        and the posterior fitted by this ask (None when no model was fitted).

    Example:
        >>> import jax, ppbo
        >>> from ppbo.campaign import registry
        >>> space = ppbo.Space({"x": ppbo.Real(0.0, 1.0)})
        >>> config = {"direction": "minimize", "n_initial": 2, "seed": 0,
        ...           "initial_design": "lhs"}
        >>> setup = Setup(space, registry.resolve_surrogate(None)[0], ppbo.MAP(),
        ...               ppbo.acquisition.log_ei, config)
        >>> rows, posterior = propose(setup, [], 2, None, None)
        >>> [row["origin"] for row in rows], posterior is None
        (['design', 'design'], True)
    """
    config, space = setup.config, setup.space
    iteration = len(trials)
    n_initial = int(config["n_initial"])
    design = None
    units: list[np.ndarray] = []
    rows: list[dict] = []
    for number in range(iteration, min(iteration + count, n_initial)):
        if design is None:
            design = _design(setup, n_initial)
        units.append(space.snap(design[number]))
        rows.append(_row(space, units[-1], iteration, "design", task=task))
    remaining = count - len(rows)
    if not remaining:
        return rows, None
    model = setup.model(trials)
    data = model.data
    if data is None:
        key = campaign_key(int(config["seed"]), iteration, "random")
        U = np.asarray(jax.random.uniform(key, (remaining, space.dim)))
        rows += [_row(space, space.snap(u), iteration, "random", task=task) for u in U]
        return rows, None
    pending, tasks = pending_points(trials, space)
    key = campaign_key(int(config["seed"]), iteration, "step")
    pending = (pending + units, tasks + [task] * len(units))
    setup = dataclasses.replace(setup, surrogate=model.surrogate)
    record = latest_record(trials) if _is_portfolio(setup) else None
    X, posterior, extra = _suggest(
        setup, key, data, remaining, pending, task, previous, record
    )
    extra = extra | model.extra
    rows += [_row(space, space.snap(x), iteration, "model", extra, task) for x in X]
    return rows, posterior


def _design(setup: Setup, n: int) -> np.ndarray:
    """The campaign's initial design in the unit cube (trial ``i`` gets row ``i``)."""
    config = setup.config
    kind, seed = config["initial_design"], int(config["seed"])
    if kind != "sources":
        return initial_design(kind, n, setup.space.dim, seed)
    # Feurer et al. (2015)'s warm start; the slots the sources cannot fill get
    # the rows of the campaign's Latin hypercube at the same positions
    fallback = initial_design("lhs", n, setup.space.dim, seed)
    transfer = setup.transfer
    X, y, ids = transfer.arrays()
    target = transfer.settings.get("meta_features")
    meta = None
    if target is not None:
        meta = np.stack([source.meta_features for source in transfer.sources])
    return source_design(
        X, y, ids, n, fallback, meta_features=meta, target_meta_features=target
    )


def _row(space, u, iteration, origin, extra=None, task=None) -> dict:
    return {
        "task": task,
        "params": space.from_unit(u),
        "state": TrialState.RUNNING,
        "iteration": iteration,
        "origin": origin,
        "extra": dict(extra or {}),
    }


def _is_portfolio(setup: Setup) -> bool:
    return setup.acquisition.name == "gp_hedge"


def _suggest(setup, key, data, q, pending, task, previous, record=None):
    from ppbo.inference.diagnostics import DiagnosticWarning

    start = time.perf_counter()
    extra = {}
    if _is_portfolio(setup):
        if task is not None:
            raise ValueError(
                "acquisition 'gp_hedge' suggests for single-task campaigns; a "
                f"multi-task campaign asked for task={task}"
            )
        X, posterior, extra["hedge"] = _hedge_step(
            setup, key, data, previous, record, q=q, pending=pending[0]
        )
    elif task is None:
        result = _step(setup, key, data, previous, q=q, pending=pending[0])
        X, posterior = result.X, result.posterior
        if result.explored:
            extra["explored"] = True
    else:
        X, posterior = _suggest_for_task(setup, key, data, q, pending, task, previous)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticWarning)
        report = posterior.diagnostics(warn=False)
    extra = {
        "step_seconds": time.perf_counter() - start,
        "diagnostics": list(report.warnings),
    } | extra
    return X, posterior, extra


def _step_options(setup) -> dict:
    discrete = any(not isinstance(d, Real) for d in setup.space.dimensions.values())
    return {
        "acquisition_samples": setup.acquisition_samples,
        "optimizer_options": setup.optimizer_options,
        "snap": partial(_snap, setup.space) if discrete else None,
    }


def _step(setup, key, data, previous, **options):
    return step(
        key,
        setup.surrogate,
        setup.inference,
        setup.acquisition,
        data,
        init=previous,
        acquisition_options=dict(setup.config.get("acquisition_options") or {}),
        **_step_options(setup),
        **options,
    )


def _hedge_step(setup, key, data, previous, record, **options):
    result, record = hedge_step(
        key,
        setup.surrogate,
        setup.inference,
        data,
        record,
        options=setup.config.get("acquisition_options"),
        init=previous,
        **_step_options(setup),
        **options,
    )
    return result.X, result.posterior, record


def _suggest_for_task(setup, key, data, q, pending, task, previous):
    # Multi-task asks: every pending point (and each earlier point of the batch)
    # is believed at its own task's mixture mean, then task ``task``'s view is
    # scored; one point per step, the fit reused after the first.
    points, tasks = list(pending[0]), [0 if t is None else t for t in pending[1]]
    keys = [key] if q == 1 else list(jax.random.split(key, q))
    chosen, posterior = [], None
    for key_i in keys:
        view = partial(_believed_view, points=points, tasks=tasks, task=task)
        result = _step(setup, key_i, data, previous, fitted=posterior, transform=view)
        X, posterior = result.X, result.posterior
        chosen.append(X[0])
        points, tasks = points + [X[0]], tasks + [task]
    return np.stack(chosen), posterior


def _believed_view(posterior, points, tasks, task):
    """Task ``task``'s view of ``posterior`` given pending points of any task."""
    if points:
        X, tasks = np.stack(points), np.asarray(tasks, dtype=np.int64)
        believed = np.zeros(len(X))
        for t in np.unique(tasks):
            mean, _ = task_view(posterior, int(t)).predict_marginal(X[tasks == t])
            believed[tasks == t] = np.asarray(mean)
        posterior = posterior.condition(X, believed, task=tasks)
    return task_view(posterior, task)


def _snap(space: Space, U: np.ndarray) -> np.ndarray:
    return np.stack([space.snap(u) for u in U])
