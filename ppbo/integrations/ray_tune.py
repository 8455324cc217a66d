"""A Ray Tune searcher backed by a stored ppbo campaign.

:class:`PPBOSearch` is a Ray Tune ``Searcher`` (Liaw et al. 2018): Tune runs the
trials on a Ray cluster, and every suggestion is an ask of a
:class:`ppbo.Optimizer` campaign whose trials live in ppbo's SQLite storage.
Trials still running are RUNNING trials of the campaign, so the next suggestion
treats them as pending points (the Kriging believer of Ginsbourger, Le Riche and
Carraro 2010); this is what makes it work under Tune's ``ConcurrencyLimiter``.
A trial that raised, reported no metric or reported NaN becomes a FAILED trial
(kept, not modelled), never silently dropped; each tell is committed before
``on_trial_complete`` returns, so a killed worker or driver loses no completed
trial.

``save`` writes a small JSON file (the campaign's storage path and name and the
map from Tune trial ids to trial numbers), never a pickle of ppbo state; a
campaign in an in-memory storage is first copied to an SQLite file next to the
checkpoint. ``restore`` reopens the campaign with :meth:`ppbo.Optimizer.load`,
so the next suggestion is the one the uninterrupted run would have made.

The search space is a :class:`ppbo.Space` or Tune's ``param_space``:
``tune.uniform`` and ``tune.loguniform`` become :class:`ppbo.Real`,
``tune.randint`` and ``tune.lograndint`` (upper bound exclusive) become
:class:`ppbo.Integer`, ``tune.choice`` becomes :class:`ppbo.Categorical`; nested
dictionaries are flattened with ``"/"``; constants are passed through.

References:
    Liaw, R., Liang, E., Nishihara, R., Moritz, P., Gonzalez, J. E. and Stoica, I.
    (2018). Tune: A Research Platform for Distributed Model Selection and
    Training. ICML AutoML workshop.
    Ginsbourger, D., Le Riche, R. and Carraro, L. (2010). Kriging is well-suited
    to parallelize optimization. Computational Intelligence in Expensive
    Optimization Problems, Springer.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import uuid
import warnings
from collections.abc import Mapping
from typing import Any

from ray.tune.search import Searcher
from ray.tune.search.sample import Categorical as TuneCategorical
from ray.tune.search.sample import Domain, LogUniform, Quantized, Uniform
from ray.tune.search.sample import Float as TuneFloat
from ray.tune.search.sample import Integer as TuneInteger
from ray.tune.search.variant_generator import parse_spec_vars

from ppbo.campaign.optimizer import Optimizer
from ppbo.campaign.trials import CampaignWarning
from ppbo.space import Categorical, Integer, Real, Space
from ppbo.storage.base import TrialState

__all__ = ["PPBOSearch", "to_space"]

_FORMAT = "ppbo.integrations.ray_tune.PPBOSearch"
_VERSION = 1


def _dimension(name: str, domain: Domain) -> Any:
    sampler = domain.get_sampler()
    if isinstance(sampler, Quantized):
        raise ValueError(
            f"parameter {name!r}: quantized Tune domains are not supported; use "
            "tune.randint over grid indices"
        )
    log = isinstance(sampler, LogUniform)
    if isinstance(domain, TuneFloat) and isinstance(sampler, Uniform | LogUniform):
        return Real(float(domain.lower), float(domain.upper), log=log)
    if isinstance(domain, TuneInteger) and isinstance(sampler, Uniform | LogUniform):
        # Tune's integer upper bounds are exclusive
        return Integer(int(domain.lower), int(domain.upper) - 1, log=log)
    if isinstance(domain, TuneCategorical) and isinstance(sampler, Uniform):
        return Categorical(list(domain.categories))
    raise ValueError(
        f"parameter {name!r}: PPBOSearch cannot model a {type(domain).__name__} "
        f"domain sampled by {type(sampler).__name__}"
    )


def _split(config: Mapping[str, Any]) -> tuple[Space | None, dict[str, Any]]:
    """A Tune param_space as a ppbo Space (names joined by "/") and constants."""
    resolved, domains, grids = parse_spec_vars(dict(config))
    if grids:
        names = ["/".join(map(str, path)) for path, _ in grids]
        raise ValueError(f"grid_search parameters {names} cannot be modelled")
    constants = {"/".join(map(str, path)): value for path, value in resolved}
    if not domains:
        return None, constants
    space = Space(
        {
            "/".join(map(str, path)): _dimension("/".join(map(str, path)), domain)
            for path, domain in domains
        }
    )
    return space, constants


def to_space(config: Mapping[str, Any]) -> Space:
    """Return the :class:`ppbo.Space` of the Tune domains in ``config``.

    Args:
        config: a Tune ``param_space``, possibly nested; constants are ignored.

    Returns:
        The space; nested names are joined with ``"/"``.

    Raises:
        ValueError: for a domain that cannot be modelled (grid search, quantized
            or normal samplers, sample_from), naming the parameter, or for a
            config without domains.

    Example:
        >>> from ray import tune
        >>> space = to_space({"lr": tune.loguniform(1e-4, 1e-1),
        ...                   "net": {"units": tune.randint(8, 65)}, "epochs": 3})
        >>> space.dimensions["net/units"]  # Tune's upper bound is exclusive
        Integer(low=8, high=64, log=False)
    """
    space, _ = _split(config)
    if space is None:
        raise ValueError(f"config has no Tune search domains: {dict(config)!r}")
    return space


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split("/")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flat(value, name + "/"))
        else:
            flat[name] = value
    return flat


class PPBOSearch(Searcher):
    """A Ray Tune searcher whose suggestions are asks of a ppbo campaign.

    Args:
        space: a :class:`ppbo.Space` or a Tune ``param_space`` (or None: Tune
            passes the Tuner's ``param_space`` through ``set_search_properties``).
        metric: the reported metric to optimise.
        mode: ``"min"`` or ``"max"``.
        storage: an SQLite file path (or :class:`ppbo.storage.SQLiteStorage`)
            holding the campaign; None keeps it in memory, and ``save`` then
            copies it to a file next to the checkpoint.
        name: the campaign's name (default: generated).
        load_if_exists: continue the campaign ``name`` if ``storage`` has it.
        **options: :class:`ppbo.Optimizer` options (``surrogate``,
            ``inference``, ``acquisition``, ``n_initial``, ``seed``,
            ``optimizer_options`` ...).

    Raises:
        ValueError: for a space that cannot be modelled, naming the parameter.

    Example:
        >>> search = PPBOSearch({"x": ppbo.Real(-2.0, 2.0)}, metric="loss",
        ...                     mode="min", n_initial=2, seed=0)
        >>> config = search.suggest("trial-a")
        >>> search.on_trial_complete("trial-a", {"loss": config["x"] ** 2})
        >>> search.on_trial_complete("trial-b", None, error=True)  # unknown: ignored
        >>> [t.state for t in search.optimizer.get_trials()]
        ['COMPLETE']
    """

    def __init__(
        self,
        space: Space | Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        *,
        storage: Any = None,
        name: str | None = None,
        load_if_exists: bool = False,
        **options: Any,
    ) -> None:
        if mode is not None and mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")
        if metric is not None and not isinstance(metric, str):
            raise ValueError(f"metric must be one name (a str), got {metric!r}")
        super().__init__(metric=metric, mode=mode)
        for key in ("space", "direction", "storage", "name", "load_if_exists"):
            if key in options:  # pragma: no cover - caught by the signature
                raise ValueError(f"option {key!r} is set by PPBOSearch")
        self._options = dict(options)
        self._storage_arg = storage
        self._name = name or f"tune-{uuid.uuid4().hex[:8]}"
        self._load_if_exists = bool(load_if_exists)
        self._space: Space | None = None
        self._constants: dict[str, Any] = {}
        if space is not None:
            self._set_space(space)
        self._optimizer: Optimizer | None = None
        self._trials: dict[str, int] = {}

    def _set_space(self, space: Space | Mapping[str, Any]) -> None:
        if isinstance(space, Space):
            self._space, self._constants = space, {}
            return
        if all(
            isinstance(v, Real | Integer | Categorical) for v in dict(space).values()
        ):
            self._space, self._constants = Space(space), {}
            return
        self._space, self._constants = _split(space)
        if self._space is None:
            raise ValueError(f"space has no Tune search domains: {dict(space)!r}")

    # -- Tune's Searcher interface ---------------------------------------------------
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        """Take the metric, mode and ``param_space`` from Tune.

        Returns False (Tune then reports the conflict) when a space was given
        at construction and ``config`` has search domains too, or when the
        campaign has started.

        Example:
            >>> from ray import tune
            >>> search = PPBOSearch()
            >>> search.set_search_properties("loss", "min", {"x": tune.uniform(0, 1)})
            True
        """
        if self._optimizer is not None:
            return False
        if self._space is not None and config and parse_spec_vars(config)[1]:
            return False
        if self._space is None and config:
            self._set_space(config)
        if metric:
            self._metric = metric
        if mode:
            if mode not in ("min", "max"):
                raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
            self._mode = mode
        return True

    @property
    def optimizer(self) -> Optimizer:
        """The campaign (created on first use).

        Raises:
            RuntimeError: if the space, metric or mode is not set yet.
        """
        if self._optimizer is None:
            if self._space is None:
                raise RuntimeError(
                    "PPBOSearch has no search space: pass space= or a Tuner param_space"
                )
            if not self._metric or not self._mode:
                raise RuntimeError(
                    f"PPBOSearch needs metric and mode, got metric={self._metric!r}, "
                    f"mode={self._mode!r}"
                )
            self._optimizer = Optimizer(
                self._space,
                direction="minimize" if self._mode == "min" else "maximize",
                storage=self._storage_arg,
                name=self._name,
                load_if_exists=self._load_if_exists,
                **self._options,
            )
        return self._optimizer

    def suggest(self, trial_id: str) -> dict | None:
        """Ask the campaign for a trial; return its Tune config.

        Example:
            >>> search = PPBOSearch({"x": ppbo.Real(0.0, 1.0)}, "loss", "min",
            ...                     n_initial=2)
            >>> sorted(search.suggest("a"))
            ['x']
        """
        trial = self.optimizer.ask()
        self._trials[trial_id] = trial.number
        return _nest({**self._constants, **trial.params})

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Tell the campaign a trial's final metric, or mark it FAILED.

        An error, a missing or non-numeric metric, or NaN marks the trial FAILED
        with a message; ``+-inf`` completes it. Ids this searcher never suggested
        are ignored.

        Example:
            >>> search = PPBOSearch({"x": ppbo.Real(0.0, 1.0)}, "loss", "min")
            >>> _ = search.suggest("a")
            >>> search.on_trial_complete("a", {"loss": float("nan")})
            >>> search.optimizer.get_trials()[0].message
            "metric 'loss' is nan"
        """
        number = self._trials.pop(trial_id, None)
        if number is None:
            return
        message = _failure(result, self._metric, error)
        if message is not None:
            self.optimizer.tell(number, failed=True, message=message)
        else:
            self.optimizer.tell(number, float(result[self._metric]))

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Record an evaluation made outside Tune (a user trial of the campaign).

        Raises:
            ValueError: for an errored or pruned point (a ppbo campaign records
                only evaluations with values), or bad parameters.

        Example:
            >>> search = PPBOSearch({"x": ppbo.Real(0.0, 1.0)}, "loss", "min")
            >>> search.add_evaluated_point({"x": 0.5}, 0.25)
            >>> search.optimizer.get_trials()[0].origin
            'user'
        """
        if error or pruned:
            raise ValueError(
                "PPBOSearch records evaluated points with a value only, got "
                f"error={error!r}, pruned={pruned!r}"
            )
        flat = _flat(parameters)
        params = {n: flat[n] for n in self.optimizer.space.names if n in flat}
        self.optimizer.add(params, value)

    def save(self, checkpoint_path: str) -> None:
        """Write the campaign's location and the trial-id map as JSON.

        A campaign in memory is first copied to ``ppbo-<name>.db`` in the
        checkpoint's folder (replaced atomically).

        Example:
            >>> import pathlib, tempfile
            >>> folder = pathlib.Path(tempfile.mkdtemp())
            >>> search = PPBOSearch({"x": ppbo.Real(0.0, 1.0)}, "loss", "min")
            >>> _ = search.suggest("a")
            >>> search.save(str(folder / "state.json"))
            >>> sorted(json.loads((folder / "state.json").read_text()))
            ['format', 'metric', 'mode', 'name', 'storage', 'trials', 'version']
        """
        optimizer = self.optimizer
        storage = optimizer.storage
        path = getattr(storage, "path", None)
        if path is None:
            raise ValueError(
                f"PPBOSearch.save needs an SQLite storage, got {storage!r}"
            )
        if path == ":memory:":
            folder = os.path.dirname(os.path.abspath(checkpoint_path))
            path = os.path.join(folder, f"ppbo-{self._name}.db")
            _copy_campaign(storage, self._name, path)
        state = {
            "format": _FORMAT,
            "version": _VERSION,
            "storage": os.path.abspath(path),
            "name": self._name,
            "metric": self._metric,
            "mode": self._mode,
            "trials": dict(self._trials),
        }
        with open(checkpoint_path, "w") as sink:
            json.dump(state, sink, indent=1)

    def restore(self, checkpoint_path: str) -> None:
        """Reopen the campaign named in a :meth:`save` file.

        RUNNING trials that Tune no longer tracks (not in the saved map) are
        abandoned; the tracked ones stay pending until Tune completes them.

        Raises:
            ValueError: if the file is not a PPBOSearch checkpoint.

        Example:
            >>> import pathlib, tempfile
            >>> path = str(pathlib.Path(tempfile.mkdtemp()) / "state.json")
            >>> search = PPBOSearch({"x": ppbo.Real(0.0, 1.0)}, "loss", "min")
            >>> _ = search.suggest("a")
            >>> search.save(path)
            >>> again = PPBOSearch({"x": ppbo.Real(0.0, 1.0)}, "loss", "min")
            >>> again.restore(path)
            >>> again.on_trial_complete("a", {"loss": 1.0})
            >>> again.optimizer.get_trials()[0].value
            1.0
        """
        with open(checkpoint_path) as source:
            state = json.load(source)
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise ValueError(f"{checkpoint_path!r} is not a PPBOSearch checkpoint")
        if state.get("version") != _VERSION:
            raise ValueError(
                f"{checkpoint_path!r}: unsupported checkpoint version "
                f"{state.get('version')!r}"
            )
        components = {
            k: self._options[k]
            for k in ("surrogate", "inference", "acquisition")
            if k in self._options
        }
        with warnings.catch_warnings():
            # RUNNING trials are expected here; they are sorted out below
            warnings.simplefilter("ignore", CampaignWarning)
            optimizer = Optimizer.load(state["storage"], state["name"], **components)
        self._optimizer = optimizer
        self._storage_arg = state["storage"]
        self._name = state["name"]
        self._metric = state["metric"] or self._metric
        self._mode = state["mode"] or self._mode
        self._space = optimizer.space
        self._trials = {str(k): int(v) for k, v in state["trials"].items()}
        tracked = set(self._trials.values())
        for trial in optimizer.get_trials(TrialState.RUNNING):
            if trial.number not in tracked:
                optimizer.abandon(trial, "not tracked by Ray Tune after a restore")

    # -- pickling (Tune stores its search algorithm with the experiment) -----------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        storage = None if self._optimizer is None else self._optimizer.storage
        if storage is not None and getattr(storage, "path", ":memory:") != ":memory:":
            # the campaign is on disk: keep its location, reopen it on unpickling
            state["_storage_arg"] = storage.path
            state["_load_if_exists"] = True
        elif storage is not None:
            raise TypeError(
                "a PPBOSearch whose campaign is in memory cannot be pickled; give "
                "it an SQLite file (storage=...)"
            )
        state["_optimizer"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


def _failure(result: Mapping[str, Any] | None, metric: str | None, error: bool):
    """Why a completed Tune trial is FAILED, or None when it has a value."""
    if error:
        return "the Ray Tune trial raised an error"
    if result is None or metric not in result:
        return f"no metric {metric!r} in the trial's result"
    value = result[metric]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"metric {metric!r} is not a real number: {value!r}"
    if math.isnan(float(value)):
        return f"metric {metric!r} is nan"
    return None


def _copy_campaign(storage: Any, name: str, path: str) -> None:
    """Copy campaign ``name`` (trials and latest posterior) to a new SQLite file."""
    from ppbo.storage import SQLiteStorage

    campaign = storage.get_campaign(name)
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    target = SQLiteStorage(tmp)
    try:
        copy = target.create_campaign(name, campaign.config)
        fields = ("params", "state", "value", "created", "finished", "iteration")
        fields += ("task", "message", "origin", "extra")
        rows = [
            {f: getattr(t, f) for f in fields} for t in storage.get_trials(campaign.id)
        ]
        target.add_trials(copy.id, rows, storage.latest_posterior(campaign.id))
    finally:
        target.close()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(tmp + suffix):  # pragma: no cover - closed cleanly
            os.remove(tmp + suffix)
    os.replace(tmp, path)
