"""The preference campaign: ask pairs, tell winners, add measured anchors.

:class:`PreferenceOptimizer` runs preferential Bayesian optimisation in the
user's units over a :class:`ppbo.Space`: ``ask()`` returns a pair of points (a
:class:`ppbo.storage.Pair` with an id), ``tell(pair, winner)`` records which one
the expert preferred (``"a"``, ``"b"``, ``"tie"`` or ``"skip"``, "can't say"),
and ``add_anchor(params, value)`` records a measured anchor at any time. The
surrogate is the preference GP of :mod:`ppbo.models.preference_gp` (probit duels,
Chu and Ghahramani 2005, eq. (3); the anchors' Gaussian likelihood; the anchors
criterion ``beta log p(v < 0 | theta) + (1 - beta) log p(Y0 | X0, theta)``, or
with ``evidence="joint"`` the Laplace evidence of the tempered joint model),
optionally with the most-likely heteroscedastic anchor noise of
:mod:`ppbo.models.heteroscedastic` (Kersting et al. 2007).

Everything told is committed to the storage before ``tell`` or ``add_anchor``
returns (the ``pairs`` table and anchor trials), and each ask is a pure function
of the stored comparisons and anchors and of the key ``fold_in(seed, i)`` of
pair ``i`` (:func:`ppbo.campaign.keys.campaign_key`); the fit is not
warm-started, so a campaign reloaded with :meth:`PreferenceOptimizer.load` after
a crash asks exactly the pair an uninterrupted campaign would have asked.

Decisions, with their reasons:

- **Ties and skips** are stored (the pair's ``winner``) and left out of the
  likelihood. Chu and Ghahramani's probit likelihood (2005, eq. (3)) has no tie
  outcome, and a tie modelled as two opposite half-weight duels adds
  ``(log Phi(z) + log Phi(-z)) / 2``, which pulls ``f(a) - f(b)`` towards 0 with a
  strength that depends on the probit noise it should be informing; ties are
  kept so that a later likelihood with a tie outcome (e.g. the ordinal model of
  Chu and Ghahramani 2005, §2 with thresholds) can use them. "Can't say" carries
  no preference information at all.
- **EUBO is the default acquisition**: Astudillo et al. (2023, §5, Figs. 3-5)
  find qEUBO with ``q = 2`` better than or as good as dueling Thompson sampling,
  qEI and qNEI on their test problems, it is a closed form per posterior sample
  (Clark 1961), and it is one-step Bayes optimal for the recommendation
  (their Theorem 1). Under the default Laplace inference it reads the exact
  Laplace predictive (:func:`ppbo.models.preference_gp.laplace_predictive`),
  not the mixture of the ``num_samples`` latent draws, whose Monte Carlo error
  in the pair's covariance decided which pair won on Ackley-6
  (``benchmarks/README.md``); under NUTS it is averaged over the draws.
- **ANPEI** picks one point ``x`` (the anchors' noise factor of
  :func:`ppbo.acquisition.preferential.anpei`); the pair is ``x`` against the
  incumbent, the evaluated point of the highest posterior mean. It needs anchors:
  until one exists the pair is EUBO's (the pair's ``origin`` says so).
- **Anchor budget and strategies**: with ``anchor_budget=L`` a new anchor is
  appended while there is room, else it replaces the anchor least likely to be
  the maximiser when the candidate is more likely
  (:func:`ppbo.preference.anchors.add_anchor`); the decision is stored with the
  anchor. ``anchor_strategy`` ``"restart"`` or ``"sliding_window"`` gives 0/1
  weights (:func:`ppbo.preference.anchors.observation_weights`) to the duels and
  anchors by age (in pairs asked), and weight-0 observations are dropped before
  the fit, which is the same as weighting them 0 in the likelihood.
  ``"weighted_penalty"`` (``strategy_options={"decay": g}``, ``0 < g <= 1``)
  weights the log-likelihood term of a duel or an anchor of age ``a`` by
  ``g ** a`` (the discounted UCB of Garivier and Moulines 2011 applied to the
  likelihood), through the Dataset's ``duel_weight`` and ``weight`` fields, in
  the Laplace fit (criterion and latent mode) and in NUTS alike
  (:mod:`ppbo.models.preference_gp`). A duel's age is counted from its pair's
  id, an anchor's from the pairs asked before it was added; the most-likely
  heteroscedastic noise model is fitted to the anchors unweighted.
- **Anchors in model space**: maximisation of the expert's utility; anchor values
  are standardised over the active anchors (mean 0, sd 1; sd 1 for a single
  anchor) and negated for ``direction="minimize"``.
- **Compilation** happens once per bucket: the rows and the duels are both
  padded to ``bucket_capacity(max(n, m))`` (one bucket for both, so that the two
  counts, which grow together, do not cross bucket boundaries at different asks
  and compile twice as often), with an anchor flag array always present, so a new
  duel inside a bucket reuses the compiled Laplace criterion and acquisition. A
  heteroscedastic or known noise model is rebuilt (and the surrogate with it) only
  when the set of anchors changes.

References:
    Chu and Ghahramani (2005), "Preference learning with Gaussian processes".
    Astudillo, Lin, Bakshy and Frazier (2023), "qEUBO: a decision-theoretic
    acquisition function for preferential Bayesian optimization".
    González, Dai, Damianou and Lawrence (2017), "Preferential Bayesian
    optimization". Kersting, Plagemann, Pfaff and Burgard (2007), "Most likely
    heteroscedastic Gaussian process regression".
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ppbo.campaign.designs import initial_design
from ppbo.campaign.keys import campaign_key
from ppbo.data import Dataset, bucket_capacity
from ppbo.space import Space
from ppbo.storage.base import WINNERS, Pair, Trial, TrialState

__all__ = [
    "PreferenceOptimizer",
    "AnchorRecord",
    "ACQUISITIONS",
    "ANCHOR_NOISES",
    "KnownNoise",
]

#: Pair acquisitions a preference campaign runs.
ACQUISITIONS = ("eubo", "dueling_thompson", "anpei")

#: Anchor noise models: one ``noise`` site, Kersting et al.'s most likely one, or
#: the variance measured with each anchor (``add_anchor(..., noise=v)``).
ANCHOR_NOISES = ("homoscedastic", "heteroscedastic", "known")

#: Keys added to the stored configuration after campaigns were first stored,
#: with the value a campaign stored without them was run with.
_LATER_KEYS = {"evidence": "separate"}

_INFERENCES = ("laplace", "nuts")
_STRATEGY_OPTION = {
    "restart": "horizon",
    "sliding_window": "window",
    "weighted_penalty": "decay",
}
# Fewer anchors than this cannot support a second (log-noise) GP.
_MIN_HETEROSCEDASTIC = 3


@dataclass(frozen=True)
class AnchorRecord:
    """A measured anchor of a preference campaign.

    Attributes:
        id: the anchor's trial number.
        params: the point, in the user's units.
        value: the measured objective value.
        time: the number of pairs asked before it was added (its age origin).
        active: whether it is among the anchors the model uses (within budget and
            not replaced since).
        replaced: the id of the anchor it replaced (None if it took free room or
            was not kept).
        noise: the measurement's noise variance in the objective's units
            squared (campaigns with ``anchor_noise="known"``), else None.
    """

    id: int
    params: dict
    value: float
    time: int
    active: bool
    replaced: int | None
    noise: float | None = None


@functools.lru_cache(maxsize=32)
def _shared_surrogate(kernel: str, beta: float, evidence: str):
    # Compiled fits are keyed by the surrogate's identity: campaigns of one
    # process with the same homoscedastic model share one (an immutable value).
    from ppbo.models import preference_gp

    return preference_gp.surrogate(kernel, beta=beta, evidence=evidence)


@functools.lru_cache(maxsize=32)
def _shared_laplace(num_samples: int):
    from ppbo.models import preference_gp

    return preference_gp.Laplace(num_samples=num_samples, num_restarts=2)


def _check_choice(field: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{field} must be one of {list(choices)}, got {value!r}")
    return value


def _check_int(field: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        raise ValueError(f"{field} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{field} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_decay(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(
            f"strategy_options['decay'] must be a number in (0, 1], got {value!r}"
        )
    value = float(value)
    if not 0.0 < value <= 1.0:  # also refuses NaN
        raise ValueError(
            f"strategy_options['decay'] must be in (0, 1], got decay={value}"
        )
    return value


def _config(
    space: Space,
    *,
    seed: int,
    acquisition: str,
    inference: str,
    beta: float,
    kernel: str,
    anchor_noise: str,
    evidence: str,
    anchor_budget: int | None,
    anchor_strategy: str | None,
    strategy_options: Mapping[str, Any] | None,
    n_initial: int,
    direction: str,
    num_samples: int,
    optimizer_options: Mapping[str, Any] | None,
    anpei_options: Mapping[str, Any] | None,
) -> dict:
    seed = _check_int("seed", seed, 0)
    _check_choice("acquisition", acquisition, ACQUISITIONS)
    _check_choice("inference", inference, _INFERENCES)
    _check_choice("anchor_noise", anchor_noise, ANCHOR_NOISES)
    from ppbo.models.preference_gp import EVIDENCES

    _check_choice("evidence", evidence, EVIDENCES)
    _check_choice("direction", direction, ("maximize", "minimize"))
    beta = float(beta)
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got beta={beta}")
    if anchor_budget is not None:
        anchor_budget = _check_int("anchor_budget", anchor_budget, 1)
    options = dict(strategy_options or {})
    if anchor_strategy is not None:
        _check_choice("anchor_strategy", anchor_strategy, tuple(_STRATEGY_OPTION))
        expected = _STRATEGY_OPTION[anchor_strategy]
        if set(options) != {expected}:
            raise ValueError(
                f"strategy_options for anchor_strategy={anchor_strategy!r} must be "
                f"exactly {{{expected!r}: ...}}, got {options!r}"
            )
        if expected == "decay":
            options["decay"] = _check_decay(options["decay"])
        else:
            _check_int(f"strategy_options[{expected!r}]", options[expected], 1)
    elif options:
        raise ValueError(
            f"strategy_options={options!r} given without an anchor_strategy"
        )
    optimizer = {"num_raw": 256, "num_restarts": 4, "max_iterations": 100}
    optimizer |= dict(optimizer_options or {})
    for name in ("num_raw", "num_restarts"):
        _check_int(f"optimizer_options[{name!r}]", optimizer[name], 1)
    _check_int("optimizer_options['max_iterations']", optimizer["max_iterations"], 0)
    unknown = set(optimizer) - {"num_raw", "num_restarts", "max_iterations"}
    if unknown:
        raise ValueError(f"optimizer_options has unknown keys {sorted(unknown)}")
    anpei = {"rho": 0.5, "gamma": 1.0, "lengthscale": 0.1} | dict(anpei_options or {})
    return {
        "kind": "preference",
        "space": space.to_json(),
        "seed": seed,
        "acquisition": {"name": acquisition},  # the shape "ppbo show" lists
        "inference": inference,
        "beta": beta,
        "kernel": kernel,
        "anchor_noise": anchor_noise,
        "evidence": evidence,
        "anchor_budget": anchor_budget,
        "anchor_strategy": anchor_strategy,
        "strategy_options": options,
        "n_initial": _check_int("n_initial", n_initial, 0),
        "direction": direction,
        "num_samples": _check_int("num_samples", num_samples, 1),
        "optimizer_options": optimizer,
        "anpei_options": {k: float(v) for k, v in anpei.items()},
    }


class PreferenceOptimizer:
    """A preferential-BO campaign: ask pairs, tell winners, add anchors.

    See the module docstring for how ties, skips, anchors, the budget and the
    strategies enter the model, and why EUBO is the default.

    Args:
        space: a :class:`ppbo.Space` or a mapping of name -> dimension.
        storage: None (in memory), a SQLite file path, or a
            :class:`ppbo.storage.Storage`.
        name: the campaign's unique name in the storage (default: generated).
        seed: the campaign's root seed.
        acquisition: ``"eubo"`` (default), ``"dueling_thompson"`` or ``"anpei"``.
        inference: ``"laplace"`` (default: anchors-criterion MAP
            hyperparameters and a Laplace latent) or ``"nuts"`` (the tempered
            joint posterior, fully Bayesian).
        beta: weight of the duels in the anchors criterion, in [0, 1].
        kernel: the latent GP's stationary kernel (``"rbf"``, ``"matern52"``...).
        anchor_noise: ``"homoscedastic"`` (a ``noise`` site),
            ``"heteroscedastic"`` (Kersting et al.'s most likely noise, from
            three anchors on) or ``"known"`` (each anchor's measurement variance,
            given to :meth:`add_anchor`; a fixed per-anchor noise, like
            BoTorch's ``train_Yvar``).
        evidence: the hyperparameter criterion of the Laplace path:
            ``"separate"`` (default; the notes' ``beta log p(v < 0 | theta) + (1
            - beta) log p(Y0 | X0, theta)``) or ``"joint"`` (the Laplace evidence
            of the tempered joint model, where the duels inform the anchor
            noise; :func:`ppbo.models.preference_gp.joint_log_evidence`).
        anchor_budget: the most anchors the model uses (None: no limit).
        anchor_strategy: None, ``"restart"``, ``"sliding_window"`` or
            ``"weighted_penalty"``.
        strategy_options: ``{"horizon": h}`` (restart), ``{"window": w}``
            (sliding window) or ``{"decay": g}`` with ``0 < g <= 1`` (weighted
            penalty: an observation of age ``a`` has likelihood weight ``g ** a``).
        n_initial: pairs from a space-filling design before the model (default
            ``4 d``, the qEUBO protocol).
        direction: ``"maximize"`` (default; the expert prefers larger utility)
            or ``"minimize"`` (anchor values are costs).
        num_samples: posterior samples (Laplace latent draws, which dueling
            Thompson sampling, ANPEI and ArviZ read; NUTS draws).
        optimizer_options: ``num_raw``, ``num_restarts``, ``max_iterations`` of
            the pair search.
        anpei_options: ``rho``, ``gamma``, ``lengthscale`` of ANPEI.
        load_if_exists: load the campaign if ``name`` exists (the given
            configuration must match).

    Raises:
        ValueError: for an invalid argument, naming it and its value.
        ppbo.storage.DuplicateCampaignError: if ``name`` exists in ``storage``.

    Example:
        >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)}, n_initial=2)
        >>> pair = opt.ask()
        >>> sorted(pair.a), pair.id
        (['x'], 0)
        >>> opt.tell(pair, "a").winner
        'a'
    """

    def __init__(
        self,
        space: Space | Mapping[str, Any],
        *,
        storage: Any = None,
        name: str | None = None,
        seed: int = 0,
        acquisition: str = "eubo",
        inference: str = "laplace",
        beta: float = 0.5,
        kernel: str = "rbf",
        anchor_noise: str = "homoscedastic",
        evidence: str = "separate",
        anchor_budget: int | None = None,
        anchor_strategy: str | None = None,
        strategy_options: Mapping[str, Any] | None = None,
        n_initial: int | None = None,
        direction: str = "maximize",
        num_samples: int = 32,
        optimizer_options: Mapping[str, Any] | None = None,
        anpei_options: Mapping[str, Any] | None = None,
        load_if_exists: bool = False,
    ) -> None:
        jax.config.update("jax_enable_x64", True)
        from ppbo.models import preference_gp
        from ppbo.storage import open_storage

        space = space if isinstance(space, Space) else Space(space)
        preference_gp.surrogate(kernel)  # validates the kernel name
        config = _config(
            space,
            seed=seed,
            acquisition=acquisition,
            inference=inference,
            beta=beta,
            kernel=kernel,
            anchor_noise=anchor_noise,
            evidence=evidence,
            anchor_budget=anchor_budget,
            anchor_strategy=anchor_strategy,
            strategy_options=strategy_options,
            n_initial=4 * space.dim if n_initial is None else n_initial,
            direction=direction,
            num_samples=num_samples,
            optimizer_options=optimizer_options,
            anpei_options=anpei_options,
        )
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self._storage = open_storage(storage)
        name = name or f"preference-{uuid.uuid4().hex[:8]}"
        existing = self._storage.get_campaign(name)
        if existing is not None and load_if_exists:
            stored = _LATER_KEYS | dict(existing.config)
            if stored != config:
                diff = sorted(k for k in config if stored.get(k) != config[k])
                raise ValueError(
                    f"campaign {name!r} exists with a different configuration "
                    f"(fields {diff}); load it with PreferenceOptimizer.load"
                )
            campaign = existing
        else:
            campaign = self._storage.create_campaign(name, config)
        self._init(campaign, space)

    def _init(self, campaign, space: Space) -> None:
        self._campaign = campaign
        self._space = space
        self._config = _LATER_KEYS | dict(campaign.config)
        # surrogate per anchor set: a heteroscedastic noise model is refitted
        # (and compiled for) only when the anchors change
        self._surrogate_cache: tuple[Any, Any] | None = None

    @classmethod
    def load(cls, storage: Any, name: str) -> PreferenceOptimizer:
        """Reopen a stored preference campaign; it continues exactly.

        Raises:
            ValueError: if there is no such campaign or it is not a preference
                campaign.

        Example:
            >>> storage = ppbo.storage.SQLiteStorage(":memory:")
            >>> _ = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)},
            ...                         storage=storage, name="taste")
            >>> PreferenceOptimizer.load(storage, "taste").name
            'taste'
        """
        jax.config.update("jax_enable_x64", True)
        from ppbo.storage import open_campaign

        storage, campaign = open_campaign(storage, name)
        if campaign.config.get("kind") != "preference":
            raise ValueError(
                f"campaign {name!r} is not a preference campaign; open it with "
                "ppbo.Optimizer.load"
            )
        self = object.__new__(cls)
        self._storage = storage
        self._init(campaign, Space.from_json(campaign.config["space"]))
        return self

    # -- views ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The campaign's name."""
        return self._campaign.name

    @property
    def space(self) -> Space:
        """The search space."""
        return self._space

    @property
    def config(self) -> dict:
        """The stored configuration (JSON)."""
        return dict(self._config)

    @property
    def storage(self) -> Any:
        """The campaign's storage."""
        return self._storage

    def get_pairs(self) -> list[Pair]:
        """All pairs, by id (RUNNING ones have ``winner`` None)."""
        return self._storage.get_pairs(self._campaign.id)

    def get_anchors(self) -> list[AnchorRecord]:
        """All anchors ever added, by id, with whether each is active.

        Example:
            >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)},
            ...                           anchor_budget=1)
            >>> _ = opt.add_anchor({"x": 0.2}, 1.0)
            >>> [a.active for a in opt.get_anchors()]
            [True]
        """
        return _anchor_records(self._storage.get_trials(self._campaign.id))

    # -- ask --
    def ask(self) -> Pair:
        """Suggest the next pair to compare, committed as RUNNING.

        The first ``n_initial`` pairs come from a space-filling design in
        ``2 d`` dimensions (pair ``i`` gets design point ``i``); later pairs
        maximise the acquisition of the preference GP fitted to the told
        duels and the active anchors, or are uniformly random while there are
        neither.

        Returns:
            A :class:`ppbo.storage.Pair` with ``id``, ``a`` and ``b`` (user units).

        Example:
            >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)}, n_initial=2)
            >>> [opt.ask().id for _ in range(2)]
            [0, 1]
        """
        with self._storage.ask_lock(self._campaign.id):
            pairs = self.get_pairs()
            trials = self._storage.get_trials(self._campaign.id)
            iteration = len(pairs)
            a, b, origin, extra = self._propose(iteration, pairs, trials)
            return self._storage.add_pair(
                self._campaign.id,
                self._space.from_unit(a),
                self._space.from_unit(b),
                iteration=iteration,
                origin=origin,
                extra=extra,
            )

    def _propose(self, iteration, pairs, trials):
        config, d = self._config, self._space.dim
        key = campaign_key(config["seed"], iteration, "step")
        if iteration < config["n_initial"]:
            # the first points of a power-of-two Sobol' sequence (balanced)
            size = 2 ** math.ceil(math.log2(config["n_initial"]))
            design = initial_design("sobol", size, 2 * d, config["seed"])
            return design[iteration, :d], design[iteration, d:], "design", {}
        problem = _build_data(self._space, config, pairs, trials, iteration)
        if problem is None:
            rng = np.random.default_rng([iteration, config["seed"]])
            u = rng.random(2 * d)
            return u[:d], u[d:], "random", {}
        posterior = self._fit(key, problem)
        from ppbo.preference import _acquire

        return _acquire.propose(key, posterior, problem, config, iteration)

    def _fit(self, key, problem):
        from ppbo.inference import NUTS, fit

        config = self._config
        key_fit = jax.random.fold_in(key, 1)
        surrogate = self._surrogate(problem)
        if config["inference"] == "laplace":
            # one object: it is a static argument of compiled code
            inference = _shared_laplace(config["num_samples"])
        else:
            inference = NUTS(
                num_warmup=config["num_samples"],
                num_samples=config["num_samples"],
                warm_start=False,
            )
        return fit(surrogate, problem.data, inference, key_fit)

    def _surrogate(self, problem):
        from ppbo.models import heteroscedastic, preference_gp

        config = self._config
        hetero = (
            config["anchor_noise"] == "heteroscedastic"
            and problem.num_anchors >= _MIN_HETEROSCEDASTIC
        )
        known = config["anchor_noise"] == "known" and problem.num_anchors > 0
        if known:
            signature = ("known", problem.anchor_ids, problem.anchor_var.tobytes())
        else:
            signature = (hetero, problem.anchor_ids) if hetero else (False,)
        if not (hetero or known):
            return _shared_surrogate(
                config["kernel"], config["beta"], config["evidence"]
            )
        if self._surrogate_cache is not None and self._surrogate_cache[0] == signature:
            return self._surrogate_cache[1]
        if known:
            noise = KnownNoise(problem.anchor_X, problem.anchor_var)
        else:
            rows = np.asarray(problem.data.anchor)[: problem.data.n]
            X0 = np.asarray(problem.data.X)[: problem.data.n][rows]
            Y0 = np.asarray(problem.data.y)[: problem.data.n][rows]
            # a key of the anchor set alone, so that a resumed campaign refits
            # the same noise model
            key = campaign_key(config["seed"], max(problem.anchor_ids), "recommend")
            key = jax.random.fold_in(key, len(problem.anchor_ids))
            noise = heteroscedastic.most_likely_noise(key, X0, Y0, max_iterations=5)
        surrogate = preference_gp.surrogate(
            config["kernel"],
            beta=config["beta"],
            anchor_noise=noise,
            evidence=config["evidence"],
        )
        self._surrogate_cache = (signature, surrogate)
        return surrogate

    # -- tell --
    def tell(self, pair: Pair | int, winner: str) -> Pair:
        """Record the expert's answer for a RUNNING pair.

        Args:
            pair: the :class:`~ppbo.storage.Pair` from :meth:`ask` or its id.
            winner: ``"a"``, ``"b"``, ``"tie"`` or ``"skip"`` ("can't say").

        Returns:
            The told pair.

        Raises:
            KeyError: for a pair id that does not exist.
            ValueError: for a winner outside ``a|b|tie|skip`` or a pair told
                before.

        Example:
            >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> opt.tell(opt.ask(), "tie").state
            'COMPLETE'
        """
        number = _pair_number(pair)
        if not isinstance(winner, str) or winner not in WINNERS:
            raise ValueError(
                f"winner must be one of {list(WINNERS)} (the pair's members or "
                f"tie / skip), got winner={winner!r}"
            )
        if isinstance(pair, Pair):
            stored = [p for p in self.get_pairs() if p.number == number]
            if stored and (stored[0].a, stored[0].b) != (pair.a, pair.b):
                raise ValueError(
                    f"pair {number} in campaign {self.name!r} compares other points "
                    f"than the pair given ({pair.a} vs {pair.b})"
                )
        try:
            return self._storage.finish_pair(self._campaign.id, number, winner)
        except KeyError:
            raise KeyError(
                f"pair {number!r} does not exist in campaign {self.name!r}"
            ) from None

    # -- anchors --
    def add_anchor(
        self, params: Mapping[str, Any], value: Any, noise: Any = None
    ) -> AnchorRecord:
        """Record a measured anchor ``(params, value)``; allowed at any time.

        Within ``anchor_budget`` the anchor is appended; with the budget full it
        replaces the active anchor least likely to be the maximiser when its own
        probability is larger (probabilities from joint posterior draws of the
        model fitted to the current data, or, before any model, never).

        Args:
            params: the point, parameter name -> value (validated).
            value: its measured objective value, a finite real number.
            noise: the measurement's noise variance (objective units squared),
                a finite number > 0; required with ``anchor_noise="known"`` and
                refused otherwise.

        Returns:
            The stored :class:`AnchorRecord`.

        Raises:
            ValueError: for NaN/inf or non-numeric values, invalid params, or a
                ``noise`` missing where the campaign needs it (or given where it
                does not).

        Example:
            >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)})
            >>> opt.add_anchor({"x": 0.3}, 2.5).value
            2.5
        """
        params = self._space.validate(params)
        value = _check_anchor_value(value)
        noise = _check_anchor_noise(noise, self._config["anchor_noise"])
        with self._storage.ask_lock(self._campaign.id):
            trials = self._storage.get_trials(self._campaign.id)
            pairs = self.get_pairs()
            time = len(pairs)
            records = [a for a in _anchor_records(trials) if a.active]
            budget = self._config["anchor_budget"]
            extra: dict[str, Any] = {"time": time, "kept": True, "replaces": None}
            if noise is not None:
                extra["noise"] = noise
            if budget is not None and len(records) >= budget:
                extra["replaces"] = self._replacement(
                    params, value, noise, records, pairs, trials
                )
                extra["kept"] = extra["replaces"] is not None
            row = {
                "params": params,
                "state": TrialState.COMPLETE,
                "value": value,
                "origin": "anchor",
                "iteration": time,
                "extra": extra,
            }
            self._storage.add_trials(self._campaign.id, [row])
        return self.get_anchors()[-1]

    def _replacement(self, params, value, noise, records, pairs, trials) -> int | None:
        config = self._config
        iteration = len(pairs)
        # the model with the candidate's measurement included: the anchors and
        # the candidate compete as maximisers given everything measured
        candidate = (params, value, noise)
        problem = _build_data(
            self._space, config, pairs, trials, iteration, candidate=candidate
        )
        key = campaign_key(config["seed"], iteration, "recommend")
        posterior = self._fit(key, problem)
        X = np.stack([self._space.to_unit(a.params) for a in records])
        X = np.vstack([X, self._space.to_unit(params)[None]])
        # the probability of being the maximiser, from joint posterior draws (the
        # Monte Carlo estimate of ppbo.preference.anchors.maximiser_probability)
        f = np.asarray(posterior.sample_f(jax.random.fold_in(key, 2), X, num=256))
        winners = np.argmax(f.reshape(-1, X.shape[0]), axis=1)
        p = np.bincount(winners, minlength=X.shape[0]) / winners.size
        worst = int(np.argmin(p[:-1]))
        return records[worst].id if p[-1] > p[worst] else None

    # -- results --
    def fit(self):
        """The posterior given the told duels and active anchors (model space).

        Raises:
            ValueError: before any duel with a winner or anchor exists.

        Example:
            >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)}, n_initial=1)
            >>> opt.tell(opt.ask(), "a").winner
            'a'
            >>> opt.fit().data.num_duels
            1
        """
        pairs = self.get_pairs()
        trials = self._storage.get_trials(self._campaign.id)
        problem = _build_data(self._space, self._config, pairs, trials, len(pairs))
        if problem is None:
            raise ValueError(
                f"campaign {self.name!r} has no duel with a winner and no anchor yet"
            )
        key = campaign_key(self._config["seed"], len(pairs), "recommend")
        return self._fit(key, problem)

    def recommend(self) -> dict:
        """The evaluated point with the highest posterior-mean utility.

        The maximiser of the posterior mean over the points of the told duels
        and the active anchors (the recommendation of Astudillo et al. 2023, §5,
        restricted to evaluated points).

        Returns:
            ``{"params": ..., "utility": posterior mean in model space}``.

        Raises:
            ValueError: before any duel with a winner or anchor exists.

        Example:
            >>> opt = PreferenceOptimizer({"x": ppbo.Real(0.0, 1.0)}, n_initial=1,
            ...                           num_samples=8)
            >>> pair = opt.ask()
            >>> _ = opt.tell(pair, "b")
            >>> opt.recommend()["params"] == pair.b
            True
        """
        posterior = self.fit()
        data = posterior.data
        X = np.asarray(data.X)[: data.n]
        mean, _ = posterior.predict_marginal(X)
        best = int(np.argmax(np.asarray(mean)))
        return {
            "params": self._space.from_unit(X[best]),
            "utility": float(np.asarray(mean)[best]),
        }

    def __repr__(self) -> str:
        return (
            f"PreferenceOptimizer(name={self.name!r}, pairs={len(self.get_pairs())}, "
            f"anchors={sum(a.active for a in self.get_anchors())})"
        )


def _pair_number(pair: Any) -> int:
    if isinstance(pair, Pair):
        return pair.number
    if isinstance(pair, int | np.integer) and not isinstance(pair, bool):
        return int(pair)
    raise ValueError(f"pair must be a Pair or an integer pair id, got pair={pair!r}")


def _check_anchor_noise(noise: Any, model: str) -> float | None:
    if model != "known":
        if noise is not None:
            raise ValueError(
                f"noise={noise!r} given, but this campaign's anchor_noise is "
                f"{model!r}; create it with anchor_noise='known' to use measured "
                "anchor variances"
            )
        return None
    if noise is None:
        raise ValueError(
            "this campaign has anchor_noise='known': give each anchor's measurement "
            "variance, add_anchor(params, value, noise=...)"
        )
    array = np.asarray(noise)
    ok = array.shape == () and np.issubdtype(array.dtype, np.number)
    if not ok or isinstance(noise, bool) or not np.isfinite(array) or array <= 0:
        raise ValueError(f"noise must be a finite number > 0, got noise={noise!r}")
    return float(array)


def _check_anchor_value(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        array = np.asarray(value)
        if array.shape != () or not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"anchor value must be a real number, got value={value!r}")
        value = array.item()
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"anchor value must be finite, got value={value}")
    return value


def _anchor_records(trials: list[Trial]) -> list[AnchorRecord]:
    anchors = [t for t in trials if t.origin == "anchor"]
    replaced = {t.extra.get("replaces") for t in anchors} - {None}
    return [
        AnchorRecord(
            id=t.number,
            params=t.params,
            value=float(t.value),
            time=int(t.extra.get("time", 0)),
            active=bool(t.extra.get("kept", True)) and t.number not in replaced,
            replaced=t.extra.get("replaces"),
            noise=t.extra.get("noise"),
        )
        for t in anchors
    ]


class KnownNoise:
    """The measured noise variances of the anchors, as an anchor-noise function.

    ``noise(X)[i]`` is the variance of the anchor at (the nearest anchor to)
    row ``X[i]``; the preference GP reads it at its anchor rows only (the
    per-point noise of the surrogate contract, as the heteroscedastic model's).

    Args:
        X0: (L, d) the anchors in the unit cube.
        variances: (L,) their noise variances in model space.

    Example:
        >>> noise = KnownNoise(np.array([[0.1], [0.9]]), np.array([0.2, 0.5]))
        >>> np.asarray(noise(np.array([[0.9], [0.1], [0.12]]))).tolist()
        [0.5, 0.2, 0.2]
    """

    def __init__(self, X0: np.ndarray, variances: np.ndarray):
        self.X0 = np.asarray(X0, dtype=np.float64)
        self.variances = np.asarray(variances, dtype=np.float64)

    def __call__(self, X):
        import jax.numpy as jnp

        d2 = jnp.sum((X[:, None, :] - self.X0[None, :, :]) ** 2, axis=-1)
        return jnp.asarray(self.variances)[jnp.argmin(d2, axis=1)]


@dataclass(frozen=True)
class _Problem:
    data: Dataset
    anchor_ids: tuple[int, ...]
    num_anchors: int
    anchor_X: np.ndarray  # (L, d) unit cube
    anchor_y: np.ndarray  # (L,) model space
    anchor_var: np.ndarray | None = None  # (L,) known noise, model space


def _build_data(space, config, pairs, trials, now, candidate=None) -> _Problem | None:
    """The told duels and active anchors as a padded Dataset in model space.

    ``candidate``: an extra ``(params, value, noise)`` anchor (a budget
    decision).
    """
    duels = [p for p in pairs if p.winner in ("a", "b")]
    anchors = [a for a in _anchor_records(trials) if a.active]
    if candidate is not None:
        params, value, noise = candidate
        anchors.append(AnchorRecord(-1, params, value, now, True, None, noise))
    strategy = config.get("anchor_strategy")
    duel_w = np.ones(len(duels))
    anchor_w = np.ones(len(anchors))
    if strategy is not None:
        from ppbo.preference.anchors import observation_weights

        times = [p.number for p in duels] + [a.time for a in anchors]
        if times:
            weights = observation_weights(
                strategy, times, now=now, **config["strategy_options"]
            )
            duel_w, anchor_w = weights[: len(duels)], weights[len(duels) :]
            duels = [p for p, w in zip(duels, duel_w, strict=True) if w > 0]
            anchors = [a for a, w in zip(anchors, anchor_w, strict=True) if w > 0]
            duel_w, anchor_w = duel_w[duel_w > 0], anchor_w[anchor_w > 0]
    if not duels and not anchors:
        return None
    rows: list[np.ndarray] = []
    index: dict[bytes, int] = {}

    def row(u: np.ndarray) -> int:
        k = np.round(u, 12).tobytes()
        if k not in index:
            index[k] = len(rows)
            rows.append(u)
        return index[k]

    pairs_rows, pairs_w = [], []
    for p, w in zip(duels, duel_w, strict=True):
        ia, ib = row(space.to_unit(p.a)), row(space.to_unit(p.b))
        if ia == ib:  # the same point twice carries no preference
            continue
        pairs_rows.append((ia, ib) if p.winner == "a" else (ib, ia))
        pairs_w.append(w)
    sign = -1.0 if config["direction"] == "minimize" else 1.0
    values = sign * np.array([a.value for a in anchors], dtype=np.float64)
    scale = 1.0
    if len(values):
        center = values.mean()
        scale = values.std() if len(values) > 1 and values.std() > 0 else 1.0
        values = (values - center) / scale
    known = None
    if config["anchor_noise"] == "known":
        # the measured variances in the anchors' standardised units
        known = np.array([a.noise for a in anchors], dtype=np.float64) / scale**2
    anchor_X = np.array([space.to_unit(a.params) for a in anchors]).reshape(
        len(anchors), space.dim
    )
    # an anchor at a duel's point is that row (no duplicate rows: K stays well
    # conditioned); a second anchor at one point gets a row of its own
    anchor_rows: list[int] = []
    for u in anchor_X:
        i = index.get(np.round(u, 12).tobytes())
        if i is None or i in anchor_rows:
            i = len(rows)
            rows.append(u)
        anchor_rows.append(i)
    X = np.array(rows).reshape(len(rows), space.dim)
    n = X.shape[0]
    y = np.zeros(n)
    y[anchor_rows] = values
    flags = np.zeros(n, dtype=bool)
    flags[anchor_rows] = True
    duel_array = np.array(pairs_rows, dtype=np.int32).reshape(len(pairs_rows), 2)
    weighted = {}
    if strategy == "weighted_penalty":
        # a row's weight counts at its anchor only; the other rows get 1
        row_w = np.ones(n)
        row_w[anchor_rows] = anchor_w
        weighted = {"weight": row_w, "duel_weight": np.asarray(pairs_w, np.float64)}
    capacity = bucket_capacity(max(n, len(pairs_rows)))
    data = Dataset(
        X,
        y,
        capacity=capacity,
        duels=duel_array,
        anchor=flags,
        duel_capacity=capacity,
        **weighted,
    )
    return _Problem(
        data=data,
        anchor_ids=tuple(a.id for a in anchors),
        num_anchors=len(anchors),
        anchor_X=anchor_X,
        anchor_y=values,
        anchor_var=known,
    )
