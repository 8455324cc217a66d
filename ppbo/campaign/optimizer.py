"""The ask/tell campaign: :class:`Optimizer`, a thin façade over the campaign parts.

:class:`Optimizer` runs a campaign in the user's units over a :class:`ppbo.Space`
with the ask/tell interface of Optuna (``ask``, ``tell``, ``abandon``, trials in
states RUNNING / COMPLETE / FAILED / ABANDONED), keeping every trial and each
iteration's posterior in a :mod:`ppbo.storage` so that a campaign resumes exactly.
Its parts: names and specs (:mod:`ppbo.campaign.registry`), the BO step
(:func:`ppbo.campaign.step.step`), outputs in model space
(:mod:`ppbo.campaign.transforms`), initial designs (:mod:`ppbo.campaign.designs`),
keys (:mod:`ppbo.campaign.keys`) and the stored posteriors
(:mod:`ppbo.campaign.codec`). Batches and concurrent asks treat RUNNING trials as
pending points (the Kriging believer of Ginsbourger, Le Riche and Carraro 2010).
"""

from __future__ import annotations

import math
import numbers
import time
import uuid
import warnings
from collections.abc import Mapping
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.acquisition.base import default_acquisition
from ppbo.campaign import registry
from ppbo.campaign.codec import (
    check_compatible,
    decode_posterior,
    encode_posterior,
    json_ready,
)
from ppbo.campaign.designs import DESIGNS, initial_design
from ppbo.campaign.keys import campaign_key
from ppbo.campaign.step import step
from ppbo.campaign.transforms import model_data, task_view
from ppbo.data import Dataset
from ppbo.inference import fit
from ppbo.space import Real, Space
from ppbo.storage.base import Trial, TrialState
from ppbo.surrogate import Posterior

__all__ = ["Optimizer", "Recommended", "CampaignWarning"]

_DIRECTIONS = ("minimize", "maximize")


class CampaignWarning(UserWarning):
    """Something a campaign did with a told value that the user should know."""


def _check_value(value: Any) -> float:
    """A told objective value as a float (NaN and +-inf pass; callers decide)."""
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise ValueError(
                f"value must be a scalar, got an array of shape {value.shape}"
            )
        value = value[()]
    if isinstance(value, jax.Array):
        if value.shape != ():
            raise ValueError(
                f"value must be a scalar, got an array of shape {value.shape}"
            )
        if value.dtype != np.float64 and jnp.issubdtype(value.dtype, jnp.floating):
            raise ValueError(
                f"value must be float64, got {value.dtype} value {value!r}; pass "
                "float(value)"
            )
        value = value.item()
    if isinstance(value, np.floating) and value.dtype != np.float64:
        raise ValueError(
            f"value must be float64, got {value.dtype.name} value {value!r}; pass "
            "float(value)"
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"value must be a real number, got {value!r}")
    return float(value)


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


class Optimizer:
    """A Bayesian-optimisation campaign with an ask/tell interface and storage.

    ``ask()`` returns a trial (``trial.number``, ``trial.params``) to evaluate;
    ``tell(trial, value)`` records its value. Points still being evaluated
    (RUNNING trials) are taken into account by later asks (Kriging believer), so
    asks may be batched (``ask(n)``) or issued by several workers or processes.

    Each ask uses the key of the named stream ``"step"`` at ``iteration``, the
    number of trials asked before it (:func:`ppbo.campaign.keys.campaign_key`),
    warm-starts the fit from the posterior stored by the previous ask, and
    stores its own posterior (samples and sampler state) with the new trials in
    one transaction; so a campaign reloaded with
    :meth:`load` after a crash makes exactly the suggestion an uninterrupted
    campaign would have made.

    The first ``n_initial`` trials come from a space-filling design (trial ``i``
    gets design point ``i``); later trials maximise the acquisition of the
    surrogate fitted to the COMPLETE trials (hyperparameters by ``inference``).
    Until a trial has completed with a finite value, later trials are uniformly
    random.

    Told values: NaN marks the trial FAILED (kept, excluded from the model) with a
    :class:`CampaignWarning`; ``+-inf`` is stored as told and completes the trial,
    and the model sees it clipped to the range of the finite values (with a
    warning). Outputs are standardised (mean 0, sd 1; constant values map to 0)
    and minimisation is turned into maximisation inside the campaign only.

    Args:
        space: a :class:`ppbo.Space` or a mapping of name -> dimension.
        surrogate: a :class:`ppbo.Surrogate`, ``"gp"`` (default: Matérn-5/2,
            constant mean) or ``"gp-<kernel>"`` (``rbf``, ``matern32``, ...).
        inference: ``ppbo.MAP()`` (default, chosen by measured regret; see
            benchmarks/README.md), ``NUTS`` (fully Bayesian), ``Slice``,
            ``Fixed``, or ``"map"``, ``"nuts"``, ``"slice"``; ``ppbo.Train()``
            (the default) for a surrogate with its own trainer.
        acquisition: an :class:`~ppbo.acquisition.Acquisition` or its name
            (default: ``"log_ei"``, chosen by measured regret; see
            benchmarks/README.md. ``"pes"`` is Predictive Entropy Search).
        direction: ``"minimize"`` (default) or ``"maximize"``.
        initial_design: ``"lhs"`` (default), ``"sobol"`` or ``"random"``.
        n_initial: design size (default ``max(3, 2 * len(space))``).
        seed: the campaign's root seed.
        storage: None (in memory), a SQLite file path, or a
            :class:`ppbo.storage.Storage`.
        name: the campaign's unique name in the storage (default: generated).
        acquisition_options: passed to the acquisition (``beta`` for UCB, whose
            default is the Srinivas et al. (2010) schedule at the current round).
        optimizer_options: passed to :func:`ppbo.optimize_acquisition`
            (``num_raw``, ``num_restarts``, ``max_iterations``).
        load_if_exists: load the campaign if ``name`` exists instead of raising.
        metadata: JSON-ready notes stored with the configuration.
        acquisition_samples: average the acquisition over this many evenly
            spaced hyperparameter samples (default: the acquisition's
            ``num_samples``, 16 for PES and ES as the PES authors' code uses a
            handful; all samples for EI and the other cheap acquisitions). A
            posterior with fewer samples (MAP, ``Fixed``) is repeated, so that
            PES still averages over that many sampled maximisers x*.

    Raises:
        ValueError: for an invalid argument, naming it and its value.
        ppbo.storage.DuplicateCampaignError: if ``name`` exists in ``storage``.

    Example:
        >>> space = ppbo.Space({"x": ppbo.Real(-2.0, 2.0)})
        >>> opt = Optimizer(space, inference=ppbo.MAP(num_restarts=2), n_initial=2,
        ...                 optimizer_options={"num_raw": 32, "num_restarts": 2})
        >>> for _ in range(3):
        ...     trial = opt.ask()
        ...     opt.tell(trial, (trial.params["x"] - 0.5) ** 2).state
        'COMPLETE'
        'COMPLETE'
        'COMPLETE'
        >>> len(opt.get_trials())
        3
    """

    def __init__(
        self,
        space: Space | Mapping[str, Any],
        *,
        surrogate: Any = None,
        inference: Any = None,
        acquisition: Any = None,
        direction: str = "minimize",
        initial_design: str = "lhs",
        n_initial: int | None = None,
        seed: int = 0,
        storage: Any = None,
        name: str | None = None,
        acquisition_options: Mapping[str, Any] | None = None,
        optimizer_options: Mapping[str, Any] | None = None,
        load_if_exists: bool = False,
        metadata: Mapping[str, Any] | None = None,
        acquisition_samples: int | None = None,
    ) -> None:
        jax.config.update("jax_enable_x64", True)
        space = space if isinstance(space, Space) else Space(space)
        _check_arguments(direction, initial_design, n_initial, seed, name)
        if n_initial is None:
            n_initial = max(3, 2 * len(space))
        surrogate, surrogate_spec = registry.resolve_surrogate(surrogate)
        if inference is None and surrogate.trainer is not None:
            from ppbo.inference import Train

            inference = Train()
        inference, inference_spec = registry.resolve_inference(inference)
        if acquisition is None:
            acquisition = default_acquisition(surrogate)
        acquisition, acquisition_spec = registry.resolve_acquisition(acquisition)
        _check_acquisition(surrogate, acquisition, acquisition_samples)
        from ppbo.storage import open_storage

        self._storage = open_storage(storage)
        name = name or f"campaign-{uuid.uuid4().hex[:8]}"
        config = {
            "format": 1,
            "space": space.to_json(),
            "direction": direction,
            "initial_design": initial_design,
            "n_initial": int(n_initial),
            "seed": int(seed),
            "surrogate": surrogate_spec,
            "inference": inference_spec,
            "acquisition": acquisition_spec,
            "acquisition_samples": acquisition_samples,
            "acquisition_options": json_ready(
                "acquisition_options", acquisition_options
            ),
            "optimizer_options": json_ready("optimizer_options", optimizer_options),
            "metadata": json_ready("metadata", metadata),
        }
        existing = self._storage.get_campaign(name)
        if existing is not None and load_if_exists:
            campaign = existing
            check_compatible(existing.config, config)
        else:
            campaign = self._storage.create_campaign(name, config)
        self._init(campaign, space, surrogate, inference, acquisition)

    def _init(self, campaign, space, surrogate, inference, acquisition) -> None:
        # the one constructor path of a new and a loaded campaign
        config = campaign.config
        self._campaign = campaign
        self._space = space
        self._surrogate = surrogate
        self._inference = inference
        self._acquisition = acquisition
        self._direction = config["direction"]
        self._n_initial = int(config["n_initial"])
        self._seed = int(config["seed"])
        self._design = config["initial_design"]
        self._acq_options = dict(config.get("acquisition_options") or {})
        self._acq_samples = config.get("acquisition_samples") or acquisition.num_samples
        self._opt_options = dict(config.get("optimizer_options") or {})
        self._posterior_cache: tuple[int, Posterior] | None = None
        self._fit_cache: tuple[Any, Posterior] | None = None

    @classmethod
    def load(
        cls,
        storage: Any,
        name: str,
        *,
        surrogate: Any = None,
        inference: Any = None,
        acquisition: Any = None,
    ) -> Optimizer:
        """Reopen a stored campaign; it continues exactly where it stopped.

        Trials left RUNNING (e.g. by a killed process) are reported with a
        :class:`CampaignWarning`; tell, re-evaluate or abandon them.

        Args:
            storage: the SQLite path or storage holding the campaign.
            name: the campaign's name.
            surrogate, inference, acquisition: needed only when the campaign was
                created with custom objects (its configuration says so).

        Raises:
            ValueError: if there is no such campaign, or a custom component is
                needed and not given.

        Example:
            >>> space = ppbo.Space({"x": ppbo.Real(0.0, 1.0)})
            >>> storage = ppbo.storage.SQLiteStorage(":memory:")
            >>> _ = Optimizer(space, storage=storage, name="demo", n_initial=2)
            >>> Optimizer.load(storage, "demo").name
            'demo'
        """
        jax.config.update("jax_enable_x64", True)
        from ppbo.storage import open_storage

        storage = open_storage(storage)
        campaign = storage.get_campaign(name)
        if campaign is None:
            known = [c.name for c in storage.list_campaigns()]
            raise ValueError(
                f"no campaign named {name!r} in {storage!r}; it has {known}"
            )
        config = campaign.config
        parts = {}
        for field, given, resolve in (
            ("surrogate", surrogate, registry.resolve_surrogate),
            ("inference", inference, registry.resolve_inference),
            ("acquisition", acquisition, registry.resolve_acquisition),
        ):
            spec = config[field]
            if given is None and spec.get("name") == "custom":
                raise ValueError(
                    f"campaign {name!r} was created with a custom {field} "
                    f"({spec.get('repr')}); pass it again: Optimizer.load(storage, "
                    f"name, {field}=...)"
                )
            if given is None:
                given = spec if field != "acquisition" else spec["name"]
            parts[field] = resolve(given)[0]
        self = object.__new__(cls)
        self._storage = storage
        self._init(campaign, Space.from_json(config["space"]), **parts)
        running = [t.number for t in self.get_trials() if t.state == TrialState.RUNNING]
        if running:
            warnings.warn(
                f"campaign {name!r} has RUNNING trials {running} (asked, never told): "
                "tell their values, re-evaluate them, or abandon them",
                CampaignWarning,
                stacklevel=2,
            )
        return self

    # -- read-only views ------------------------------------------------------------
    @property
    def name(self) -> str:
        """The campaign's name."""
        return self._campaign.name

    @property
    def space(self) -> Space:
        """The search space."""
        return self._space

    @property
    def direction(self) -> str:
        """``"minimize"`` or ``"maximize"``."""
        return self._direction

    @property
    def storage(self) -> Any:
        """The campaign's storage."""
        return self._storage

    @property
    def config(self) -> dict:
        """The stored configuration (JSON)."""
        return dict(self._campaign.config)

    def get_trials(self, states: Any = None) -> list[Trial]:
        """The campaign's trials, by number, optionally only some states."""
        trials = self._storage.get_trials(self._campaign.id)
        if states is not None:
            states = (states,) if isinstance(states, str) else tuple(states)
            trials = [t for t in trials if t.state in states]
        return trials

    @property
    def trials(self):
        """All trials as a table (a pandas DataFrame, one ``params_<name>`` column
        per parameter), like Optuna's ``trials_dataframe()``."""
        import pandas as pd

        rows = []
        for t in self.get_trials():
            row = {
                "number": t.number,
                "state": t.state,
                "value": t.value,
                "origin": t.origin,
            }
            row |= {f"params_{k}": v for k, v in t.params.items()}
            row |= {
                "created": t.created,
                "finished": t.finished,
                "iteration": t.iteration,
                "message": t.message,
            }
            rows.append(row)
        columns = ["number", "state", "value", "origin"]
        columns += [f"params_{k}" for k in self._space.names]
        columns += ["created", "finished", "iteration", "message"]
        return pd.DataFrame(rows, columns=columns)

    @property
    def best_trial(self) -> Trial | None:
        """The COMPLETE trial with the best value (None before any)."""
        complete = [t for t in self.get_trials(TrialState.COMPLETE)]
        if not complete:
            return None
        sign = 1.0 if self._direction == "minimize" else -1.0
        return min(complete, key=lambda t: (sign * t.value, t.number))

    @property
    def posterior(self) -> Posterior | None:
        """The posterior of the latest model-based ask (None before the first)."""
        latest = self._storage.latest_posterior(self._campaign.id)
        if latest is None:
            return None
        iteration, blob = latest
        if self._posterior_cache is None or self._posterior_cache[0] != iteration:
            self._posterior_cache = (iteration, decode_posterior(blob, self._surrogate))
        return self._posterior_cache[1]

    # -- ask --------------------------------------------------------------------------
    def ask(
        self, n: int | None = None, *, task: int | None = None
    ) -> Trial | list[Trial]:
        """Suggest the next trial, or a batch of ``n`` trials.

        Args:
            n: batch size (None: one trial, returned bare).
            task: for a multi-task surrogate (``"multitask_gp"``), the task
                ``k`` in ``[0, t)`` to evaluate next (default 0): the
                acquisition is that of task ``k``, the model conditions on every
                task's COMPLETE trials.

        Returns:
            A RUNNING :class:`~ppbo.storage.Trial` (or a list of ``n``), already
            committed to the storage.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)}, n_initial=4)
            >>> [t.number for t in opt.ask(2)]
            [0, 1]
        """
        count = 1 if n is None else n
        if isinstance(count, bool) or not isinstance(count, numbers.Integral):
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if count < 1:
            raise ValueError(f"n must be >= 1, got {n!r}")
        with self._storage.ask_lock(self._campaign.id):
            trials = self._ask(int(count), self._check_task(task))
        return trials if n is not None else trials[0]

    def _ask(self, count: int, task: int | None) -> list[Trial]:
        trials = self.get_trials()
        iteration = len(trials)
        rows: list[dict] = []
        for number in range(iteration, iteration + count):
            if number < self._n_initial:
                u = self._space.snap(self._design_points()[number])
                rows.append(self._row(u, iteration, "design", task=task))
        remaining = count - len(rows)
        posterior_record = None
        if remaining:
            data, _ = self._model_data(trials)
            if data is None:
                key = campaign_key(self._seed, iteration, "random")
                U = np.asarray(jax.random.uniform(key, (remaining, self._space.dim)))
                rows += [
                    self._row(self._space.snap(u), iteration, "random", task=task)
                    for u in U
                ]
            else:
                pending = [
                    self._space.to_unit(t.params)
                    for t in trials
                    if t.state == TrialState.RUNNING
                ]
                pending += [np.asarray(r["unit"]) for r in rows]
                key = campaign_key(self._seed, iteration, "step")
                X, posterior, extra = self._suggest(key, data, remaining, pending, task)
                rows += [
                    self._row(self._space.snap(x), iteration, "model", extra, task)
                    for x in X
                ]
                posterior_record = (iteration, encode_posterior(posterior))
                self._posterior_cache = (iteration, posterior)
        for row in rows:
            del row["unit"]
        return self._storage.add_trials(self._campaign.id, rows, posterior_record)

    def _row(self, u, iteration, origin, extra=None, task=None) -> dict:
        return {
            "task": task,
            "params": self._space.from_unit(u),
            "unit": u,
            "state": TrialState.RUNNING,
            "iteration": iteration,
            "origin": origin,
            "extra": dict(extra or {}),
        }

    @property
    def _discrete(self) -> bool:
        return any(not isinstance(d, Real) for d in self._space.dimensions.values())

    def _snap(self, U: np.ndarray) -> np.ndarray:
        return np.stack([self._space.snap(u) for u in U])

    @property
    def _num_tasks(self) -> int | None:
        # declared by multi-task surrogates (models/multitask_gp.py's extras)
        num = self._surrogate.extras.get("num_tasks")
        return None if num is None else int(num)

    def _check_task(self, task: Any) -> int | None:
        num = self._num_tasks
        if num is None:
            if task is not None:
                raise ValueError(
                    f"task={task!r} needs a multi-task surrogate (e.g. "
                    f"'multitask_gp'); campaign {self.name!r} has "
                    f"{self._surrogate.name}"
                )
            return None
        task = 0 if task is None else task
        if (
            isinstance(task, bool)
            or not isinstance(task, numbers.Integral)
            or not 0 <= task < num
        ):
            raise ValueError(f"task must be an integer in [0, {num}), got {task!r}")
        return int(task)

    def _design_points(self) -> np.ndarray:
        return initial_design(
            self._design, self._n_initial, self._space.dim, self._seed
        )

    def _model_data(self, trials: list[Trial]) -> tuple[Dataset | None, tuple]:
        """COMPLETE trials in model space and the standardisation (shift, scale)."""
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        values = np.array([t.value for t in complete], dtype=np.float64)
        if not np.isfinite(values).any():
            return None, (0.0, 1.0)
        X = np.stack([self._space.to_unit(t.params) for t in complete])
        tasks = None
        if self._num_tasks is not None:
            tasks = np.array([t.task or 0 for t in complete], dtype=np.int64)
        data, out = model_data(X, values, self._direction == "maximize", task=tasks)
        return data, (out.shift, out.scale)

    def _suggest(self, key, data, q, pending, task):
        from ppbo.inference.diagnostics import DiagnosticWarning

        start = time.perf_counter()
        result = step(
            key,
            self._surrogate,
            self._inference,
            self._acquisition,
            data,
            pending=pending,
            init=self.posterior,
            q=q,
            acquisition_samples=self._acq_samples,
            acquisition_options=self._acq_options,
            optimizer_options=self._opt_options,
            snap=self._snap if self._discrete else None,
            transform=None if task is None else partial(task_view, task=task),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DiagnosticWarning)
            report = result.posterior.diagnostics(warn=False)
        extra = {
            "step_seconds": time.perf_counter() - start,
            "diagnostics": list(report.warnings),
        }
        return result.X, result.posterior, extra

    # -- tell -----------------------------------------------------------------------
    def _number(self, trial: Any) -> int:
        number = trial.number if isinstance(trial, Trial) else trial
        if isinstance(number, bool) or not isinstance(number, numbers.Integral):
            raise ValueError(f"trial must be a Trial or an integer id, got {trial!r}")
        return int(number)

    def tell(
        self,
        trial: Trial | int,
        value: Any = None,
        *,
        failed: bool = False,
        message: str | None = None,
        task: int | None = None,
    ) -> Trial:
        """Record a RUNNING trial's objective value, or that it failed.

        Args:
            trial: the :class:`~ppbo.storage.Trial` from :meth:`ask` or its number.
            value: the objective value (a real scalar). NaN marks the trial
                FAILED; +-inf completes it (the model sees it clipped).
            failed: mark the trial FAILED instead (give no value).
            message: an optional note (e.g. the error of a failed evaluation).
            task: a check for multi-task campaigns: the task the trial was
                asked for (a mismatch raises).

        Returns:
            The updated trial.

        Raises:
            KeyError: for an unknown trial.
            ValueError: for a trial that is not RUNNING, or a value that is not a
                real scalar.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> trial = opt.ask()
            >>> opt.tell(trial, 0.25).value
            0.25
        """
        number = self._number(trial)
        cid = self._campaign.id
        stored = self._storage.get_trial(cid, number)
        if stored is None:
            raise KeyError(f"trial {number!r} does not exist in campaign {self.name!r}")
        if task is not None and self._check_task(task) != stored.task:
            raise ValueError(
                f"trial {number} was asked for task {stored.task}, told task={task!r}"
            )
        if failed:
            if value is not None:
                raise ValueError(
                    f"tell(trial {number}) got value={value!r} and failed=True; "
                    "give one of them"
                )
            return self._storage.finish_trial(
                cid, number, TrialState.FAILED, None, message
            )
        if value is None:
            raise ValueError(
                f"tell(trial {number}) needs a value (or failed=True / abandon())"
            )
        value = _check_value(value)
        if math.isnan(value):
            warnings.warn(
                f"trial {number}: the objective returned NaN; the trial is marked "
                "FAILED and excluded from the model",
                CampaignWarning,
                stacklevel=2,
            )
            return self._storage.finish_trial(
                cid,
                number,
                TrialState.FAILED,
                None,
                message or "objective returned NaN",
            )
        if math.isinf(value):
            warnings.warn(
                f"trial {number}: value {value} is stored as told; the model sees it "
                "clipped to the range of the finite values",
                CampaignWarning,
                stacklevel=2,
            )
        return self._storage.finish_trial(
            cid, number, TrialState.COMPLETE, value, message
        )

    def abandon(self, trial: Trial | int, message: str | None = None) -> Trial:
        """Give up a RUNNING trial: it is kept as ABANDONED and no longer pending.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> opt.abandon(opt.ask()).state
            'ABANDONED'
        """
        number = self._number(trial)
        return self._storage.finish_trial(
            self._campaign.id, number, TrialState.ABANDONED, None, message
        )

    def add(
        self, params: Mapping[str, Any], value: Any, *, task: int | None = None
    ) -> Trial:
        """Record an evaluation the optimiser did not suggest (like Optuna's
        ``add_trial``): validated parameters and their value.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> opt.add({"x": 0.5}, 1.0).origin
            'user'
        """
        params = self._space.validate(params)
        value = _check_value(value)
        task = self._check_task(task)
        row = {
            "params": params,
            "state": TrialState.RUNNING,
            "origin": "user",
            "task": task,
        }
        with self._storage.ask_lock(self._campaign.id):
            (trial,) = self._storage.add_trials(self._campaign.id, [row])
        return self.tell(trial, value)

    # -- recommend -------------------------------------------------------------------
    def _fit_all(self) -> tuple[Posterior, tuple[float, float]]:
        """The posterior given every COMPLETE trial, reused while they are unchanged.

        A posterior already conditioned on exactly these data (the latest
        model-based ask's, or this method's previous result) is returned as is.
        """
        trials = self.get_trials()
        data, standardization = self._model_data(trials)
        if data is None:
            raise ValueError(
                f"campaign {self.name!r} has no COMPLETE trial with a finite value yet"
            )
        fingerprint = _fingerprint(data)
        if self._fit_cache is not None and self._fit_cache[0] == fingerprint:
            return self._fit_cache[1], standardization
        latest = self.posterior
        if latest is not None and _fingerprint(latest.data) == fingerprint:
            posterior = latest
        else:
            key, _ = jax.random.split(self._recommend_key(trials))
            posterior = fit(self._surrogate, data, self._inference, key, init=latest)
        self._fit_cache = (fingerprint, posterior)
        return posterior, standardization

    def _recommend_key(self, trials: list[Trial]) -> jax.Array:
        return campaign_key(self._seed, len(trials), "recommend")

    def fit(self) -> Posterior:
        """The posterior given every COMPLETE trial, in model space.

        Fitted with its own key and warm-started from the latest posterior (the
        latest ask's posterior itself, or the previous ``fit``, when the data have
        not changed since); not stored, so it does not change the campaign's
        later suggestions. Inspect it with ``posterior.to_arviz()``.

        Raises:
            ValueError: before any trial has completed with a finite value.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)}, inference=ppbo.MAP())
            >>> _ = opt.add({"x": 0.2}, 1.0)
            >>> opt.fit().data.n
            1
        """
        return self._fit_all()[0]

    def recommend(self, *, task: int | None = None, **options: Any) -> Recommended:
        """The minimiser (maximiser) of the posterior-mean objective.

        Fits the surrogate to all COMPLETE trials (warm-started from the latest
        posterior, with its own key; nothing is stored, so the campaign's later
        suggestions do not depend on whether this was called), then maximises the
        posterior-mixture mean, as the PES paper recommends (Hernández-Lobato et
        al. 2014, §4).

        Args:
            task: the task to recommend for (multi-task surrogates; default 0).
            **options: passed to :func:`ppbo.recommend` (``num_raw`` ...).

        Raises:
            ValueError: before any trial has completed with a finite value.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)},
            ...                 inference=ppbo.MAP(num_restarts=2))
            >>> for x in (0.1, 0.5, 0.9):
            ...     _ = opt.add({"x": x}, (x - 0.4) ** 2)
            >>> abs(opt.recommend(num_raw=64).params["x"] - 0.4) < 0.2
            True
        """
        from ppbo.optimize import recommend

        task = self._check_task(task)
        posterior, (shift, scale) = self._fit_all()
        if task is not None:
            posterior = task_view(posterior, task)
        _, key = jax.random.split(self._recommend_key(self.get_trials()))
        options = {**self._opt_options, **options}
        rec = recommend(posterior, key, **options)
        params = self._space.from_unit(rec.x_mean)
        mean, var = posterior.predict_marginal(self._space.to_unit(params)[None])
        sign = 1.0 if self._direction == "maximize" else -1.0
        return Recommended(
            params=params,
            mean=float(sign * (shift + scale * float(mean[0]))),
            sd=float(scale * math.sqrt(max(float(var[0]), 0.0))),
        )

    def __repr__(self) -> str:
        return (
            f"Optimizer(name={self.name!r}, direction={self._direction!r}, "
            f"trials={len(self.get_trials())})"
        )


def _check_arguments(direction, initial_design, n_initial, seed, name) -> None:
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be one of {_DIRECTIONS}, got {direction!r}")
    if initial_design not in DESIGNS:
        raise ValueError(
            f"initial_design must be one of {DESIGNS}, got {initial_design!r}"
        )
    if n_initial is not None:
        if isinstance(n_initial, bool) or not isinstance(n_initial, numbers.Integral):
            raise ValueError(f"n_initial must be an integer >= 0, got {n_initial!r}")
        if n_initial < 0:
            raise ValueError(f"n_initial must be >= 0, got {n_initial!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string, got {name!r}")


def _check_acquisition(surrogate, acquisition, acquisition_samples) -> None:
    surrogate.require(*acquisition.requires, by=f"acquisition {acquisition.name!r}")
    if acquisition_samples is not None and (
        isinstance(acquisition_samples, bool)
        or not isinstance(acquisition_samples, numbers.Integral)
        or acquisition_samples < 1
    ):
        raise ValueError(
            "acquisition_samples must be a positive integer or None, got "
            f"{acquisition_samples!r}"
        )


def _fingerprint(data: Dataset) -> tuple:
    X, y, task = data.unpadded()
    return (data.capacity, X.tobytes(), y.tobytes(), np.asarray(task).tobytes())
