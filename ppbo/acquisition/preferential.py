"""Acquisitions for preferential BO: EUBO for pairs and anchor-aware ANPEI.

**EUBO** (Astudillo, Lin, Bakshy and Frazier 2023, "qEUBO: a decision-theoretic
acquisition function for preferential Bayesian optimization", eq. (3) with
``q = 2``): the expected utility of the best option of a pair,

.. math:: \\mathrm{EUBO}(a, b) = \\mathbb E\\big[\\max(f(a), f(b))\\big]
    = \\mu_a \\Phi(\\alpha) + \\mu_b \\Phi(-\\alpha) + \\theta\\, \\varphi(\\alpha),

    \\theta^2 = \\sigma_a^2 + \\sigma_b^2 - 2 \\sigma_{ab}, \\qquad
    \\alpha = (\\mu_a - \\mu_b) / \\theta,

in closed form for the bivariate Gaussian of one posterior sample (Clark 1961,
"The greatest of a finite set of random variables", eq. (2)). A pair candidate
is one row ``[x_a, x_b]`` of ``2 d`` columns; with ``opponent=`` fixed, a row is
one point ``x`` paired with it.

**Dueling Thompson sampling** (the baseline of González, Dai, Damianou and
Lawrence 2017, "Preferential Bayesian optimization", in the simpler form of
Astudillo et al. 2023, §5): the pair is the maximisers, over a discrete candidate
set, of two independent sample paths of the latent utility, each from the
marginal posterior (a hyperparameter sample drawn uniformly, then a joint draw
of ``f`` at the candidates); see :func:`dueling_thompson`.

**ANPEI** (the notes on heteroscedastic preferential BO with anchors): EI whose
predictive standard deviation is scaled by the anchors' noise factor
``s(x) = phi(x)^(gamma / t)``, penalised by it,

.. math:: \\mathrm{ANPEI}(x) = \\rho\\, \\mathrm{EI}(x; s(x)) - (1 - \\rho)\\, s(x),
    \\qquad \\phi(x) = 1 + \\sum_\\ell (w_\\ell - 1)\\,
    k_\\ell\\big(\\lVert x - x_0^\\ell \\rVert\\big),

with ``k_l(d) = exp(-d^2 / (2 l^2))``, so that the anchors' influence fades as
the iteration ``t`` grows (``s -> 1``). ``EI(x; s)`` is read as EI with the
standard deviation ``s(x) sigma(x)``, the one reading under which ``phi = 1``
gives plain EI, as the notes intend.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from ppbo.acquisition.analytic import MIN_VARIANCE, log_h
from ppbo.acquisition.base import (
    Acquisition,
    Sample,
    best_observed_mean,
    prepare_incumbents,
)
from ppbo.surrogate import Capability, Posterior

__all__ = ["expected_max", "anchor_factor", "eubo", "anpei", "dueling_thompson"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def expected_max(
    mean_a: Any, mean_b: Any, var_a: Any, var_b: Any, cov_ab: Any
) -> jax.Array:
    """``E[max(A, B)]`` for a bivariate Gaussian (Clark 1961, eq. (2)).

    Where ``Var[A - B]`` vanishes the limit ``max(mean_a, mean_b)`` is returned.

    Args:
        mean_a, mean_b: means, any broadcastable shapes.
        var_a, var_b: variances.
        cov_ab: covariance of A and B.

    Returns:
        The expectation, the broadcast shape.

    Example:
        >>> round(float(expected_max(0.0, 0.0, 1.0, 1.0, 0.0)), 6)  # 1 / sqrt(pi)
        0.56419
    """
    theta2 = var_a + var_b - 2.0 * cov_ab
    positive = theta2 > 1e-300
    theta = jnp.sqrt(jnp.where(positive, theta2, 1.0))
    alpha = (mean_a - mean_b) / theta
    value = (
        mean_a * ndtr(alpha)
        + mean_b * ndtr(-alpha)
        + theta * _INV_SQRT_2PI * jnp.exp(-0.5 * alpha**2)
    )
    return jnp.where(positive, value, jnp.maximum(mean_a, mean_b))


def _eubo(sample: Sample, X: jax.Array, *, opponent: Any = None) -> jax.Array:
    """EUBO of each pair, (m,): rows ``[x_a, x_b]`` or ``x`` against ``opponent``.

    Example:
        >>> from ppbo.acquisition.base import bind
        >>> pairs = np.array([[0.5, 0.5, 0.1, 0.9]])  # d = 2: one pair per row
        >>> bind(eubo, posterior)(pairs).shape
        (1, 1)
    """
    if opponent is None:
        d = X.shape[1] // 2
        points = X.reshape(X.shape[0], 2, d)
    else:
        other = jnp.broadcast_to(jnp.asarray(opponent, dtype=X.dtype), X.shape)
        points = jnp.stack([X, other], axis=1)

    def one(pair):
        mean, cov = sample.predict_joint(pair)
        return expected_max(mean[0], mean[1], cov[0, 0], cov[1, 1], cov[0, 1])

    return jax.vmap(one)(points)


def anchor_factor(
    X: jax.Array, anchors: Any, weights: Any, lengthscale: Any = 0.1
) -> jax.Array:
    """``phi(x) = 1 + sum_l (w_l - 1) exp(-|x - x0_l|^2 / (2 l^2))``, shape (m,).

    Args:
        X: points, shape (m, d).
        anchors: anchor inputs ``x0_l``, shape (L, d).
        weights: ``w_l`` per anchor, shape (L,); ``w = 1`` leaves ``phi = 1``.
        lengthscale: the anchors' kernel width, scalar or (L,).

    Example:
        >>> import jax.numpy as jnp
        >>> anchor_factor(jnp.array([[0.0], [5.0]]), [[0.0]], [3.0]).tolist()
        [3.0, 1.0]
    """
    anchors = jnp.asarray(anchors, dtype=X.dtype)
    weights = jnp.asarray(weights, dtype=X.dtype)
    d2 = jnp.sum((X[:, None, :] - anchors[None, :, :]) ** 2, axis=-1)
    k = jnp.exp(-0.5 * d2 / jnp.asarray(lengthscale, dtype=X.dtype) ** 2)
    return 1.0 + k @ (weights - 1.0)


def _anpei(
    sample: Sample,
    X: jax.Array,
    *,
    anchors: Any,
    weights: Any,
    lengthscale: Any = 0.1,
    gamma: Any = 1.0,
    t: Any = 1.0,
    rho: Any = 0.5,
    best_f: Any = None,
    xi: Any = 0.0,
    min_var: Any = MIN_VARIANCE,
) -> jax.Array:
    """ANPEI ``rho EI(x; s) - (1 - rho) s`` with ``s = phi(x)^(gamma / t)``, (m,).

    ``phi`` is floored at 1e-12 so that its power stays defined where weights
    below 1 overlap.

    Example:
        >>> from ppbo.acquisition import ei
        >>> from ppbo.acquisition.base import evaluate
        >>> X = np.array([[0.5, 0.5], [0.1, 0.9]])
        >>> plain = evaluate(anpei, posterior, X, anchors=np.array([[0.5, 0.5]]),
        ...                  weights=np.array([1.0]), rho=1.0)
        >>> bool(jnp.allclose(plain, evaluate(ei, posterior, X)))
        True
    """
    mean, var = sample.predict(X)
    if best_f is None:
        best_f = best_observed_mean(sample) if sample.aux is None else sample.aux
    phi = jnp.maximum(anchor_factor(X, anchors, weights, lengthscale), 1e-12)
    scale = phi ** (jnp.asarray(gamma, dtype=X.dtype) / t)
    sigma = scale * jnp.sqrt(jnp.maximum(var, min_var))
    z = (mean - best_f - xi) / sigma
    improvement = jnp.exp(log_h(z) + jnp.log(sigma))
    return rho * improvement - (1.0 - rho) * scale


#: EUBO for pairs (Astudillo et al. 2023); rows ``[x_a, x_b]`` (2 d columns,
#: call it through :func:`~ppbo.acquisition.base.bind`, since
#: :func:`~ppbo.acquisition.base.evaluate` checks for d columns) or, with
#: ``opponent=``, points ``x`` (d columns).
eubo = Acquisition("eubo", _eubo, requires=(Capability.PREDICT_JOINT,))

#: ANPEI (the notes); options ``anchors``, ``weights`` (arrays), ``lengthscale``,
#: ``gamma``, ``t``, ``rho``, ``best_f``, ``xi``.
anpei = Acquisition("anpei", _anpei, prepare=prepare_incumbents)


def dueling_thompson(
    key: jax.Array, posterior: Posterior, X: Any
) -> tuple[jax.Array, jax.Array]:
    """The next duel by dueling Thompson sampling on a discrete candidate set.

    Two independent paths ``f_1, f_2`` are drawn from the marginal posterior at the
    candidates (each: a hyperparameter sample uniformly, then a joint draw); the
    pair is ``(argmax f_1, argmax f_2)``. Each member is thus distributed as the
    posterior probability of being the maximiser among the candidates; the two
    may coincide (then the duel is uninformative and a caller may redraw).

    Args:
        key: a JAX PRNG key; the same key gives the same pair.
        posterior: a posterior whose surrogate declares ``predict_joint``.
        X: candidate points, shape (m, d), float64.

    Returns:
        ``(indices, pair)``: the candidates' rows, shape (2,), and the points,
        shape (2, d).

    Raises:
        MissingCapabilityError: without ``predict_joint``.
        ValueError: for candidates of the wrong shape or non-finite values (from
            :meth:`ppbo.Posterior.sample_f`).

    References:
        González, Dai, Damianou and Lawrence (2017), "Preferential Bayesian
        optimization". Astudillo, Lin, Bakshy and Frazier (2023), "qEUBO: a
        decision-theoretic acquisition function for preferential Bayesian
        optimization".

    Example:
        >>> X = np.array([[0.1, 0.2], [0.5, 0.5], [0.9, 0.8]])
        >>> rows, pair = dueling_thompson(key, posterior, X)
        >>> rows.shape, pair.shape
        ((2,), (2, 2))
    """
    key_sample, key_path = jax.random.split(key)
    f = posterior.sample_f(key_path, X, num=2)  # (s, 2, m)
    s = f.shape[0]
    which = jax.random.randint(key_sample, (2,), 0, s)
    rows = jnp.stack([jnp.argmax(f[which[0], 0]), jnp.argmax(f[which[1], 1])])
    return rows, jnp.asarray(X, dtype=jnp.float64)[rows]
