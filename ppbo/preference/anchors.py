"""Anchor management for preferential BO: a budget, replacement, drift strategies.

From the notes on heteroscedastic preferential BO with expert anchors: storing
many anchors is too costly, so once the budget is full a new candidate replaces
the least promising anchor when it "has a better chance to be the optimum of the
objective function"; that chance is the probability of being the maximiser of
the latent utility among the anchors and the candidate, estimated from joint
posterior draws (:func:`maximiser_probability`). For a drifting objective the
notes name the three non-stationary bandit remedies, selectable by name in
:func:`observation_weights`:

- ``"restart"``: forget every duel and anchor older than a horizon and refit
  (Garivier and Moulines 2011 discuss restarts alongside their two methods);
- ``"sliding_window"``: keep only the ``window`` most recent duels and anchors
  (Garivier and Moulines 2011, "On upper-confidence bound policies for switching
  bandit problems", SW-UCB);
- ``"weighted_penalty"``: down-weight an observation of age ``a`` by
  ``decay ** a`` in the likelihood (their discounted UCB), through the ``weights``
  of :func:`ppbo.models.preference_gp.duel_log_likelihood` and
  :func:`~ppbo.models.preference_gp.anchor_log_likelihood`.

Restart and sliding window return 0/1 weights: a 0 weight is the same as
dropping the observation. All functions are pure functions of arrays.

References:
    Garivier and Moulines (2011), "On upper-confidence bound policies for
    switching bandit problems".
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "STRATEGIES",
    "maximiser_probability",
    "replace_anchor",
    "add_anchor",
    "observation_weights",
]

#: Names accepted by :func:`observation_weights`.
STRATEGIES = ("restart", "sliding_window", "weighted_penalty")


def maximiser_probability(
    key: jax.Array, mean: Any, cov: Any, num_draws: int = 4096
) -> jax.Array:
    """Probability that each point is the maximiser, from joint Gaussian draws.

    Args:
        key: a JAX PRNG key.
        mean: joint posterior mean at the m points, shape (m,) or (s, m) for s
            hyperparameter samples (the draws are spread over them equally).
        cov: joint posterior covariance, shape (m, m) or (s, m, m).
        num_draws: draws per hyperparameter sample.

    Returns:
        The fraction of draws in which each point is the largest, shape (m,).

    Example:
        >>> p = maximiser_probability(key, jnp.array([0.0, 3.0]), jnp.eye(2))
        >>> bool(p[1] > 0.95), float(p.sum())
        (True, 1.0)
    """
    mean = jnp.atleast_2d(jnp.asarray(mean, dtype=jnp.float64))
    cov = jnp.asarray(cov, dtype=jnp.float64)
    cov = cov[None] if cov.ndim == 2 else cov
    m = mean.shape[-1]
    jitter = 1e-10 * jnp.eye(m)

    def one(key, mu, sigma):
        draws = jax.random.multivariate_normal(
            key, mu, sigma + jitter, (num_draws,), method="eigh"
        )
        return jnp.mean(jax.nn.one_hot(jnp.argmax(draws, axis=-1), m), axis=0)

    keys = jax.random.split(key, mean.shape[0])
    return jnp.mean(jax.vmap(one)(keys, mean, cov), axis=0)


def _check_anchors(X0, y0, x, y):
    X0 = np.asarray(X0, dtype=np.float64)
    y0 = np.asarray(y0, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    if X0.ndim != 2 or y0.shape != (X0.shape[0],):
        raise ValueError(
            f"anchors must be X0 of shape (L, d) and y0 of shape (L,), got X0 "
            f"shape {X0.shape} and y0 shape {y0.shape}"
        )
    if x.shape != (X0.shape[1],):
        raise ValueError(
            f"candidate must have shape ({X0.shape[1]},), got shape {x.shape}"
        )
    for name, value in (("X0", X0), ("y0", y0), ("candidate", x), ("y", [y])):
        bad = ~np.isfinite(np.asarray(value, dtype=np.float64))
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            where = "".join(f"[{int(k)}]" for k in i)
            raise ValueError(
                f"{name} must be finite, got {name}{where} = {np.asarray(value)[i]}"
            )
    return X0, y0, x, float(y)


def replace_anchor(
    X0: Any, y0: Any, x: Any, y: Any, probability: Any
) -> tuple[np.ndarray, np.ndarray, int]:
    """Replace the least promising anchor by the candidate when it beats it.

    Args:
        X0: anchor inputs, shape (L, d).
        y0: anchor measurements, shape (L,).
        x: the candidate, shape (d,), with its measurement ``y``.
        y: the candidate's measurement.
        probability: probability of being the maximiser of the anchors and the
            candidate (last), shape (L + 1,), e.g. from :func:`maximiser_probability`.

    Returns:
        ``(X0, y0, index)``: the new anchors and the replaced row, or the same
        anchors and -1 when the candidate's probability does not exceed the
        smallest anchor's (ties keep the anchor).

    Raises:
        ValueError: naming the field and value for wrong shapes or non-finite
            values, or probabilities outside [0, 1].

    Example:
        >>> X0, y0, i = replace_anchor([[0.1], [0.5]], [1.0, 2.0], [0.9], 3.0,
        ...                            [0.3, 0.2, 0.5])
        >>> X0.tolist(), y0.tolist(), i
        ([[0.1], [0.9]], [1.0, 3.0], 1)
    """
    X0, y0, x, y = _check_anchors(X0, y0, x, y)
    p = np.asarray(probability, dtype=np.float64)
    if p.shape != (X0.shape[0] + 1,):
        raise ValueError(
            f"probability must have shape ({X0.shape[0] + 1},), anchors then the "
            f"candidate, got shape {p.shape}"
        )
    bad = ~(np.isfinite(p) & (p >= 0) & (p <= 1))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"probability must be in [0, 1], got probability[{i}] = {p[i]}"
        )
    if X0.shape[0] == 0:
        return X0, y0, -1
    worst = int(np.argmin(p[:-1]))
    if not p[-1] > p[worst]:
        return X0, y0, -1
    X0, y0 = X0.copy(), y0.copy()
    X0[worst], y0[worst] = x, y
    return X0, y0, worst


def add_anchor(
    X0: Any, y0: Any, x: Any, y: Any, probability: Any, *, budget: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Add an anchor within a budget: append while there is room, else replace.

    Args:
        X0, y0, x, y, probability: as for :func:`replace_anchor`.
        budget: the most anchors kept, an integer >= 1.

    Returns:
        ``(X0, y0, index)``: the new anchors and the row the candidate went to
        (-1 when it was not kept). Never more than ``budget`` rows.

    Raises:
        ValueError: for a bad budget, more anchors than the budget already, or
            the errors of :func:`replace_anchor`.

    Example:
        >>> X0, y0, i = add_anchor([[0.1]], [1.0], [0.9], 3.0, [0.5, 0.5], budget=2)
        >>> X0.tolist(), i
        ([[0.1], [0.9]], 1)
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1, got budget={budget!r}")
    X0, y0, x, y = _check_anchors(X0, y0, x, y)
    if X0.shape[0] > budget:
        raise ValueError(
            f"there are already more anchors than the budget: L = {X0.shape[0]}, "
            f"budget={budget}"
        )
    if X0.shape[0] < budget:
        return np.vstack([X0, x[None]]), np.append(y0, y), X0.shape[0]
    return replace_anchor(X0, y0, x, y, probability)


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {name}={value!r}")
    return int(value)


def observation_weights(
    strategy: str, times: Any, now: Any = None, **options: Any
) -> np.ndarray:
    """Per-observation likelihood weights of a drift strategy, by name.

    Args:
        strategy: one of :data:`STRATEGIES`.
        times: the iteration at which each duel or anchor was observed, shape (n,).
        now: the current iteration; defaults to ``max(times)``.
        **options: ``horizon`` (restart: keep ages ``now - t < horizon``),
            ``window`` (sliding window: keep the ``window`` most recent, the later
            row first among equal times) or ``decay`` in (0, 1] (weighted
            penalty: ``decay ** (now - t)``).

    Returns:
        Weights in [0, 1], shape (n,); 0/1 for restart and sliding window. Pass
        them as ``weights=`` to the preference GP's likelihoods, or keep the rows
        with weight 1 and refit.

    Raises:
        ValueError: naming an unknown strategy, a missing or bad option, or
            non-finite times.

    Example:
        >>> observation_weights("sliding_window", [0, 1, 2, 3], window=2).tolist()
        [0.0, 0.0, 1.0, 1.0]
        >>> observation_weights("restart", [0, 1, 2, 3], horizon=3).tolist()
        [0.0, 1.0, 1.0, 1.0]
        >>> observation_weights("weighted_penalty", [0, 1, 2], decay=0.5).tolist()
        [0.25, 0.5, 1.0]
    """
    if strategy not in STRATEGIES:
        raise ValueError(
            f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}"
        )
    expected = {"restart": "horizon", "sliding_window": "window"}.get(strategy, "decay")
    if set(options) != {expected}:
        raise ValueError(
            f"strategy {strategy!r} takes exactly the option {expected!r}, got "
            f"{sorted(options)}"
        )
    t = np.asarray(times, dtype=np.float64)
    if t.ndim != 1:
        raise ValueError(f"times must have shape (n,), got shape {t.shape}")
    if not np.isfinite(t).all():
        i = int(np.argmax(~np.isfinite(t)))
        raise ValueError(f"times must be finite, got times[{i}] = {t[i]}")
    now = float(t.max(initial=0.0) if now is None else now)
    age = now - t
    if strategy == "restart":
        horizon = _positive_int("horizon", options["horizon"])
        return (age < horizon).astype(np.float64)
    if strategy == "sliding_window":
        window = _positive_int("window", options["window"])
        # Most recent first; among equal times the later row is the newer one.
        order = np.lexsort((-np.arange(t.size), -t))
        weights = np.zeros(t.size)
        weights[order[:window]] = 1.0
        return weights
    decay = float(options["decay"])
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"decay must be in (0, 1], got decay={decay}")
    return decay ** np.maximum(age, 0.0)
