"""An Optuna sampler that runs ppbo's Bayesian-optimisation step.

:class:`PPBOSampler` is an Optuna ``BaseSampler``: an Optuna study (its RDB
storage, dashboard and pruners included) proposes each trial's parameters with
ppbo's surrogates, inference backends and acquisitions. It follows Optuna's
split between *relative* and *independent* sampling (Akiba et al. 2019, §3):

- the relative search space is the intersection of the distributions of the
  study's completed trials (Optuna's ``IntersectionSearchSpace``), without the
  single-valued ones;
- ``sample_relative`` maps that space to a :class:`ppbo.Space` (``Float`` to
  ``Real`` with or without ``log``, ``Int`` to ``Integer``, stepped ``Float`` and
  ``Int`` to an ``Integer`` index of the grid, ``Categorical`` to a
  ``Categorical`` of choice indices), takes the COMPLETE trials as a model-space
  :class:`ppbo.Dataset` (unit cube, standardised, maximised) and makes one call of
  :func:`ppbo.campaign.step.step`; RUNNING trials are its pending points (the
  Kriging believer of Ginsbourger, Le Riche and Carraro 2010); FAILED and PRUNED
  trials are left out, as Optuna's own samplers do;
- before ``n_startup_trials`` trials have completed, and for parameters outside
  the relative space, the independent sampler (Optuna's ``RandomSampler`` by
  default) draws the value.

Trial ``t`` uses the key ``campaign_key(seed, t, "step")``
(:func:`ppbo.campaign.keys.campaign_key`), so two studies with the same seed and
the same evaluations propose the same parameters.

References:
    Akiba, T., Sano, S., Yanase, T., Ohta, T. and Koyama, M. (2019). Optuna: A
    Next-generation Hyperparameter Optimization Framework. KDD.
    Ginsbourger, D., Le Riche, R. and Carraro, L. (2010). Kriging is well-suited
    to parallelize optimization. Computational Intelligence in Expensive
    Optimization Problems, Springer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler, RandomSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ppbo.campaign import registry
from ppbo.campaign.keys import campaign_key
from ppbo.campaign.step import step
from ppbo.campaign.transforms import model_data
from ppbo.campaign.validation import check_acquisition
from ppbo.space import Categorical, Integer, Real, Space

__all__ = ["PPBOSampler", "to_space"]

# A RUNNING trial's relatively sampled parameters, shared through the study's
# storage so that other workers see them as pending points before the objective
# has asked for them.
_PENDING_ATTR = "ppbo:relative_params"


@dataclasses.dataclass(frozen=True)
class _Encoding:
    """One Optuna distribution as one ppbo dimension, and the maps between them."""

    distribution: BaseDistribution
    dimension: Any

    def to_ppbo(self, value: Any) -> Any:
        dist = self.distribution
        if isinstance(dist, CategoricalDistribution):
            return int(dist.to_internal_repr(value))
        step = getattr(dist, "step", None)
        if isinstance(dist, FloatDistribution):
            if step is None:
                return float(value)
            return int(round((float(value) - dist.low) / step))
        if step != 1:
            return (int(value) - dist.low) // step
        return int(value)

    def to_optuna(self, value: Any) -> Any:
        dist = self.distribution
        if isinstance(dist, CategoricalDistribution):
            return dist.choices[int(value)]
        step = getattr(dist, "step", None)
        if isinstance(dist, FloatDistribution):
            if step is None:
                return float(min(max(value, dist.low), dist.high))
            return float(min(dist.low + int(value) * step, dist.high))
        if step != 1:
            return int(dist.low + int(value) * step)
        return int(value)


def _encoding(name: str, dist: BaseDistribution) -> _Encoding:
    if isinstance(dist, FloatDistribution):
        if dist.step is None:
            return _Encoding(dist, Real(dist.low, dist.high, log=dist.log))
        count = int(round((dist.high - dist.low) / dist.step))
        return _Encoding(dist, Integer(0, count))
    if isinstance(dist, IntDistribution):
        if dist.step == 1:
            return _Encoding(dist, Integer(dist.low, dist.high, log=dist.log))
        return _Encoding(dist, Integer(0, (dist.high - dist.low) // dist.step))
    if isinstance(dist, CategoricalDistribution):
        return _Encoding(dist, Categorical(tuple(range(len(dist.choices)))))
    raise ValueError(
        f"parameter {name!r}: PPBOSampler cannot model the distribution {dist!r}"
    )


def to_space(search_space: Mapping[str, BaseDistribution]) -> Space:
    """Return the :class:`ppbo.Space` that models an Optuna search space.

    ``FloatDistribution(low, high, log)`` becomes ``Real(low, high, log)``;
    ``IntDistribution(low, high, log)`` becomes ``Integer(low, high, log)``; a
    stepped float or integer becomes an ``Integer`` index ``k`` of the grid
    ``low + k * step``; a ``CategoricalDistribution`` becomes a ``Categorical`` of
    the choice indices ``0 ... k - 1`` (Optuna's internal representation), so that
    any choice Optuna accepts, ``None`` included, can be modelled.

    Args:
        search_space: parameter name -> Optuna distribution, none single-valued.

    Returns:
        The space, with the parameters in the order given.

    Raises:
        ValueError: for a single-valued or unknown distribution, naming the
            parameter.

    Example:
        >>> from optuna.distributions import FloatDistribution, IntDistribution
        >>> space = to_space({"lr": FloatDistribution(1e-4, 1e-1, log=True),
        ...                   "units": IntDistribution(8, 64, step=8)})
        >>> space.dimensions["lr"]
        Real(low=0.0001, high=0.1, log=True)
        >>> space.dimensions["units"]  # the grid index k of 8 + 8 k
        Integer(low=0, high=7, log=False)
    """
    return _space(search_space)[0]


def _space(
    search_space: Mapping[str, BaseDistribution],
) -> tuple[Space, dict[str, _Encoding]]:
    encodings = {}
    for name, dist in search_space.items():
        if dist.single():
            raise ValueError(
                f"parameter {name!r}: a single-valued distribution {dist!r} has "
                "nothing to model"
            )
        encodings[name] = _encoding(name, dist)
    space = Space({name: e.dimension for name, e in encodings.items()})
    return space, encodings


class PPBOSampler(BaseSampler):
    """An Optuna sampler whose relative sampling is one ppbo BO step.

    Each trial after the first ``n_startup_trials`` completed ones fits the
    surrogate (hyperparameters by ``inference``: MAP by default, ``"nuts"`` for
    the fully Bayesian GP) to the study's COMPLETE trials in the relative search
    space and maximises the marginalised acquisition, with the study's RUNNING
    trials as pending points. FAILED and PRUNED trials are not modelled.
    Parameters outside the relative space (a dynamic search space) and the
    startup trials come from ``independent_sampler``.

    Args:
        surrogate, inference, acquisition: as :class:`ppbo.Optimizer` (names such
            as ``"gp"``, ``"nuts"``, ``"log_ei"``, or objects); defaults: the GP
            with MAP hyperparameters and log-EI.
        n_startup_trials: completed trials before the model is used (>= 1).
        seed: root seed of the BO steps and of the default independent sampler;
            None draws one.
        independent_sampler: samples the startup trials and parameters outside
            the relative space (default: ``RandomSampler(seed)``).
        acquisition_samples, acquisition_options, optimizer_options: as
            :class:`ppbo.Optimizer`.
        warn_independent_sampling: log a warning when a parameter is sampled
            independently after the startup trials.

    Raises:
        ValueError: for a bad ``n_startup_trials``, ``seed`` or component name.
        ppbo.MissingCapabilityError: if the acquisition needs a capability the
            surrogate lacks.

    Example:
        >>> import optuna
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> sampler = PPBOSampler(n_startup_trials=2, seed=0,
        ...                       optimizer_options={"num_raw": 64, "num_restarts": 2})
        >>> study = optuna.create_study(sampler=sampler)
        >>> study.optimize(lambda t: (t.suggest_float("x", -1.0, 1.0) - 0.3) ** 2,
        ...                n_trials=3)
        >>> len(study.trials)
        3
    """

    def __init__(
        self,
        *,
        surrogate: Any = None,
        inference: Any = None,
        acquisition: Any = None,
        n_startup_trials: int = 10,
        seed: int | None = None,
        independent_sampler: BaseSampler | None = None,
        acquisition_samples: int | None = None,
        acquisition_options: Mapping[str, Any] | None = None,
        optimizer_options: Mapping[str, Any] | None = None,
        warn_independent_sampling: bool = True,
    ) -> None:
        jax.config.update("jax_enable_x64", True)
        if (
            isinstance(n_startup_trials, bool)
            or not isinstance(n_startup_trials, int | np.integer)
            or n_startup_trials < 1
        ):
            raise ValueError(
                f"n_startup_trials must be an integer >= 1, got {n_startup_trials!r}"
            )
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, int | np.integer)
        ):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        parts, _ = registry.resolve_components(surrogate, inference, acquisition)
        check_acquisition(parts["surrogate"], parts["acquisition"], acquisition_samples)
        if parts["acquisition"].name == "gp_hedge":
            raise ValueError(
                "acquisition='gp_hedge' needs a ppbo campaign, which stores the "
                "portfolio's gains with its trials; the sampler takes one acquisition"
            )
        self._surrogate = parts["surrogate"]
        self._inference = parts["inference"]
        self._acquisition = parts["acquisition"]
        self._acquisition_samples = acquisition_samples
        self._acquisition_options = dict(acquisition_options or {})
        self._optimizer_options = dict(optimizer_options or {})
        self._n_startup_trials = int(n_startup_trials)
        self._seed = _draw_seed() if seed is None else int(seed)
        self._independent = independent_sampler or RandomSampler(seed=seed)
        self._intersection = IntersectionSearchSpace()
        self._warn_independent = bool(warn_independent_sampling)

    def reseed_rng(self) -> None:
        """Draw a new root seed (Optuna calls this for parallel workers)."""
        self._seed = _draw_seed()
        self._independent.reseed_rng()

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        """The distributions shared by every completed trial, except single ones.

        Example:
            >>> sampler = PPBOSampler(seed=0)
            >>> study = optuna.create_study(sampler=sampler)
            >>> sampler.infer_relative_search_space(study, None)
            {}
        """
        return {
            name: dist
            for name, dist in self._intersection.calculate(study).items()
            if not dist.single()
        }

    def sample_relative(
        self,
        study: Study,
        trial: FrozenTrial,
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any]:
        """Propose the relative parameters of ``trial`` with one ppbo BO step.

        Returns ``{}`` (all parameters sampled independently) for an empty
        space or before ``n_startup_trials`` trials have completed with a finite
        value.

        Raises:
            ValueError: for a multi-objective study.

        Example:
            >>> sampler = PPBOSampler(seed=0)
            >>> study = optuna.create_study(sampler=sampler)
            >>> sampler.sample_relative(study, None, {})
            {}
        """
        if not search_space:
            return {}
        if len(study.directions) != 1:
            raise ValueError(
                f"PPBOSampler supports single-objective studies; study "
                f"{study.study_name!r} has directions {study.directions}"
            )
        states = (TrialState.COMPLETE, TrialState.RUNNING)
        trials = study.get_trials(deepcopy=False, states=states)
        names = search_space.keys()
        # +-inf values are kept (the model sees them clipped), NaN never completes
        complete = [
            t
            for t in trials
            if t.state == TrialState.COMPLETE
            and _matches(t.distributions, search_space)
            and not math.isnan(t.value)
        ]
        finite = [t for t in complete if math.isfinite(t.value)]
        if len(finite) < self._n_startup_trials:
            return {}
        space, encodings = _space(search_space)

        def unit(params: Mapping[str, Any]) -> np.ndarray:
            return space.to_unit({n: encodings[n].to_ppbo(params[n]) for n in names})

        X = np.stack([unit(t.params) for t in complete])
        values = np.array([t.value for t in complete], dtype=np.float64)
        data, _ = model_data(X, values, study.direction == StudyDirection.MAXIMIZE)
        pending = [
            unit(params)
            for t in trials
            if t.state == TrialState.RUNNING and t.number != trial.number
            for params in [_running_params(t, search_space)]
            if params is not None
        ]
        discrete = any(not isinstance(e.dimension, Real) for e in encodings.values())
        result = step(
            campaign_key(self._seed, trial.number, "step"),
            self._surrogate,
            self._inference,
            self._acquisition,
            data,
            pending=np.stack(pending) if pending else None,
            acquisition_samples=self._acquisition_samples,
            acquisition_options=self._acquisition_options,
            optimizer_options=self._optimizer_options,
            snap=(lambda U: np.stack([space.snap(u) for u in U])) if discrete else None,
        )
        chosen = space.from_unit(space.snap(result.X[0]))
        params = {n: encodings[n].to_optuna(chosen[n]) for n in names}
        study._storage.set_trial_system_attr(
            trial._trial_id, _PENDING_ATTR, _json_params(params, search_space)
        )
        return params

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        """Sample one parameter outside the relative space independently.

        Example:
            >>> from optuna.distributions import FloatDistribution
            >>> sampler = PPBOSampler(seed=0)
            >>> study = optuna.create_study(sampler=sampler)
            >>> trial = study.ask()
            >>> 0.0 <= trial.suggest_float("x", 0.0, 1.0) <= 1.0
            True
        """
        if self._warn_independent:
            done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if len(done) >= self._n_startup_trials:
                optuna.logging.get_logger(__name__).warning(
                    f"parameter {param_name!r} of trial {trial.number} is sampled by "
                    f"{type(self._independent).__name__}, not PPBOSampler: it is not "
                    "in every completed trial (a dynamic search space)"
                )
        return self._independent.sample_independent(
            study, trial, param_name, param_distribution
        )

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        """Pass the trial to the independent sampler."""
        self._independent.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        """Pass the finished trial to the independent sampler."""
        self._independent.after_trial(study, trial, state, values)


def _draw_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0] & 0x7FFFFFFF)


def _matches(
    distributions: Mapping[str, BaseDistribution],
    search_space: Mapping[str, BaseDistribution],
) -> bool:
    return all(distributions.get(n) == d for n, d in search_space.items())


def _json_params(
    params: Mapping[str, Any], search_space: Mapping[str, BaseDistribution]
) -> dict[str, float]:
    # Optuna's internal representation: floats, whatever the choices are
    return {n: search_space[n].to_internal_repr(v) for n, v in params.items()}


def _running_params(
    trial: FrozenTrial, search_space: Mapping[str, BaseDistribution]
) -> dict[str, Any] | None:
    """A RUNNING trial's parameters in the space, or None if some are unknown."""
    shared = trial.system_attrs.get(_PENDING_ATTR) or {}
    params = {}
    for name, dist in search_space.items():
        if name in trial.params and trial.distributions.get(name) == dist:
            params[name] = trial.params[name]
        elif name in shared:
            params[name] = dist.to_external_repr(shared[name])
        else:
            return None
    return params
