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

import uuid
import warnings
from collections.abc import Mapping
from typing import Any

import jax

from ppbo.campaign import registry
from ppbo.campaign.ask import Setup, propose
from ppbo.campaign.codec import (
    campaign_config,
    check_compatible,
    decode_posterior,
    encode_posterior,
    stored_components,
)
from ppbo.campaign.keys import campaign_key
from ppbo.campaign.recommendation import Recommended, recommend_params
from ppbo.campaign.transfer import (
    Transfer,
    default_selection,
    fill_spec,
    transfer_config,
    transfer_mode,
)
from ppbo.campaign.trials import CampaignWarning, best_trial, finish, trials_frame
from ppbo.campaign.validation import (
    check_acquisition,
    check_arguments,
    check_count,
    check_task,
    check_value,
    trial_number,
)
from ppbo.inference import fit
from ppbo.space import Space
from ppbo.storage.base import Trial, TrialState
from ppbo.surrogate import Posterior
from ppbo.transfer.source import sources_to_json, validate_sources

__all__ = ["Optimizer", "Recommended", "CampaignWarning"]


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
            benchmarks/README.md. ``"pes"`` is Predictive Entropy Search;
            ``"gp_hedge"`` the GP-Hedge portfolio of Hoffman et al. (2011), see
            :mod:`ppbo.campaign.portfolio`).
        direction: ``"minimize"`` (default) or ``"maximize"``.
        initial_design: ``"lhs"`` (default), ``"sobol"``, ``"random"``, or
            ``"sources"`` with ``sources``: the warm start of Feurer et al.
            (2015), the best points of the sources nearest the target by
            ``meta_features`` (:func:`ppbo.campaign.designs.source_design`).
        n_initial: design size (default ``max(3, 2 * len(space))``).
        seed: the campaign's root seed.
        storage: None (in memory), a SQLite file path, or a
            :class:`ppbo.storage.Storage`.
        name: the campaign's unique name in the storage (default: generated).
        acquisition_options: passed to the acquisition (``beta`` for UCB, default
            1; ``{"delta": 0.1}`` gives UCB the Srinivas et al. (2010) schedule at
            the current round instead; for ``"gp_hedge"``, ``{"acquisitions":
            [...], "eta": 1.0, "options": {arm: {...}}}``).
        optimizer_options: passed to :func:`ppbo.optimize_acquisition`
            (``num_raw``, ``num_restarts``, ``max_iterations``).
        load_if_exists: load the campaign if ``name`` exists instead of raising.
        metadata: JSON-ready notes stored with the configuration.
        acquisition_samples: average the acquisition over this many evenly
            spaced hyperparameter samples (default: the acquisition's
            ``num_samples``, 16 for PES and ES as the PES authors' code uses a
            handful; for the others 16 of a posterior with more samples, all of
            a smaller one). A
            posterior with fewer samples (MAP, ``Fixed``) is repeated, so that
            PES still averages over that many sampled maximisers x*.
        sources: source tasks (a list of :class:`ppbo.Source`) in this space,
            for a transfer surrogate (e.g. ``"multitask_gp"``, the ICM model
            with the target as task 0 and source ``k`` as task ``k + 1``); stored
            with the campaign as JSON. A surrogate that does not use sources
            (``"gp"``, ...) ignores them, with a :class:`CampaignWarning`. See
            :mod:`ppbo.campaign.transfer` for the data the surrogate sees.
        meta_features: the target's meta-features (f,), when the sources have
            ``meta_features`` (for surrogates that compare tasks by them).
        source_selection: ``"all"`` (every source in every fit) or
            ``"bandit"``: each ask fits the single-source surrogate to the target
            and the one source chosen by the bandit of Ramachandran et al. (2018)
            (:mod:`ppbo.transfer.bandit`). None (default): ``"bandit"`` for
            Diff-GP with several sources, a single-source model
            (:func:`ppbo.campaign.transfer.default_selection`), else ``"all"``.
        source_selection_options: ``{"gamma": γ}`` in (0, 1] for the bandit
            (default 0.5).

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
        sources: Any = None,
        meta_features: Any = None,
        source_selection: str | None = None,
        source_selection_options: Mapping[str, Any] | None = None,
    ) -> None:
        jax.config.update("jax_enable_x64", True)
        space = space if isinstance(space, Space) else Space(space)
        check_arguments(direction, initial_design, n_initial, seed, name)
        n_initial = max(3, 2 * len(space)) if n_initial is None else n_initial
        transfer_options = (meta_features, source_selection, source_selection_options)
        named = (surrogate, inference, acquisition)
        checks = (acquisition_samples, acquisition_options)
        parts, specs, stored = _components(
            space, named, sources, transfer_options, initial_design, checks
        )
        from ppbo.storage import open_storage

        self._storage = open_storage(storage)
        name = name or f"campaign-{uuid.uuid4().hex[:8]}"
        config = campaign_config(
            space,
            **specs,
            direction=direction,
            initial_design=initial_design,
            n_initial=n_initial,
            seed=seed,
            acquisition_samples=acquisition_samples,
            acquisition_options=acquisition_options,
            optimizer_options=optimizer_options,
            metadata=metadata,
        )
        config.update(stored)
        campaign = _create_or_load(self._storage, name, config, load_if_exists)
        self._init(campaign, space, **parts)

    def _init(self, campaign, space, surrogate, inference, acquisition) -> None:
        # the one constructor path of a new and a loaded campaign
        self._campaign = campaign
        config = campaign.config
        transfer = Transfer.from_config(config, space, surrogate)
        self._setup = Setup(space, surrogate, inference, acquisition, config, transfer)
        self._posterior_cache: tuple[int, Posterior] | None = None
        self._fit_cache: Posterior | None = None

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
        from ppbo.storage import open_campaign

        storage, campaign = open_campaign(storage, name)
        config = campaign.config
        given = {"surrogate": surrogate, "inference": inference}
        parts = stored_components(config, name, acquisition=acquisition, **given)
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
        return self._setup.space

    @property
    def direction(self) -> str:
        """``"minimize"`` or ``"maximize"``."""
        return self._setup.direction

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
        return trials_frame(self.get_trials(), self.space.names)

    @property
    def best_trial(self) -> Trial | None:
        """The COMPLETE trial with the best value (None before any)."""
        return best_trial(self.get_trials(), self.direction)

    @property
    def posterior(self) -> Posterior | None:
        """The posterior of the latest model-based ask (None before the first)."""
        latest = self._storage.latest_posterior(self._campaign.id)
        if latest is None:
            return None
        iteration, blob = latest
        if self._posterior_cache is None or self._posterior_cache[0] != iteration:
            surrogate = self._setup.surrogate
            transfer = self._setup.transfer
            if transfer is not None and transfer.selection == "bandit":
                # the single-source surrogate of the arm that ask chose
                asked = self._storage.get_trial(self._campaign.id, iteration)
                arm = (asked.extra or {}).get("source_arm", 0) if asked else 0
                surrogate = transfer.surrogate_for([int(arm)])
            self._posterior_cache = (iteration, decode_posterior(blob, surrogate))
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
        count = check_count(n)
        with self._storage.ask_lock(self._campaign.id):
            trials = self.get_trials()
            rows, posterior = propose(
                self._setup, trials, count, self._check_task(task), self.posterior
            )
            record = None
            if posterior is not None:
                record = (len(trials), encode_posterior(posterior))
                self._posterior_cache = (len(trials), posterior)
            asked = self._storage.add_trials(self._campaign.id, rows, record)
        return asked if n is not None else asked[0]

    def _check_task(self, task: Any) -> int | None:
        setup = self._setup
        return check_task(task, setup.num_tasks, self.name, setup.surrogate.name)

    # -- tell -----------------------------------------------------------------------
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
        number = trial_number(trial)
        stored = self._storage.get_trial(self._campaign.id, number)
        if stored is None:
            raise KeyError(f"trial {number!r} does not exist in campaign {self.name!r}")
        if task is not None and self._check_task(task) != stored.task:
            raise ValueError(
                f"trial {number} was asked for task {stored.task}, told task={task!r}"
            )
        return finish(
            self._storage,
            self._campaign,
            number,
            value,
            failed=failed,
            message=message,
        )

    def abandon(self, trial: Trial | int, message: str | None = None) -> Trial:
        """Give up a RUNNING trial: it is kept as ABANDONED and no longer pending.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> opt.abandon(opt.ask()).state
            'ABANDONED'
        """
        return self._storage.finish_trial(
            self._campaign.id, trial_number(trial), TrialState.ABANDONED, None, message
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
        params = self.space.validate(params)
        value = check_value(value)
        row = {
            "params": params,
            "state": TrialState.RUNNING,
            "origin": "user",
            "task": self._check_task(task),
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
        model = self._setup.model(trials)
        data, standardization = model.data, model.standardization
        if data is None:
            raise ValueError(
                f"campaign {self.name!r} has no COMPLETE trial with a finite value yet"
            )
        for known in (self._fit_cache, self.posterior):
            if known is not None and known.data.equals(data):
                self._fit_cache = known
                return known, standardization
        key, _ = jax.random.split(self._recommend_key(trials))
        setup = self._setup
        self._fit_cache = fit(
            model.surrogate, data, setup.inference, key, init=self.posterior
        )
        return self._fit_cache, standardization

    def _recommend_key(self, trials: list[Trial]) -> jax.Array:
        return campaign_key(int(self._setup.config["seed"]), len(trials), "recommend")

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
        task = self._check_task(task)
        posterior, standardization = self._fit_all()
        _, key = jax.random.split(self._recommend_key(self.get_trials()))
        return recommend_params(
            posterior,
            standardization,
            self.space,
            self.direction,
            key,
            task=task,
            options={**self._setup.optimizer_options, **options},
        )

    def __repr__(self) -> str:
        return (
            f"Optimizer(name={self.name!r}, direction={self.direction!r}, "
            f"trials={len(self.get_trials())})"
        )


def _create_or_load(storage, name: str, config: dict, load_if_exists: bool):
    """The new campaign ``name``, or the stored one when ``load_if_exists`` and its
    configuration is compatible with ``config``."""
    existing = storage.get_campaign(name)
    if existing is not None and load_if_exists:
        check_compatible(existing.config, config)
        return existing
    return storage.create_campaign(name, config)


def _components(space, named, sources, transfer_options, design, checks):
    """The campaign's components and specs from the user's names, and what a
    campaign with sources stores beside them (``sources`` and ``transfer``),
    checked against ``checks = (acquisition_samples, acquisition_options)``."""
    parts, specs, stored = _resolved(space, named, sources, transfer_options, design)
    check_acquisition(parts["surrogate"], parts["acquisition"], *checks)
    return parts, specs, stored


def _resolved(space, named, sources, transfer_options, design="lhs"):
    surrogate, inference, acquisition = named
    sources = validate_sources(sources, space)
    parts, specs = registry.resolve_components(surrogate, inference, acquisition, space)
    meta_features, selection, selection_options = transfer_options
    name = specs["surrogate"].get("name")
    selection = default_selection(selection, name, len(sources))
    transfer = transfer_config(
        sources, space, meta_features, selection, selection_options
    )
    if not sources:
        if design == "sources":
            raise ValueError(
                "initial_design='sources' (the best points of the source tasks) "
                "needs sources=[ppbo.Source(...), ...], got no sources"
            )
        return parts, specs, {}
    parts, specs = _transfer_components(
        parts, specs, sources, transfer, inference, acquisition, design
    )
    stored = {"sources": sources_to_json(sources, space), "transfer": transfer}
    return parts, specs, stored


def _transfer_components(
    parts, specs, sources, transfer, inference, acquisition, design="lhs"
):
    """The components of a campaign with sources: the surrogate gets the sources'
    options (``num_tasks``, ``num_sources``, ``meta_features``), or a warning that
    it ignores them."""
    mode = transfer_mode(specs["surrogate"], parts["surrogate"])
    name = specs["surrogate"].get("name")
    if mode == "ignore":
        if transfer["source_selection"] is not None:
            raise ValueError(
                f"source_selection={transfer['source_selection']!r} needs a surrogate "
                f"that uses sources (e.g. 'multitask_gp'), got surrogate {name!r}"
            )
        if design == "sources":  # the sources choose the design, not the model
            return parts, specs
        warnings.warn(
            f"surrogate {name!r} does not use source tasks: the {len(sources)} "
            "sources are stored with the campaign but the model sees the target's "
            "trials only",
            CampaignWarning,
            stacklevel=4,
        )
        return parts, specs
    if name == "custom":
        if transfer["source_selection"] is not None:
            raise ValueError(
                "source_selection needs a registry surrogate (a name), so that the "
                "campaign can build its single-source variant"
            )
        return parts, specs
    K = len(sources)
    arms = [0] if transfer["source_selection"] == "bandit" else list(range(K))
    target = transfer["meta_features"]
    if target is None:
        rows = [[0.0] for _ in range(len(arms) + 1)]
    else:
        rows = [sources[k].meta_features.tolist() for k in arms] + [list(target)]
    spec = fill_spec(specs["surrogate"], mode, rows)
    return registry.resolve_components(spec, inference, acquisition)
