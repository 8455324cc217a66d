"""GP-Hedge: a portfolio that learns which acquisition function to follow.

Each base acquisition ``j`` nominates its maximiser :math:`x^j_t`; one nominee is
chosen with probability

.. math:: p_t(j) = \\frac{\\exp(\\eta\\, g^j_{t-1})}{\\sum_l \\exp(\\eta\\, g^l_{t-1})},

the objective is evaluated there, the posterior is refitted, and every acquisition
is rewarded with the NEW posterior mean at its own nominee,
:math:`g^j_t = g^j_{t-1} + \\mu_t(x^j_t)` (Hoffman, Brochu and de Freitas 2011,
Algorithm 1; the Hedge algorithm of Auer et al. 1995). Rewards use the mean of the
predictive mixture over hyperparameter samples (``posterior.predict_marginal``),
in model space (standardised outputs, to be maximised).

The state is an immutable :class:`HedgeState`; the functions are pure, as in Optax:

.. code-block:: python

    acquisitions = {"ei": ei, "pi": pi, "ucb": ucb}
    state = hedge.init(tuple(acquisitions))
    for t in range(budget):
        key = jax.random.fold_in(root, t)
        key_opt, key_choose = jax.random.split(key)
        nominees = jnp.stack([optimize_acquisition(a, posterior, key_opt)[0][0]
                              for a in acquisitions.values()])      # (J, d)
        j, x = hedge.choose(key_choose, state, nominees)
        data = data.append(x, objective(x))
        posterior = ppbo.fit(surrogate, data, inference, key, init=posterior)
        state = hedge.update(state, posterior, nominees)

References:
    Hoffman, Brochu and de Freitas (2011), "Portfolio allocation for Bayesian
    optimization", Algorithm 1.
    Auer, Cesa-Bianchi, Freund and Schapire (1995), "Gambling in a rigged casino:
    the adversarial multi-armed bandit problem".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ppbo.acquisition.base import Acquisition
from ppbo.surrogate import Posterior

__all__ = [
    "gp_hedge",
    "HedgeState",
    "Portfolio",
    "hedge",
    "hedge_init",
    "hedge_probabilities",
    "hedge_choose",
    "hedge_update",
]


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["gains", "eta"],
    meta_fields=["names"],
)
@dataclass(frozen=True)
class HedgeState:
    """Cumulative gains of the base acquisitions (a pytree).

    Attributes:
        names: the base acquisitions' names, in nominee order (static).
        gains: cumulative rewards g^j, shape (J,).
        eta: the Hedge learning rate, > 0.
    """

    names: tuple[str, ...]
    gains: jax.Array
    eta: jax.Array


def hedge_init(names: Sequence[str], eta: float = 1.0) -> HedgeState:
    """Start a portfolio over base acquisitions with zero gains.

    Args:
        names: one name per base acquisition (J >= 1, distinct); the order is the
            order of the nominees passed to :func:`hedge_choose`.
        eta: learning rate; larger values follow the best acquisition more
            greedily. The default 1 is the common choice (e.g. scikit-optimize's
            ``gp_hedge``) for standardised outputs.

    Returns:
        A :class:`HedgeState` with gains zero (uniform probabilities).

    Raises:
        ValueError: for no names, repeated names or ``eta`` not finite and > 0.

    Example:
        >>> state = hedge_init(["ei", "pi", "ucb"])
        >>> hedge_probabilities(state)
        Array([0.33333333, 0.33333333, 0.33333333], dtype=float64)
    """
    if isinstance(names, str):
        raise ValueError(f"names must be a sequence of names, got the string {names!r}")
    names = tuple(str(name) for name in names)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"names must be distinct and not empty, got {names}")
    eta = float(eta)
    if not math.isfinite(eta) or eta <= 0:
        raise ValueError(f"eta must be finite and > 0, got eta={eta}")
    return HedgeState(names, jnp.zeros(len(names)), jnp.asarray(eta))


def hedge_probabilities(state: HedgeState) -> jax.Array:
    """Selection probabilities ``p_j`` proportional to ``exp(eta g_j)``, shape (J,).

    Example:
        >>> state = hedge_init(["ei", "pi"])
        >>> float(hedge_probabilities(state).sum())
        1.0
    """
    return jax.nn.softmax(state.eta * state.gains)


def _check_nominees(state: HedgeState, nominees: Any) -> jax.Array:
    nominees = jnp.asarray(nominees)
    if nominees.ndim != 2 or nominees.shape[0] != len(state.names):
        raise ValueError(
            f"nominees must have shape (J, d) with J = {len(state.names)} (one row per "
            f"acquisition in {state.names}), got shape {nominees.shape}"
        )
    return nominees


def hedge_choose(
    key: jax.Array, state: HedgeState, nominees: Any
) -> tuple[jax.Array, jax.Array]:
    """Choose one nominee with the Hedge probabilities.

    Args:
        key: JAX PRNG key.
        state: the portfolio.
        nominees: each base acquisition's maximiser, shape (J, d), in the order of
            ``state.names``.

    Returns:
        ``(index, x)``: the chosen acquisition's index and its nominee (d,).

    Raises:
        ValueError: for nominees of the wrong shape.

    Example:
        >>> state = hedge_init(["ei", "pi"])
        >>> index, x = hedge_choose(key, state, jnp.array([[0.1, 0.2], [0.3, 0.4]]))
        >>> x.shape
        (2,)
    """
    nominees = _check_nominees(state, nominees)
    index = jax.random.categorical(key, state.eta * state.gains)
    return index, nominees[index]


def hedge_update(state: HedgeState, posterior: Posterior, nominees: Any) -> HedgeState:
    """Add each acquisition's reward: the new posterior's mean at its nominee.

    Call it after refitting on the chosen nominee's observation, with the same
    nominees that :func:`hedge_choose` saw. Runs eagerly (it validates the
    nominees on the host), once per BO step.

    Args:
        state: the portfolio before the step.
        posterior: the posterior refitted with the new observation.
        nominees: the step's nominees, shape (J, d).

    Returns:
        The new :class:`HedgeState`.

    Raises:
        ValueError: for nominees of the wrong shape.

    Example:
        >>> state = hedge_init(["ei", "pi"])
        >>> nominees = jnp.array([[0.1, 0.2], [0.3, 0.4]])
        >>> hedge_update(state, posterior, nominees).gains.shape
        (2,)
    """
    nominees = _check_nominees(state, nominees)
    rewards, _ = posterior.predict_marginal(nominees)
    return HedgeState(state.names, state.gains + rewards, state.eta)


class Portfolio(NamedTuple):
    """A portfolio strategy as a bundle of pure functions (like Optax's transforms).

    Attributes:
        init: ``init(names, eta=1.0) -> state``.
        choose: ``choose(key, state, nominees) -> (index, x)``.
        update: ``update(state, posterior_new, nominees) -> state``.
        probabilities: ``probabilities(state) -> (J,)``.
    """

    init: Callable[..., HedgeState]
    choose: Callable[..., tuple[jax.Array, jax.Array]]
    update: Callable[..., HedgeState]
    probabilities: Callable[[HedgeState], jax.Array]


#: GP-Hedge (Hoffman et al. 2011): ``hedge.init``, ``hedge.choose``,
#: ``hedge.update``, ``hedge.probabilities``.
hedge = Portfolio(
    init=hedge_init,
    choose=hedge_choose,
    update=hedge_update,
    probabilities=hedge_probabilities,
)


def _portfolio(sample, X, **options):
    raise TypeError(
        "'gp_hedge' is a portfolio: a campaign step chooses one of its base "
        "acquisitions (ppbo.campaign.portfolio.hedge_step); it has no values of its "
        "own to evaluate"
    )


#: GP-Hedge as a campaign's acquisition (``Optimizer(acquisition="gp_hedge")``):
#: each ask maximises every base acquisition and follows one of them by the Hedge
#: probabilities (:func:`ppbo.campaign.portfolio.hedge_step`); its arms and
#: learning rate are ``acquisition_options={"acquisitions": [...], "eta": ...}``.
#: It names the strategy and cannot be evaluated itself.
gp_hedge = Acquisition("gp_hedge", _portfolio)
