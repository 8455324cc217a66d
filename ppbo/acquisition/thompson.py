"""Thompson sampling on random-Fourier-feature posterior sample paths.

Thompson sampling (Thompson 1933) evaluates the maximiser of one function drawn from
the posterior. Under a hyperparameter posterior, a draw from the marginal posterior
of ``f`` is obtained by first drawing a hyperparameter sample ``i`` and then a path
``f ~ p(f | D, theta_i)``; the paths are random-Fourier-feature approximations
(:mod:`ppbo.acquisition.rff`), one per hyperparameter sample, as in
Hernández-Lobato, Hoffman and Ghahramani (2014, Appendix A), for surrogates that
declare :class:`~ppbo.GPParts` and ``noise``; other surrogates bring their own
:class:`~ppbo.surrogate.PathSampler` (:attr:`~ppbo.Capability.SAMPLE_PATHS`, e.g. the
exact weight draws of a Bayesian linear model), and anything else is refused with a
:class:`~ppbo.MissingCapabilityError`.

How a campaign uses it: :data:`thompson` is Thompson sampling in the
:class:`~ppbo.acquisition.Acquisition` contract. It ``draws_sample``, so
:func:`~ppbo.acquisition.bind` (and with it :func:`ppbo.optimize_acquisition` and a
campaign) draws ONE hyperparameter sample uniformly from ``key``, ``prepare`` draws
ONE path of it, and the acquisition's value at ``X`` is that path's value: its
maximiser is a draw of the maximiser of f from the marginal posterior. Averaging
the paths of all samples instead would give a smoother random function near the
posterior mean, not a Thompson sample. ``per_sample(thompson, posterior, X,
key=key)`` has shape (1, m); the same key gives the same sample and path. Options:
``key`` (required) and ``num_features`` (M, default 1000).

:func:`thompson_point` does the same in one compiled call: one sample, one path
and the path's maximiser (over given candidates, or in the unit cube by dense
random search and projected gradient ascent). Use ``fold_in(root, t)`` as the key
of step ``t``.

Example:
    >>> from ppbo.acquisition import per_sample
    >>> from ppbo.acquisition.thompson import thompson
    >>> X = jnp.full((3, 2), 0.5)
    >>> per_sample(thompson, posterior, X, key=key, num_features=128).shape
    (1, 3)
    >>> X_t, _ = ppbo.optimize_acquisition(thompson, posterior, key, num_raw=64)

References:
    Thompson (1933), "On the likelihood that one unknown probability exceeds
    another in view of the evidence of two samples".
    Hernández-Lobato, Hoffman and Ghahramani (2014), "Predictive entropy search for
    efficient global optimization of black-box functions", Appendix A.
    Rahimi and Recht (2007), "Random features for large-scale kernel machines".
"""

from __future__ import annotations

import numbers
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.acquisition.base import Acquisition, Sample
from ppbo.acquisition.rff import evaluate_paths, maximize_paths, sample_paths
from ppbo.surrogate import Capability, MissingCapabilityError, Posterior, Surrogate

__all__ = ["thompson", "thompson_point"]


def _path_functions(surrogate: Surrogate):
    """``(draw(key, sample, num_features), evaluate(paths, X))`` for one path.

    GPs get random-feature paths (:mod:`ppbo.acquisition.rff`); other surrogates
    their declared :class:`~ppbo.surrogate.PathSampler`.
    """
    have = surrogate.capabilities
    if {Capability.GP, Capability.NOISE} <= have:

        def draw_gp(key, sample, num_features):
            return sample_paths(key, sample, 1, num_features)

        return draw_gp, evaluate_paths
    if Capability.SAMPLE_PATHS not in have:
        raise MissingCapabilityError(
            "acquisition 'thompson' needs the surrogate capability 'sample_paths' "
            "(a PathSampler), or 'gp' and 'noise' for random-Fourier-feature "
            f"paths; surrogate {surrogate.name!r} declares neither"
        )
    sampler = surrogate.paths

    def draw(key, sample, num_features):
        del num_features
        return sampler.draw(key, sample.params, sample.data, sample.cache, 1)

    return draw, sampler.evaluate


@partial(jax.jit, static_argnames=("num_features",))
def _draw(key, posterior: Posterior, num_features: int):
    draw, _ = _path_functions(posterior.surrogate)

    def one(key, params, cache):
        sample = Sample(params, cache, posterior.data, posterior.surrogate)
        return draw(key, sample, num_features)

    keys = jax.random.split(key, posterior.num_samples)
    return jax.vmap(one)(keys, posterior.samples, posterior.cache)


def _prepare(key: jax.Array, posterior: Posterior, *, num_features: int = 1000, **_):
    _path_functions(posterior.surrogate)  # refuse before tracing
    return _draw(key, posterior, int(num_features))


def _thompson(sample: Sample, X: jax.Array, **_: Any) -> jax.Array:
    _, evaluate = _path_functions(sample.surrogate)
    return evaluate(sample.aux, X)[0]


#: Thompson sampling: the values of one RFF posterior path of one hyperparameter
#: sample, both drawn from the key.
thompson = Acquisition(
    "thompson",
    _thompson,
    prepare=_prepare,
    stochastic=True,
    draws_sample=True,
)


@partial(
    jax.jit,
    static_argnames=(
        "discrete",
        "num_features",
        "num_candidates",
        "num_restarts",
        "num_steps",
    ),
)
def _point(
    key,
    posterior,
    candidates,
    discrete,
    num_features,
    num_candidates,
    num_restarts,
    num_steps,
    learning_rate,
):
    k_index, k_path, k_max = jax.random.split(key, 3)
    index = jax.random.randint(k_index, (), 0, posterior.num_samples)

    def take(a):
        return a[index]

    sample = Sample(
        jax.tree.map(take, posterior.samples),
        jax.tree.map(take, posterior.cache),
        posterior.data,
        posterior.surrogate,
    )
    paths = sample_paths(k_path, sample, 1, num_features)
    if discrete:
        return candidates[jnp.argmax(evaluate_paths(paths, candidates)[0])]
    X_star, _ = maximize_paths(
        k_max,
        paths,
        candidates=candidates,
        num_candidates=num_candidates,
        num_restarts=num_restarts,
        num_steps=num_steps,
        learning_rate=learning_rate,
    )
    return X_star[0]


def thompson_point(
    key: jax.Array,
    posterior: Posterior,
    candidates: Any,
    *,
    num_features: int = 1000,
    num_candidates: int = 1024,
    num_restarts: int = 4,
    num_steps: int = 100,
    learning_rate: float = 0.02,
) -> jax.Array:
    """Draw one Thompson-sampling point: the argmax of one posterior sample path.

    Draws a hyperparameter sample uniformly from ``posterior``, one RFF sample path
    of it, and returns the path's maximiser.

    Args:
        key: JAX PRNG key (``fold_in(root, t)`` at step ``t``).
        posterior: a GP posterior (see :func:`~ppbo.acquisition.rff.sample_paths`).
        candidates: either a finite candidate set of shape (m, d), whose best row is
            returned, or the input dimension ``d`` (an int) to maximise over the
            unit cube: ``num_candidates`` random points plus the observed inputs,
            refined by projected gradient ascent (see
            :func:`~ppbo.acquisition.rff.maximize_paths`).
        num_features: M.
        num_candidates, num_restarts, num_steps, learning_rate: the continuous
            search (ignored for a finite candidate set).

    Returns:
        The point, shape (d,), in [0, 1]^d for the continuous search.

    Raises:
        ValueError: for candidates of the wrong dimension.

    Example:
        >>> x = thompson_point(key, posterior, 2, num_features=128,
        ...                    num_candidates=128, num_steps=10)
        >>> x.shape, bool(jnp.all((x >= 0) & (x <= 1)))
        ((2,), True)
    """
    posterior.surrogate.require(Capability.GP, Capability.NOISE, by="thompson_point")
    dim = posterior.data.dim
    discrete = not isinstance(candidates, numbers.Integral)
    if discrete:
        points = jnp.asarray(candidates)
        if points.ndim != 2 or points.shape[1] != dim or points.shape[0] == 0:
            raise ValueError(
                f"candidates must have shape (m, {dim}) with m >= 1, got shape "
                f"{points.shape}"
            )
        if not np.issubdtype(points.dtype, np.floating):
            points = points.astype(posterior.data.X.dtype)
    else:
        if int(candidates) != dim:
            raise ValueError(
                f"candidates is the dimension d = {candidates}, but the posterior's "
                f"data have d = {dim}"
            )
        points = posterior.data.X
    return _point(
        key,
        posterior,
        points,
        discrete,
        int(num_features),
        int(num_candidates),
        int(num_restarts),
        int(num_steps),
        learning_rate,
    )
