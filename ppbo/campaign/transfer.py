"""Source tasks in a campaign: the transfer data contract and source selection.

A campaign created with ``ppbo.Optimizer(..., sources=[...])`` stores its sources
as JSON in its configuration (``config["sources"]``, with the settings in
``config["transfer"]``) and builds, at each ask, the model-space
:class:`~ppbo.data.Dataset` of the transfer contract of ppbo:

- source rows first (source ``k`` has ``data.source == k``), the target's
  COMPLETE trials after them (``data.source == -1``), so that pending points and
  new trials appended later are target rows;
- inputs in the unit cube; outputs signed as the campaign's direction and
  standardised per task: each source by its own mean and standard deviation, the
  target as a campaign without sources does (its ``(shift, scale)`` maps
  predictions back to the user's units);
- for the ICM multi-task GP (``"multitask_gp"``), ``data.task`` maps the target
  to task 0 and source ``k`` to task ``k + 1``, and the surrogate gets
  ``num_tasks = K + 1``;
- registry surrogates whose default options contain ``num_sources`` get the
  number of sources, and those whose options contain ``meta_features`` get one
  row per source followed by the target's row (the sources' ``meta_features``
  and ``Optimizer(..., meta_features=...)``; when none are given every row is
  ``[0.0]``, i.e. all tasks look alike to a meta-feature kernel);
- every other surrogate (the plain ``"gp"``, the network and forest surrogates,
  custom surrogates without ``extras["num_sources"]``) ignores the sources: it
  sees the target rows only, and the campaign warns once, when it is created.

With ``source_selection="bandit"`` each ask chooses one source with the bandit
of :mod:`ppbo.transfer.bandit` (Ramachandran et al. 2018) and fits the
single-source model (``num_sources = 1``, or ``num_tasks = 2``) to the target and
that source's rows only. The bandit's state is not stored: it is replayed at
every ask from the stored trials, which record the arm and its probability
(``trial.extra["source_arm"]``, ``["source_probability"]``): each COMPLETE trial
asked with arm ``k`` rewards that arm with ``-(y - μ^k(x))^2``, ``y`` the trial's
value standardised as the target's data currently are and ``μ^k`` the posterior
mean of a GP (Matérn-5/2, MAP, fixed key) fitted to source ``k`` alone. A resumed
campaign therefore continues with exactly the state an uninterrupted one has.
Diff-GP, a single-source model, selects by the bandit by default when given
several sources (:func:`default_selection`).

References:
    Ramachandran, A., Gupta, S., Rana, S. and Venkatesh, S. (2018). Selecting
    optimal source for transfer learning in Bayesian optimisation. PRICAI 2018.

    Swersky, K., Snoek, J. and Adams, R. P. (2013). Multi-task Bayesian
    optimization. NeurIPS 26.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from ppbo.data import Dataset, bucket_capacity
from ppbo.space import Space
from ppbo.storage.base import Trial, TrialState
from ppbo.surrogate import Posterior, Surrogate
from ppbo.transfer import bandit
from ppbo.transfer.source import Source, source_arrays, sources_from_json

__all__ = [
    "MODES",
    "SOURCE_SELECTIONS",
    "SINGLE_SOURCE",
    "Transfer",
    "default_selection",
    "Model",
    "transfer_mode",
    "transfer_config",
    "fill_spec",
]

#: How a surrogate uses sources: not at all, as source rows, or as ICM tasks.
MODES = ("ignore", "sources", "icm")
#: Values of ``Optimizer(..., source_selection=...)``.
SOURCE_SELECTIONS = (None, "all", "bandit")
#: The bandit's default exploration parameter γ.
DEFAULT_GAMMA = 0.5
#: Registry surrogates whose campaigns choose one source per ask by the bandit
#: when given several sources and no ``source_selection`` (see
#: :func:`default_selection`).
SINGLE_SOURCE = ("diff_gp",)
_META_DEFAULT = [0.0]


def transfer_mode(spec: Mapping[str, Any], surrogate: Surrogate) -> str:
    """How a surrogate uses source rows: one of :data:`MODES`.

    Args:
        spec: the surrogate's registry spec (``{"name": ..., ...}``).
        surrogate: the surrogate (for custom ones: ``extras["num_sources"]``).

    Example:
        >>> from ppbo.campaign import registry
        >>> transfer_mode(*reversed(registry.resolve_surrogate("gp")))
        'ignore'
    """
    from ppbo.campaign import registry

    name = spec.get("name")
    if name == "multitask_gp":
        return "icm"
    if name in registry.SURROGATES:
        defaults = registry.SURROGATES[name][1]
        return (
            "sources" if {"num_sources", "meta_features"} & set(defaults) else "ignore"
        )
    return "sources" if "num_sources" in surrogate.extras else "ignore"


def fill_spec(spec: Mapping[str, Any], mode: str, meta_rows: list[list[float]]) -> dict:
    """The registry spec with the transfer options of ``len(meta_rows) - 1`` sources.

    Args:
        spec: the surrogate's registry spec.
        mode: :func:`transfer_mode` of it.
        meta_rows: one meta-feature row per used source, then the target's.

    Example:
        >>> fill_spec({"name": "multitask_gp", "num_tasks": 2}, "icm",
        ...           [[0.0], [0.0], [0.0]])["num_tasks"]
        3
    """
    from ppbo.campaign import registry

    spec = dict(spec)
    num = len(meta_rows) - 1
    if mode == "icm":
        spec["num_tasks"] = num + 1
    elif mode == "sources" and spec.get("name") in registry.SURROGATES:
        defaults = registry.SURROGATES[spec["name"]][1]
        if "num_sources" in defaults:
            spec["num_sources"] = num
        if "meta_features" in defaults:
            spec["meta_features"] = [list(map(float, row)) for row in meta_rows]
    return spec


def default_selection(source_selection: Any, name: Any, num_sources: int) -> Any:
    """The source selection a campaign uses when the user names none.

    Diff-GP (Shilton et al. 2017) is a single-source model: it corrects one
    source's rows by a GP on the difference between the target and that source,
    and the survey of transfer learning for BO pairs it, as Env-GP, with a choice
    of one source per iteration (the bandit of Ramachandran et al. 2018). Given
    ``K > 1`` sources at once, every source's difference GP is fitted to the same
    target rows, so the augmented GP counts the target's data ``K`` times over
    and its search creeps in ever shorter steps (``benchmarks/README.md``, the
    transfer section). A Diff-GP campaign with several sources and no
    ``source_selection`` therefore takes ``"bandit"``; ``"all"`` keeps every
    source. Every other choice is returned unchanged. Applied when a campaign is
    created; the stored choice is what a resumed campaign uses.

    Example:
        >>> default_selection(None, "diff_gp", 3)
        'bandit'
        >>> default_selection("all", "diff_gp", 3)
        'all'
        >>> default_selection(None, "diff_gp", 1) is None  # one source
        True
        >>> default_selection(None, "env_gp", 3) is None
        True
    """
    if source_selection is None and name in SINGLE_SOURCE and num_sources > 1:
        return "bandit"
    return source_selection


def transfer_config(
    sources: Sequence[Source],
    space: Space,
    meta_features: Any,
    source_selection: Any,
    source_selection_options: Mapping[str, Any] | None,
) -> dict:
    """The JSON settings of a transfer campaign (``config["transfer"]``).

    Raises:
        ValueError: for an unknown source selection or option, a bad γ, a
            selection without sources, or target meta-features without source
            ones (or of another length).

    Example:
        >>> transfer_config([], None, None, None, None)
        {'source_selection': None, 'gamma': None, 'meta_features': None}
    """
    if source_selection not in SOURCE_SELECTIONS:
        raise ValueError(
            f"source_selection must be one of {SOURCE_SELECTIONS}, got "
            f"{source_selection!r}"
        )
    if source_selection == "all":
        source_selection = None
    options = dict(source_selection_options or {})
    gamma = None
    if source_selection == "bandit":
        if not sources:
            raise ValueError("source_selection='bandit' needs sources=[...]")
        unknown = set(options) - {"gamma"}
        if unknown:
            raise ValueError(
                f"source_selection_options has no option {sorted(unknown)[0]!r}; "
                "the bandit's option is 'gamma'"
            )
        gamma = bandit.check_gamma(options.get("gamma", DEFAULT_GAMMA))
    elif options:
        raise ValueError(
            "source_selection_options are given but source_selection is "
            f"{source_selection!r}; use source_selection='bandit'"
        )
    target = None
    if meta_features is not None:
        if not sources or sources[0].meta_features is None:
            raise ValueError(
                "meta_features (the target's) given, but the sources have no "
                "meta_features; give Source(..., meta_features=...) too"
            )
        target = np.asarray(meta_features, dtype=np.float64)
        size = sources[0].meta_features.size
        if target.shape != (size,) or not np.isfinite(target).all():
            raise ValueError(
                f"meta_features must be {size} finite numbers like the sources', "
                f"got {meta_features!r}"
            )
        target = target.tolist()
    elif sources and sources[0].meta_features is not None:
        raise ValueError(
            "the sources have meta_features; give the target's too: "
            "Optimizer(..., meta_features=[...])"
        )
    return {
        "source_selection": source_selection,
        "gamma": gamma,
        "meta_features": target,
    }


class Model(NamedTuple):
    """What one ask fits: the surrogate, its data and the target's standardisation.

    Attributes:
        surrogate: the surrogate for the sources used (all, or the bandit's arm).
        data: the model-space dataset (None before a target value is known).
        standardization: the target's ``(shift, scale)``.
        extra: JSON notes for the asked trials (the bandit's arm and weights).
    """

    surrogate: Surrogate
    data: Dataset | None
    standardization: tuple[float, float]
    extra: dict


@dataclasses.dataclass(frozen=True, eq=False)
class Transfer:
    """A campaign's sources and how its surrogate uses them.

    Attributes:
        sources: the validated sources.
        space: the target's space.
        direction: ``"minimize"`` or ``"maximize"``.
        mode: one of :data:`MODES`.
        spec: the surrogate's registry spec (None for a custom surrogate).
        surrogate: the surrogate the configuration names (all sources).
        settings: ``config["transfer"]`` (:func:`transfer_config`).
        seed: the campaign's root seed (the source GPs' keys).
    """

    sources: tuple[Source, ...]
    space: Space
    direction: str
    mode: str
    spec: dict | None
    surrogate: Surrogate
    settings: dict
    seed: int
    _memo: dict = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], space: Space, surrogate: Surrogate
    ) -> Transfer | None:
        """The transfer part of a stored configuration (None without sources).

        Example:
            >>> Transfer.from_config({"sources": []}, None, None) is None
            True
        """
        described = config.get("sources") or []
        if not described:
            return None
        spec = dict(config["surrogate"])
        spec = None if spec.get("name") == "custom" else spec
        mode = transfer_mode(spec or {"name": "custom"}, surrogate)
        settings = dict(config.get("transfer") or {})
        settings.setdefault("source_selection", None)
        return cls(
            sources=sources_from_json(described),
            space=space,
            direction=config["direction"],
            mode=mode,
            spec=spec,
            surrogate=surrogate,
            settings=settings,
            seed=int(config["seed"]),
        )

    @property
    def maximize(self) -> bool:
        """Whether the campaign maximises."""
        return self.direction == "maximize"

    @property
    def selection(self) -> str | None:
        """``"bandit"`` or None (every source used)."""
        return self.settings.get("source_selection")

    @property
    def gamma(self) -> float:
        """The bandit's γ."""
        return float(self.settings.get("gamma") or DEFAULT_GAMMA)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All sources' model-space rows (:func:`ppbo.transfer.source_arrays`).

        Example:
            >>> # transfer.arrays()[0].shape == (total source points, d)
        """
        if "arrays" not in self._memo:
            self._memo["arrays"] = source_arrays(
                self.sources, self.space, self.maximize
            )
        return self._memo["arrays"]

    def meta_rows(self, arms: Sequence[int]) -> list[list[float]]:
        """Meta-feature rows of the sources ``arms``, then the target's.

        Example:
            >>> # transfer.meta_rows([0, 1]) == [[...], [...], [...]]
        """
        target = self.settings.get("meta_features")
        if target is None:
            return [list(_META_DEFAULT) for _ in range(len(arms) + 1)]
        rows = [self.sources[k].meta_features.tolist() for k in arms]
        return rows + [list(target)]

    def surrogate_for(self, arms: Sequence[int]) -> Surrogate:
        """The surrogate of the sources ``arms`` (the configured one for all).

        Example:
            >>> # transfer.surrogate_for([2]) is the single-source surrogate
        """
        if self.mode == "ignore" or self.spec is None:
            return self.surrogate
        if list(arms) == list(range(len(self.sources))):
            return self.surrogate
        from ppbo.campaign import registry

        spec = fill_spec(self.spec, self.mode, self.meta_rows(arms))
        return registry.resolve_surrogate(spec)[0]

    def data(self, target: Dataset | None, arms: Sequence[int]) -> Dataset | None:
        """The contract's dataset: the rows of sources ``arms``, then the target's.

        Args:
            target: the target's COMPLETE trials in model space (or None).
            arms: the sources to use, in order (relabelled ``0, 1, ...``).

        Example:
            >>> # transfer.data(target, [0, 1]).source[:n_sources] >= 0
        """
        if target is None or self.mode == "ignore":
            return target
        X_s, y_s, ids = self.arrays()
        keep = np.isin(ids, np.asarray(arms, dtype=np.int64))
        relabel = np.full(len(self.sources), -1, np.int64)
        relabel[np.asarray(arms, dtype=np.int64)] = np.arange(len(arms))
        source = relabel[ids[keep]]
        X_t, y_t, _ = target.unpadded()
        X = np.concatenate([X_s[keep], X_t])
        y = np.concatenate([y_s[keep], y_t])
        source = np.concatenate([source, np.full(len(y_t), -1, np.int64)])
        task = source + 1 if self.mode == "icm" else None
        from ppbo.campaign.transforms import MIN_CAPACITY

        # the bucket of the largest sources that many arms can bring, so that a
        # bandit switching between sources of different sizes compiles once
        sizes = sorted(source.n for source in self.sources)
        largest = sum(sizes[len(sizes) - len(arms) :])
        capacity = bucket_capacity(largest + len(y_t), minimum=MIN_CAPACITY)
        return Dataset(X, y, task=task, source=source, capacity=capacity)

    # -- the bandit -------------------------------------------------------------
    def source_posterior(self, k: int) -> Posterior:
        """The GP fitted to source ``k`` alone (MAP, fixed key; memoised).

        Example:
            >>> # transfer.source_posterior(0).predict_marginal(X)
        """
        key = ("source_gp", k)
        if key not in self._memo:
            from ppbo.campaign.keys import campaign_key
            from ppbo.campaign.transforms import MIN_CAPACITY
            from ppbo.inference import MAP, fit

            X_s, y_s, ids = self.arrays()
            rows = ids == k
            # one bucket for every source: one compiled fit
            largest = max(source.n for source in self.sources)
            data = Dataset(
                X_s[rows],
                y_s[rows],
                capacity=bucket_capacity(largest, minimum=MIN_CAPACITY),
            )
            fold = jax.random.fold_in(campaign_key(self.seed, 0, "source_fit"), k)
            self._memo[key] = fit(_source_gp(), data, MAP(), fold)
        return self._memo[key]

    def bandit_state(
        self, trials: list[Trial], standardization: tuple[float, float]
    ) -> bandit.BanditState:
        """The bandit's state replayed from the stored trials.

        Each COMPLETE trial with a finite value and a stored ``source_arm``
        updates that arm with the reward of its value, standardised by
        ``standardization`` (the target's current one), and the probability
        stored when it was asked; trials are taken in the order they were asked.

        Example:
            >>> # transfer.bandit_state(opt.get_trials(), (0.0, 1.0)).counts
        """
        state = bandit.init(len(self.sources))
        shift, scale = standardization
        sign = 1.0 if self.maximize else -1.0
        for trial in sorted(trials, key=lambda t: t.number):
            arm = (trial.extra or {}).get("source_arm")
            if trial.state != TrialState.COMPLETE or arm is None:
                continue
            if not np.isfinite(trial.value):
                continue
            y = (sign * trial.value - shift) / scale
            x = self.space.to_unit(trial.params)[None]
            mean, _ = self.source_posterior(int(arm)).predict_marginal(x)
            probability = float(trial.extra["source_probability"])
            state = bandit.update(
                state, int(arm), bandit.reward(y, mean[0]), self.gamma, probability
            )
        return state

    def model(
        self, target: Dataset | None, standardization, trials: list[Trial]
    ) -> Model:
        """The surrogate, data and trial notes of the next ask (or fit).

        Example:
            >>> # transfer.model(target, standardization, trials).data.source
        """
        everything = list(range(len(self.sources)))
        if self.selection != "bandit" or self.mode == "ignore":
            data = self.data(target, everything)
            return Model(self.surrogate, data, standardization, {})
        if target is None:
            return Model(self.surrogate_for([0]), None, standardization, {})
        state = self.bandit_state(trials, standardization)
        arm = int(bandit.select(state, self.gamma))
        probability = float(bandit.probabilities(state, self.gamma)[arm])
        extra = {
            "source_arm": arm,
            "source_name": self.sources[arm].name,
            "source_probability": probability,
            "bandit_log_weights": np.asarray(state.log_weights).tolist(),
        }
        data = self.data(target, [arm])
        return Model(self.surrogate_for([arm]), data, standardization, extra)


@functools.cache
def _source_gp() -> Surrogate:
    # ONE surrogate object for every single-source fit of every ask: compiled
    # programs are cached by the surrogate (a static argument), and a new
    # gp.surrogate() per fit recompiled the fit and its predictions at every ask
    from ppbo.models import gp

    return gp.surrogate()
