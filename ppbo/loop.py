"""Bayesian-optimisation campaigns: one step in model space, and ask/tell.

:func:`suggest` is the functional core: given observations in model space (inputs
in the unit cube, outputs standardised and to be maximised) it fits the
surrogate's hyperparameter posterior (warm-started from the previous one) and
returns the maximiser of the marginalised acquisition.

:class:`Optimizer` runs a campaign in the user's units over a :class:`ppbo.Space`
with the ask/tell interface of Optuna (``ask``, ``tell``, ``abandon``, trials in
states RUNNING / COMPLETE / FAILED / ABANDONED), keeping every trial and each
iteration's posterior in a :mod:`ppbo.storage` so that a campaign resumes exactly;
:func:`minimize` and :func:`maximize` run a whole campaign on a Python function.
Batches and concurrent asks treat RUNNING trials as pending points (the Kriging
believer of Ginsbourger, Le Riche and Carraro 2010).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.acquisition.base import Acquisition
from ppbo.data import Dataset, bucket_capacity
from ppbo.inference import fit
from ppbo.optimize import optimize_acquisition
from ppbo.space import Space
from ppbo.storage.base import Trial, TrialState
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "Suggestion",
    "suggest",
    "standardize",
    "Optimizer",
    "Recommended",
    "Result",
    "CampaignWarning",
    "minimize",
    "maximize",
    "DEFAULT_ACQUISITION",
    "DEFAULT_INFERENCE",
]


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


# -- the campaign: ask/tell over a search space, kept in a storage --------------------

#: Acquisition used when none is given: log-EI, the acquisition with the best
#: measured regret of the best evaluated point (benchmarks/README.md); it needs only
#: the surrogate's predictive mean and variance, so it applies to every surrogate.
DEFAULT_ACQUISITION = "log_ei"
#: Inference used when none is given: MAP hyperparameters, which found better best
#: values than NUTS at 30 evaluations on three of the six problems of
#: benchmarks/README.md and worse on one, at a fraction of the time per step (the
#: fully Bayesian GP explores more); NUTS is ``inference="nuts"``.
DEFAULT_INFERENCE = "MAP"

_DESIGNS = ("lhs", "sobol", "random")
# Campaigns start in a 32-row bucket: padding costs microseconds at this size, and
# a typical campaign of a few dozen evaluations then compiles its fit and
# acquisition once instead of once per 8 new points.
_MIN_CAPACITY = 32
_DIRECTIONS = ("minimize", "maximize")


class CampaignWarning(UserWarning):
    """Something a campaign did with a told value that the user should know."""


def _acquisitions() -> dict[str, Acquisition]:
    from ppbo import acquisition as acq

    return {
        "pes": acq.pes,
        "es": acq.es,
        "ei": acq.ei,
        "log_ei": acq.log_ei,
        "pi": acq.pi,
        "ucb": acq.ucb,
        "kg": acq.kg,
        "thompson": acq.thompson,
        "mes": acq.mes,
    }


@functools.cache
def _gp_surrogate(kernel: str, mean: str) -> Surrogate:
    # one object per configuration and process: compiled fits and acquisitions are
    # cached per surrogate object, so campaigns in one process share them
    from ppbo.models import gp

    return gp.surrogate(kernel=kernel, mean=mean)


def _resolve_surrogate(surrogate: Any) -> tuple[Surrogate, dict]:
    if surrogate is None:
        surrogate = "gp"
    if isinstance(surrogate, str):
        name, _, kernel = surrogate.partition("-")
        if name != "gp":
            raise ValueError(
                f"surrogate must be a ppbo.Surrogate or 'gp' / 'gp-<kernel>' (e.g. "
                f"'gp-matern52', 'gp-rbf'), got {surrogate!r}"
            )
        surrogate = {"name": "gp", "kernel": kernel or "matern52"}
    if isinstance(surrogate, Mapping):
        spec = dict(surrogate)
        if spec.get("name") != "gp":
            raise ValueError(f"surrogate spec must have name 'gp', got {spec!r}")
        kernel = spec.get("kernel", "matern52")
        mean = spec.get("mean", "constant")
        return _gp_surrogate(kernel, mean), {
            "name": "gp",
            "kernel": kernel,
            "mean": mean,
        }
    if isinstance(surrogate, Surrogate):
        return surrogate, {"name": "custom", "repr": surrogate.name}
    raise ValueError(f"surrogate must be a ppbo.Surrogate or a name, got {surrogate!r}")


def _inference_classes() -> dict[str, type]:
    from ppbo.inference import MAP, NUTS, Fixed, Slice

    return {"NUTS": NUTS, "Slice": Slice, "MAP": MAP, "Fixed": Fixed}


def _resolve_inference(inference: Any) -> tuple[Any, dict]:
    classes = _inference_classes()
    if inference is None:
        inference = DEFAULT_INFERENCE
    if isinstance(inference, str):
        by_lower = {name.lower(): cls for name, cls in classes.items()}
        if inference.lower() not in by_lower or inference.lower() == "fixed":
            raise ValueError(
                f"inference must be one of 'nuts', 'slice', 'map' or an inference "
                f"object, got {inference!r}"
            )
        inference = by_lower[inference.lower()]()
    if isinstance(inference, Mapping):
        spec = dict(inference)
        cls = classes.get(spec.get("name"))
        if cls is None:
            raise ValueError(f"unknown inference spec {spec!r}")
        inference = cls(**spec.get("options", {}))
    for name, cls in classes.items():
        if type(inference) is cls:
            options = {
                f.name: getattr(inference, f.name) for f in dataclasses.fields(cls)
            }
            if name == "Fixed":
                options = {
                    "params": {
                        k: np.asarray(v, dtype=np.float64).tolist()
                        for k, v in options["params"].items()
                    }
                }
            return inference, {"name": name, "options": options}
    if not callable(getattr(inference, "fit", None)):
        raise ValueError(
            f"inference must be ppbo.NUTS/Slice/MAP/Fixed or have a fit(key, "
            f"surrogate, data) method, got {inference!r}"
        )
    return inference, {"name": "custom", "repr": repr(inference)}


def _default_acquisition(surrogate: Surrogate) -> str:
    del surrogate  # log-EI needs only the predictive mean and variance
    return DEFAULT_ACQUISITION


def _resolve_acquisition(acquisition: Any) -> tuple[Acquisition, dict]:
    table = _acquisitions()
    if isinstance(acquisition, str):
        if acquisition not in table:
            raise ValueError(
                f"acquisition must be one of {sorted(table)} or an Acquisition, got "
                f"{acquisition!r}"
            )
        return table[acquisition], {"name": acquisition}
    if isinstance(acquisition, Acquisition):
        if table.get(acquisition.name) is acquisition:
            return acquisition, {"name": acquisition.name}
        return acquisition, {"name": "custom", "repr": acquisition.name}
    raise ValueError(
        f"acquisition must be an Acquisition or a name, got {acquisition!r}"
    )


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

    Each ask uses the key ``fold_in(key(seed), iteration)`` with ``iteration`` the
    number of trials asked before it, warm-starts the fit from the posterior stored
    by the previous ask, and stores its own posterior (samples and sampler state)
    with the new trials in one transaction; so a campaign reloaded with
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
            ``Fixed``, or ``"map"``, ``"nuts"``, ``"slice"``.
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
        if direction not in _DIRECTIONS:
            raise ValueError(
                f"direction must be one of {_DIRECTIONS}, got {direction!r}"
            )
        if initial_design not in _DESIGNS:
            raise ValueError(
                f"initial_design must be one of {_DESIGNS}, got {initial_design!r}"
            )
        if n_initial is None:
            n_initial = max(3, 2 * len(space))
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
        surrogate, surrogate_spec = _resolve_surrogate(surrogate)
        inference, inference_spec = _resolve_inference(inference)
        if acquisition is None:
            acquisition = _default_acquisition(surrogate)
        acquisition, acquisition_spec = _resolve_acquisition(acquisition)
        if acquisition.name == "pes" and acquisition is _acquisitions().get("pes"):
            from ppbo.acquisition.pes import check_surrogate

            check_surrogate(surrogate)
        if acquisition_samples is not None and (
            isinstance(acquisition_samples, bool)
            or not isinstance(acquisition_samples, numbers.Integral)
            or acquisition_samples < 1
        ):
            raise ValueError(
                "acquisition_samples must be a positive integer or None, got "
                f"{acquisition_samples!r}"
            )
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
            "acquisition_options": _json_ready(
                "acquisition_options", acquisition_options
            ),
            "optimizer_options": _json_ready("optimizer_options", optimizer_options),
            "metadata": _json_ready("metadata", metadata),
        }
        existing = self._storage.get_campaign(name)
        if existing is not None and load_if_exists:
            campaign = existing
            _check_compatible(existing.config, config)
        else:
            campaign = self._storage.create_campaign(name, config)
        self._init(campaign, space, surrogate, inference, acquisition)

    def _init(self, campaign, space, surrogate, inference, acquisition) -> None:
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
            ("surrogate", surrogate, _resolve_surrogate),
            ("inference", inference, _resolve_inference),
            ("acquisition", acquisition, _resolve_acquisition),
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
            self._posterior_cache = (iteration, self._decode_posterior(blob))
        return self._posterior_cache[1]

    # -- ask --------------------------------------------------------------------------
    def ask(self, n: int | None = None) -> Trial | list[Trial]:
        """Suggest the next trial, or a batch of ``n`` trials.

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
            trials = self._ask(int(count))
        return trials if n is not None else trials[0]

    def _ask(self, count: int) -> list[Trial]:
        trials = self.get_trials()
        iteration = len(trials)
        key = jax.random.fold_in(jax.random.key(self._seed), iteration)
        numbers_ = range(iteration, iteration + count)
        rows: list[dict] = []
        for number in numbers_:
            if number < self._n_initial:
                u = self._space.snap(self._design_points()[number])
                rows.append(self._row(u, iteration, "design"))
        remaining = count - len(rows)
        posterior_record = None
        if remaining:
            data, _ = self._model_data(trials)
            if data is None:
                key_random = jax.random.fold_in(key, 1)
                U = np.asarray(
                    jax.random.uniform(key_random, (remaining, self._space.dim))
                )
                rows += [self._row(self._space.snap(u), iteration, "random") for u in U]
            else:
                pending = [
                    self._space.to_unit(t.params)
                    for t in trials
                    if t.state == TrialState.RUNNING
                ]
                pending += [np.asarray(r["unit"]) for r in rows]
                X, posterior, extra = self._suggest(key, data, remaining, pending)
                rows += [
                    self._row(self._space.snap(x), iteration, "model", extra) for x in X
                ]
                posterior_record = (iteration, self._encode_posterior(posterior))
                self._posterior_cache = (iteration, posterior)
        for row in rows:
            del row["unit"]
        return self._storage.add_trials(self._campaign.id, rows, posterior_record)

    def _row(self, u, iteration, origin, extra=None) -> dict:
        return {
            "params": self._space.from_unit(u),
            "unit": u,
            "state": TrialState.RUNNING,
            "iteration": iteration,
            "origin": origin,
            "extra": dict(extra or {}),
        }

    def _design_points(self) -> np.ndarray:
        from scipy.stats import qmc

        d, n = self._space.dim, self._n_initial
        if self._design == "lhs":
            return qmc.LatinHypercube(d, seed=self._seed).random(n)
        if self._design == "sobol":
            return qmc.Sobol(d, scramble=True, seed=self._seed).random(n)
        return np.random.default_rng(self._seed).random((n, d))

    def _model_data(self, trials: list[Trial]) -> tuple[Dataset | None, tuple]:
        """COMPLETE trials in model space and the standardisation (shift, scale)."""
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        values = np.array([t.value for t in complete], dtype=np.float64)
        finite = np.isfinite(values)
        if not finite.any():
            return None, (0.0, 1.0)
        values = np.clip(values, values[finite].min(), values[finite].max())
        X = np.stack([self._space.to_unit(t.params) for t in complete])
        sign = 1.0 if self._direction == "maximize" else -1.0
        # divide by the largest magnitude first so that values up to the largest
        # float64 do not overflow the mean and the standard deviation
        magnitude = float(np.max(np.abs(values)))
        magnitude = magnitude if magnitude > 0 else 1.0
        signed = sign * (values / magnitude)
        shift, scale = signed.mean(), signed.std()
        scale = scale if scale > 0 else 1.0
        y = (signed - shift) / scale
        capacity = bucket_capacity(len(y), minimum=_MIN_CAPACITY)
        return Dataset(X, y, capacity=capacity), (shift * magnitude, scale * magnitude)

    def _suggest(self, key, data, q, pending):
        from ppbo.surrogate import DiagnosticWarning

        key_fit, key_opt = jax.random.split(key)
        start = time.perf_counter()
        init = self.posterior
        posterior = fit(self._surrogate, data, self._inference, key_fit, init=init)
        fit_seconds = time.perf_counter() - start
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DiagnosticWarning)
            report = posterior.diagnostics(warn=False)
        start = time.perf_counter()
        thinned = posterior.thin(self._acq_samples) if self._acq_samples else posterior
        options = dict(self._acq_options)
        if self._acquisition is _acquisitions()["ucb"] and not {"beta", "t"} & set(
            options
        ):
            # GP-UCB's schedule (Srinivas et al. 2010, Theorem 2) needs the
            # round t: the number of observations the model conditions on
            options["t"] = float(data.n)
        X, _ = optimize_acquisition(
            self._acquisition,
            thinned,
            key_opt,
            q=q,
            pending=np.stack(pending) if pending else None,
            **self._opt_options,
            **options,
        )
        extra = {
            "fit_seconds": fit_seconds,
            "acquisition_seconds": time.perf_counter() - start,
            "diagnostics": list(report.warnings),
        }
        return X, posterior, extra

    # -- posteriors in storage -------------------------------------------------------
    def _encode_posterior(self, posterior: Posterior) -> bytes:
        from ppbo.storage import encode_arrays

        state = posterior.state if _is_array_tree(posterior.state) else {}
        X, y, _ = posterior.data.unpadded()
        return encode_arrays(
            {
                "samples": {k: np.asarray(v) for k, v in posterior.samples.items()},
                "sample_stats": {
                    k: np.asarray(v) for k, v in posterior.sample_stats.items()
                },
                "state": jax.tree.map(np.asarray, state),
                "data": {"X": X, "y": y, "capacity": np.array(posterior.data.capacity)},
                "meta": {
                    "num_chains": np.array(posterior.num_chains),
                    "method": np.array(posterior.method),
                },
            }
        )

    def _decode_posterior(self, blob: bytes) -> Posterior:
        from ppbo.inference._mcmc import prepare_cache
        from ppbo.storage import decode_arrays

        arrays = decode_arrays(blob)
        data = Dataset(
            arrays["data"]["X"],
            arrays["data"]["y"],
            capacity=int(arrays["data"]["capacity"]),
        )
        samples = {k: jnp.asarray(v) for k, v in arrays["samples"].items()}
        state = jax.tree.map(jnp.asarray, arrays.get("state") or {}) or None
        return Posterior(
            self._surrogate,
            samples,
            data,
            cache=prepare_cache(self._surrogate, samples, data),
            sample_stats={
                k: jnp.asarray(v) for k, v in arrays.get("sample_stats", {}).items()
            },
            state=state,
            num_chains=int(arrays["meta"]["num_chains"]),
            method=str(arrays["meta"]["method"]),
        )

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
    ) -> Trial:
        """Record a RUNNING trial's objective value, or that it failed.

        Args:
            trial: the :class:`~ppbo.storage.Trial` from :meth:`ask` or its number.
            value: the objective value (a real scalar). NaN marks the trial
                FAILED; +-inf completes it (the model sees it clipped).
            failed: mark the trial FAILED instead (give no value).
            message: an optional note (e.g. the error of a failed evaluation).

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
        if self._storage.get_trial(cid, number) is None:
            raise KeyError(f"trial {number!r} does not exist in campaign {self.name!r}")
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

    def add(self, params: Mapping[str, Any], value: Any) -> Trial:
        """Record an evaluation the optimiser did not suggest (like Optuna's
        ``add_trial``): validated parameters and their value.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> opt.add({"x": 0.5}, 1.0).origin
            'user'
        """
        params = self._space.validate(params)
        value = _check_value(value)
        with self._storage.ask_lock(self._campaign.id):
            (trial,) = self._storage.add_trials(
                self._campaign.id,
                [{"params": params, "state": TrialState.RUNNING, "origin": "user"}],
            )
        return self.tell(trial, value)

    # -- recommend -------------------------------------------------------------------
    def _fit_all(self) -> tuple[Posterior, tuple[float, float]]:
        trials = self.get_trials()
        data, standardization = self._model_data(trials)
        if data is None:
            raise ValueError(
                f"campaign {self.name!r} has no COMPLETE trial with a finite value yet"
            )
        key = jax.random.fold_in(
            jax.random.fold_in(jax.random.key(self._seed), len(trials)), 2
        )
        posterior = fit(
            self._surrogate, data, self._inference, key, init=self.posterior
        )
        return posterior, standardization

    def fit(self) -> Posterior:
        """The posterior given every COMPLETE trial, in model space.

        Fitted with its own key and warm-started from the latest posterior; not
        stored, so it does not change the campaign's later suggestions. Inspect it
        with ``posterior.to_arviz()``.

        Raises:
            ValueError: before any trial has completed with a finite value.

        Example:
            >>> opt = Optimizer({"x": ppbo.Real(0.0, 1.0)}, inference=ppbo.MAP())
            >>> _ = opt.add({"x": 0.2}, 1.0)
            >>> opt.fit().data.n
            1
        """
        return self._fit_all()[0]

    def recommend(self, **options: Any) -> Recommended:
        """The minimiser (maximiser) of the posterior-mean objective.

        Fits the surrogate to all COMPLETE trials (warm-started from the latest
        posterior, with its own key; nothing is stored, so the campaign's later
        suggestions do not depend on whether this was called), then maximises the
        posterior-mixture mean, as the PES paper recommends (Hernández-Lobato et
        al. 2014, §4).

        Args:
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

        posterior, (shift, scale) = self._fit_all()
        key = jax.random.fold_in(
            jax.random.fold_in(jax.random.key(self._seed), len(self.get_trials())), 3
        )
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


def _is_array_tree(tree: Any) -> bool:
    if not isinstance(tree, Mapping):
        return False
    return all(
        isinstance(v, jax.Array | np.ndarray)
        or (isinstance(v, Mapping) and _is_array_tree(v))
        for v in tree.values()
    )


def _json_ready(field: str, value: Mapping[str, Any] | None) -> dict:
    from ppbo.storage.base import dumps

    value = dict(value or {})
    try:
        dumps(value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{field} must be JSON-ready (numbers, strings): {error}"
        ) from None
    return value


def _check_compatible(stored: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    for field in ("space", "direction"):
        if stored[field] != given[field]:
            raise ValueError(
                f"campaign exists with a different {field}: stored {stored[field]!r}, "
                f"given {given[field]!r}"
            )


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

    def evaluate(trial: Trial) -> None:
        try:
            value = fn(dict(trial.params))
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
