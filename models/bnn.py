"""Bayesian neural network: a small tanh MLP with hierarchical Gaussian priors.

A NumPyro model sampled with NUTS (several chains vmapped, :class:`ppbo.NUTS`);
each posterior sample is one network, and the predictive is the mixture over
samples. With layer sizes ``(d, h_1, ..., h_L, 1)``, ``fan_in`` the input width of
layer ``l``:

.. math::
    s_l \\sim \\mathrm{HalfNormal}(1), \\quad
    z_l \\sim \\mathcal N(0, I), \\quad W_l = s_l z_l / \\sqrt{\\mathrm{fan\\_in}_l},
    \\quad b_l \\sim \\mathcal N(0, 1), \\\\
    f(x) = W_L^T \\tanh(\\cdots \\tanh(W_0^T x + b_0) \\cdots) + b_L, \\quad
    y \\sim \\mathcal N(f(x), \\sigma_n^2), \\quad
    \\sigma_n^2 \\sim \\mathrm{LogNormal}(-4, 1)

The per-layer scales ``s_l`` make the prior hierarchical (Neal 1996, §2.3,
"hyperparameters" of each group of weights; MacKay 1992); the weights are
sampled in the non-centred form ``z_l`` (Papaspiliopoulos, Roberts and Sköld
2007), which keeps NUTS away from the funnel between a scale and its weights.

Sites: ``z{l}`` (fan_in, fan_out), ``b{l}`` (fan_out,), ``scale{l}`` and
``noise`` (the shared site name of ppbo's models). ``predict`` returns one
network's values with zero latent variance (a sample is one function); the
framework's mixture over samples is the predictive. The surrogate declares the
observation noise and exact sample paths (each path is the network of its
sample: Thompson sampling), no conditioning.

References:
    Neal, R. M. (1996). Bayesian Learning for Neural Networks. Springer.
    MacKay, D. J. C. (1992). A Practical Bayesian Framework for Backpropagation
    Networks. Neural Computation 4(3).
    Hoffman, M. D. and Gelman, A. (2014). The No-U-Turn Sampler. JMLR 15.
    Papaspiliopoulos, O., Roberts, G. O. and Sköld, M. (2007). A general framework
    for the parametrization of hierarchical models. Statistical Science 22(1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ppbo.data import Dataset
from ppbo.surrogate import PathSampler, Surrogate

__all__ = ["surrogate", "network"]


def network(
    params: Mapping[str, jax.Array], X: jax.Array, num_layers: int
) -> jax.Array:
    """The network of one sample at ``X`` (m, d): shape (m,).

    Args:
        params: the sites ``z{l}``, ``b{l}``, ``scale{l}`` for ``l < num_layers``.
        X: inputs (m, d).
        num_layers: number of weight matrices (hidden layers + 1).

    Example:
        >>> import jax.numpy as jnp
        >>> params = {"z0": jnp.ones((2, 1)), "b0": jnp.array([0.5]),
        ...           "scale0": jnp.asarray(2.0)}
        >>> value = network(params, jnp.array([[1.0, 1.0]]), 1)  # 2 * 2 / sqrt 2
        >>> round(float(value[0]), 10)
        3.3284271247
    """
    h = X
    for i in range(num_layers):
        z = params[f"z{i}"]
        weights = params[f"scale{i}"] * z / jnp.sqrt(z.shape[0])
        h = h @ weights + params[f"b{i}"]
        if i < num_layers - 1:
            h = jnp.tanh(h)
    return h[:, 0]


def _model(data: Dataset, *, hidden: tuple[int, ...]) -> None:
    sizes = (data.X.shape[1], *hidden, 1)
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        params[f"scale{i}"] = numpyro.sample(f"scale{i}", dist.HalfNormal(1.0))
        params[f"z{i}"] = numpyro.sample(
            f"z{i}", dist.Normal(0.0, 1.0).expand([fan_in, fan_out]).to_event(2)
        )
        params[f"b{i}"] = numpyro.sample(
            f"b{i}", dist.Normal(0.0, 1.0).expand([fan_out]).to_event(1)
        )
    noise = numpyro.sample("noise", dist.LogNormal(-4.0, 1.0))
    f = network(params, data.X, len(sizes) - 1)
    with numpyro.handlers.mask(mask=data.mask):
        numpyro.sample("y", dist.Normal(f, jnp.sqrt(noise)), obs=data.y)


def _predict(params, data: Dataset, X, *, num_layers: int):
    return network(params, X, num_layers), jnp.zeros(X.shape[0], X.dtype)


def _noise(params, X):
    return jnp.full(X.shape[0], params["noise"], dtype=X.dtype)


def _draw_paths(key, params, data, cache, num_paths):
    del key, data, cache  # one sample is one function
    return jax.tree.map(lambda a: jnp.broadcast_to(a, (num_paths, *a.shape)), params)


def _evaluate_paths(paths, X, *, num_layers: int):
    return jax.vmap(lambda p: network(p, X, num_layers))(paths)


def surrogate(hidden: Sequence[int] = (10,)) -> Surrogate:
    """Build the Bayesian neural network surrogate (fit it with :class:`ppbo.NUTS`).

    Args:
        hidden: widths of the tanh hidden layers; keep the net small for NUTS.

    Returns:
        A :class:`ppbo.Surrogate` with the NumPyro model, ``predict`` (one
        network per sample, zero latent variance), ``noise`` and sample paths.

    Raises:
        ValueError: for an empty ``hidden`` or non-positive widths.

    Example:
        >>> small = surrogate((4,))  # fit with ppbo.fit(small, data, ppbo.NUTS(), key)
        >>> small.name, sorted(c.value for c in small.capabilities)
        ('bnn(hidden=[4])', ['noise', 'sample_paths'])
    """
    hidden = tuple(int(h) for h in hidden)
    if not hidden or min(hidden) < 1:
        raise ValueError(f"hidden must be a non-empty tuple of widths, got {hidden}")
    num_layers = len(hidden) + 1
    return Surrogate(
        model=partial(_model, hidden=hidden),
        predict=partial(_predict, num_layers=num_layers),
        noise=_noise,
        paths=PathSampler(
            draw=_draw_paths,
            evaluate=partial(_evaluate_paths, num_layers=num_layers),
        ),
        conditioning=False,
        name=f"bnn(hidden={list(hidden)})",
    )
