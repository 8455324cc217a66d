"""Multi-armed-bandit source selection (Ramachandran et al. 2018).

Single-source transfer models (Env-GP, Diff-GP, ...) use one source task at a
time. Ramachandran, Gupta, Rana and Venkatesh (2018) choose that source at each
BO iteration with a bandit: source ``k`` is an arm, and after the target is
evaluated at ``x_t`` the chosen arm's reward is

.. math::
    r_t^k = -\\big(y_t - \\mu^k(x_t)\\big)^2,

with ``μ^k`` the posterior mean of a GP fitted to source ``k`` alone. The arms
carry weights ``ω^k`` (``ω^k(1) = 1``) and the EXP3 probabilities of Auer,
Cesa-Bianchi, Freund and Schapire (2002, Fig. 1)

.. math::
    p_t^k = (1 - \\gamma) \\frac{\\omega^k(t)}{\\sum_j \\omega^j(t)}
        + \\frac{\\gamma}{K}, \\qquad \\gamma \\in (0, 1];

the source chosen at iteration ``t`` is ``s_t = argmax_k p_t^k`` (the selection
rule of Ramachandran et al. as the survey of Bai et al. 2023, §"source
selection", states it), and only the chosen arm's weight is updated, with the
importance-weighted reward of EXP3:

.. math::
    \\omega^{s_t}(t + 1) = \\omega^{s_t}(t)
        \\exp\\!\\big(\\gamma \\, r_t^{s_t} / (K p_t^{s_t})\\big).

The rewards are never positive, so a chosen arm's weight can only fall, by
little when its source predicted the target well: the argmax rule then returns
to the arms whose sources predict best, and visits the others less and less.
Ties of ``p`` (every arm at the start; every iteration when ``γ = 1``, which
makes ``p`` uniform) are broken by the larger weight, then the lower index.
Weights are kept as logarithms, so that large negative rewards cannot underflow.

The functions are pure, Optax style: :func:`init` makes a :class:`BanditState`
(a pytree), :func:`select` reads it, :func:`update` returns a new one.

References:
    Ramachandran, A., Gupta, S., Rana, S. and Venkatesh, S. (2018). Selecting
    optimal source for transfer learning in Bayesian optimisation. PRICAI 2018,
    LNCS 11012, 42-56.

    Auer, P., Cesa-Bianchi, N., Freund, Y. and Schapire, R. E. (2002). The
    nonstochastic multiarmed bandit problem. SIAM J. Computing 32(1), 48-77.

    Bai, T., Li, Y., Shen, Y., Zhang, X., Zhang, W. and Cui, B. (2023). Transfer
    learning for Bayesian optimization: a survey. arXiv:2302.05927.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "BanditState",
    "init",
    "probabilities",
    "select",
    "update",
    "reward",
    "check_gamma",
]


class BanditState(NamedTuple):
    """The bandit's state: log-weights and pull counts of the K arms.

    Attributes:
        log_weights: ``log ω^k``, shape (K,).
        counts: how often each arm was updated, shape (K,).
    """

    log_weights: jax.Array
    counts: jax.Array


def check_gamma(gamma: float) -> float:
    """Return ``gamma`` as a float in (0, 1], or raise naming it.

    Example:
        >>> check_gamma(0.5)
        0.5
    """
    try:
        value = float(gamma)
    except (TypeError, ValueError):
        raise ValueError(f"gamma must be a number in (0, 1], got {gamma!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got gamma={gamma!r}")
    return value


def init(num_arms: int) -> BanditState:
    """The initial state: every weight 1 (``ω^k(1) = 1``), no pulls.

    Args:
        num_arms: K, the number of sources.

    Raises:
        ValueError: for ``num_arms < 1``.

    Example:
        >>> init(3).log_weights.tolist()
        [0.0, 0.0, 0.0]
    """
    if int(num_arms) < 1:
        raise ValueError(f"num_arms must be >= 1, got {num_arms!r}")
    return BanditState(
        jnp.zeros(int(num_arms), jnp.float64), jnp.zeros(int(num_arms), jnp.int64)
    )


def probabilities(state: BanditState, gamma: float) -> jax.Array:
    """The EXP3 probabilities ``p^k = (1 - γ) ω^k / Σ ω + γ / K``, shape (K,).

    Example:
        >>> probabilities(init(4), 0.5).tolist()
        [0.25, 0.25, 0.25, 0.25]
    """
    K = state.log_weights.shape[0]
    return (1.0 - gamma) * jax.nn.softmax(state.log_weights) + gamma / K


def select(state: BanditState, gamma: float) -> jax.Array:
    """The arm ``argmax_k p^k`` (ties: larger weight, then lower index).

    Example:
        >>> state = init(3)._replace(log_weights=jnp.array([-1.0, -0.2, -0.5]))
        >>> int(select(state, 0.3))
        1
    """
    p = probabilities(state, gamma)
    # p is increasing in the weight for gamma < 1 and constant for gamma = 1, so
    # the lexicographic (p, weight) maximum is the maximum weight in both cases;
    # argmax returns the first maximum, the lower index.
    best = p == jnp.max(p)
    return jnp.argmax(jnp.where(best, state.log_weights, -jnp.inf))


def update(
    state: BanditState,
    arm: int,
    reward_value: float,
    gamma: float,
    probability: float | None = None,
) -> BanditState:
    """Update the chosen arm's weight with its importance-weighted reward.

    ``log ω^a += γ r / (K p^a)``; the other arms are unchanged.

    Args:
        state: the current state.
        arm: the arm that was chosen.
        reward_value: its reward ``r`` (e.g. :func:`reward`).
        gamma: the exploration parameter γ in (0, 1].
        probability: ``p^a`` at the time the arm was chosen (default: from
            ``state``, which is the same when no other update came between).

    Returns:
        The new state.

    Example:
        >>> state = update(init(2), 0, -1.0, 0.5)
        >>> [round(w, 6) for w in state.log_weights.tolist()], state.counts.tolist()
        ([-0.5, 0.0], [1, 0])
    """
    K = state.log_weights.shape[0]
    if probability is None:
        probability = probabilities(state, gamma)[arm]
    step = gamma * reward_value / (K * probability)
    return BanditState(state.log_weights.at[arm].add(step), state.counts.at[arm].add(1))


def reward(y: float, mean: float) -> jax.Array:
    """The reward ``-(y - μ^k(x))^2`` of Ramachandran et al. (2018).

    Example:
        >>> float(reward(1.0, 0.5))
        -0.25
    """
    return -jnp.square(jnp.asarray(y) - jnp.asarray(mean))
