"""Knowledge gradient: the expected rise of the best posterior mean after one sample.

For a candidate ``x`` and a discrete set ``A`` of points at which the posterior mean
is maximised, the knowledge gradient of Frazier, Powell and Dayanik (2009) is

.. math::
    \\mathrm{KG}(x) = \\mathbb E_y\\Big[\\max_{x' \\in A \\cup \\{x\\}}
        \\mu_{n+1}(x') \\,\\Big|\\, x_{n+1} = x\\Big]
        - \\max_{x' \\in A \\cup \\{x\\}} \\mu_n(x'),

where a fantasised observation ``y ~ N(mu_n(x), v_n(x) + noise)`` updates the
posterior mean in closed form (a rank-one update),

.. math::
    \\mu_{n+1}(x') = \\mu_n(x') + \\tilde\\sigma(x', x)\\, \\varepsilon, \\qquad
    \\tilde\\sigma(x', x) = \\frac{k_n(x', x)}{\\sqrt{v_n(x) + \\text{noise}}},
    \\qquad \\varepsilon \\sim \\mathcal N(0, 1),

with ``k_n`` the posterior covariance and ``v_n(x) = k_n(x, x)`` (Frazier et al.
2009, §3, the vector ``sigma-tilde``). The variant implemented here:

- **Discrete maximisation set.** By default ``A`` is the observed inputs, so the
  maximum runs over ``{x_1, ..., x_n, x}``: the knowledge gradient for continuous
  parameters (KGCP) of Scott, Frazier and Powell (2011). An option ``X_discrete``
  (p, d) replaces the observed inputs by a user grid; the candidate is always
  appended, which keeps ``KG >= 0``. This is not the one-shot KG of BoTorch
  (Balandat et al. 2020), which optimises the inner maximum continuously.
- **Monte Carlo over fantasies, not Frazier's exact envelope algorithm.** The
  expectation over the scalar ``eps`` is a randomised quasi-Monte Carlo average over
  ``num_fantasies`` points: one uniform shift ``u`` per hyperparameter sample, drawn
  from ``sample.aux``, gives ``eps_k = Phi^{-1}((k + u) / F)`` for ``k < F / 2`` and
  their mirror images ``-eps_k`` (stratified and antithetic, so unbiased with a much
  smaller variance than i.i.d. draws; the antithetic pairs give ``mean(eps) = 0``,
  which makes every estimate ``>= 0``). The same ``eps`` serve every candidate
  (common random numbers, as in Wu and Frazier 2016 and BoTorch's
  ``qKnowledgeGradient``), so the estimate is a smooth, deterministic function of
  ``x`` for a given key that the optimiser can differentiate.
- **Per hyperparameter sample.** The posterior covariances come from
  ``sample.predict_joint`` on ``[A; x]`` (for a block of candidates at once); the
  fantasy noise is the surrogate's per-point observation noise at ``x``
  (:attr:`~ppbo.Capability.NOISE`) unless ``noise=`` is given.
  :func:`~ppbo.acquisition.base.evaluate` averages the per-sample values.

Options: ``num_fantasies=64`` (even; static), ``X_discrete=None`` (p, d),
``noise=None``, ``min_var=1e-18`` (floor of ``v_n(x) + noise``). Needs ``key``.
Cost per sample: one joint prediction on ``[A; X_block]`` per block of 64
candidates (a candidate only reads its own rows and columns of it), then
``num_fantasies * (p + 1)`` comparisons per candidate.

References:
    Frazier, Powell and Dayanik (2009), "The knowledge-gradient policy for
    correlated normal beliefs", INFORMS J. Computing 21(4).
    Scott, Frazier and Powell (2011), "The correlated knowledge gradient for
    simulation optimization of continuous parameters using Gaussian process
    regression", SIAM J. Optimization 21(3).
    Wu and Frazier (2016), "The parallel knowledge gradient method for batch
    Bayesian optimization".
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from ppbo.acquisition.analytic import MIN_VARIANCE
from ppbo.acquisition.base import Acquisition, Sample, observation_noise
from ppbo.surrogate import Capability

__all__ = ["kg", "fantasy_normals"]

# Candidates per joint prediction: the (p + b)-point covariance costs about as much
# for b = 64 candidates as for one, as long as p (the discrete set) is of that size.
_BLOCK = 64


def fantasy_normals(key: jax.Array, num: int) -> jax.Array:
    """Stratified, antithetic standard-normal points for fantasy observations.

    ``eps_k = Phi^{-1}((k + u) / num)`` for ``k < num / 2`` with one ``u ~ U(0, 1)``
    from ``key``, followed by ``-eps_k``: each point is marginally uniform on its own
    stratum of probability ``1 / num``, so ``mean(g(eps))`` is an unbiased estimate
    of ``E[g(Z)]``; the set is symmetric about zero.

    Args:
        key: JAX PRNG key.
        num: number of points, a positive even integer.

    Returns:
        Array of shape (num,).

    Raises:
        ValueError: if ``num`` is not a positive even integer.

    Example:
        >>> eps = fantasy_normals(jax.random.key(0), 8)
        >>> eps.shape, bool(jnp.all(eps[4:] == -eps[:4]))
        ((8,), True)
    """
    if not isinstance(num, int) or num < 2 or num % 2:
        raise ValueError(f"num_fantasies must be a positive even integer, got {num!r}")
    u = jax.random.uniform(key, dtype=float)
    # u == 0 would give Phi^{-1}(0) = -inf.
    u = jnp.maximum(u, jnp.finfo(u.dtype).tiny)
    lower = ndtri((jnp.arange(num // 2, dtype=u.dtype) + u) / num)
    return jnp.concatenate([lower, -lower])


def _knowledge_gradient(
    sample: Sample,
    X: jax.Array,
    *,
    num_fantasies: int = 64,
    X_discrete: Any = None,
    noise: Any = None,
    min_var: Any = MIN_VARIANCE,
) -> jax.Array:
    """Knowledge gradient (KGCP by default) of one posterior sample, shape (m,).

    See the module docstring for the estimator and the options.

    Raises:
        ValueError: without a key or for an odd ``num_fantasies``.
        MissingCapabilityError: if the surrogate offers no ``predict_joint``, or
            declares no ``noise`` and no ``noise=`` is given.

    Example:
        >>> from ppbo.acquisition.base import evaluate
        >>> X = np.array([[0.5, 0.5], [0.1, 0.9]])
        >>> values = evaluate(kg, posterior, X, key=jax.random.key(0))
        >>> values.shape, bool(jnp.all(values >= 0))
        ((2,), True)
    """
    if sample.aux is None:
        raise ValueError("kg needs a key=... option (its fantasies are random)")
    eps = fantasy_normals(sample.aux, num_fantasies)
    if X_discrete is None:
        A, valid = sample.data.X, sample.data.target_mask
    else:
        A = jnp.asarray(X_discrete, dtype=X.dtype)
        valid = jnp.ones(A.shape[0], dtype=bool)
    p = A.shape[0]
    m, d = X.shape
    size = min(m, _BLOCK)
    num_blocks = -(-m // size)
    fill = jnp.broadcast_to(X[-1:], (num_blocks * size - m, d))  # values discarded
    blocks = jnp.concatenate([X, fill]).reshape(num_blocks, size, d)

    def block(Xb):
        # One joint prediction on [A; block]; a candidate's value reads only its
        # own entries, so candidates sharing a block do not interact.
        mean, cov = sample.predict_joint(jnp.concatenate([A, Xb]))
        noise_x = observation_noise(sample, Xb, noise)
        mu_A = jnp.where(valid, mean[:p], -jnp.inf)  # padded rows never win the max
        mu_x, var_x = mean[p:], jnp.diagonal(cov[p:, p:])
        # sigma-tilde of Frazier et al. (2009): how one noisy observation at x moves
        # the posterior mean at every point of A (p, size) and at x itself (size,).
        scale = 1.0 / jnp.sqrt(jnp.maximum(var_x + noise_x, min_var))
        s_A, s_x = cov[:p, p:] * scale, var_x * scale
        new_A = mu_A[:, None, None] + s_A[:, :, None] * eps  # (p, size, F)
        best = jnp.maximum(jnp.max(new_A, axis=0), mu_x[:, None] + s_x[:, None] * eps)
        current = jnp.maximum(jnp.max(mu_A), mu_x)
        # >= 0 in exact arithmetic (mean(eps) = 0 and max is convex); the clip only
        # removes round-off of a few ulp.
        return jnp.maximum(jnp.mean(best, axis=-1) - current, 0.0)

    return jax.vmap(block)(blocks).reshape(-1)[:m]


#: Knowledge gradient (Frazier et al. 2009; KGCP of Scott et al. 2011 by default).
kg = Acquisition(
    "kg",
    _knowledge_gradient,
    stochastic=True,
    requires=(Capability.PREDICT_JOINT,),
)
