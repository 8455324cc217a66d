"""Surrogates (a NumPyro model plus its predictive function) and posteriors.

A :class:`Surrogate` bundles a generative NumPyro function ``model(data, **options)``
with ``predict(params, data, X) -> (mean, var)`` for ONE hyperparameter sample. A
:class:`Posterior` holds hyperparameter samples with a leading sample axis ``s``, the
data they condition on and cached per-sample factors; the framework vmaps the
per-sample functions over ``s``. Nothing here assumes a Gaussian process.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ppbo.data import Dataset
from ppbo.linalg import cholesky

__all__ = ["Surrogate", "Posterior", "Diagnostics", "DiagnosticWarning"]

Params = Mapping[str, jax.Array]


@dataclass(frozen=True, eq=False)
class Surrogate:
    """A NumPyro model and what the framework needs to predict with it.

    Surrogates compare and hash by identity, so compiled fits and acquisitions are
    reused for as long as the same object is used (build it once per campaign).

    Args:
        model: NumPyro function ``model(data, **options)`` with ``numpyro.sample``
            sites for the hyperparameters and an observation site for ``data.y``.
            It must ignore rows where ``data.mask`` is False.
        predict: ``predict(params, data, X[, cache]) -> (mean, var)`` for one
            hyperparameter sample: latent means and variances at ``X`` (m, d), each
            of shape (m,). It receives ``cache`` only when ``prepare`` is given.
        prepare: optional ``prepare(params, data) -> cache``: per-sample factors
            (a Cholesky factor, for example) computed once per posterior.
        predict_joint: optional ``predict_joint(params, data, X[, cache]) ->
            (mean, cov)`` with ``cov`` of shape (m, m); needed by
            :meth:`Posterior.sample_f`.
        name: label used in reprs and storage.
        check_data: optional host-side ``check_data(data)`` that raises a
            ``ValueError`` for data the model cannot use (e.g. unknown task ids);
            :func:`ppbo.fit` calls it before compiling anything.
        options: keyword arguments passed to ``model`` (static values).
        extras: named per-model pieces some acquisitions need (kernel builders,
            spectral densities); documented by the model file that sets them.

    Example:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> def model(data):
        ...     c = numpyro.sample("c", dist.Normal(0.0, 1.0))
        ...     numpyro.sample("y", dist.Normal(c, 1.0).mask(data.mask), obs=data.y)
        >>> def predict(params, data, X):
        ...     return jnp.full(X.shape[0], params["c"]), jnp.zeros(X.shape[0])
        >>> surrogate = Surrogate(model=model, predict=predict, name="constant")
    """

    model: Callable[..., None]
    predict: Callable[..., tuple[jax.Array, jax.Array]]
    prepare: Callable[[Params, Dataset], Any] | None = None
    predict_joint: Callable[..., tuple[jax.Array, jax.Array]] | None = None
    name: str = "custom"
    check_data: Callable[[Dataset], None] | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    extras: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not callable(self.model):
            raise TypeError(f"Surrogate.model must be callable, got {self.model!r}")
        if not callable(self.predict):
            raise TypeError(f"Surrogate.predict must be callable, got {self.predict!r}")
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))

    def predict_one(
        self, params: Params, data: Dataset, X: jax.Array, cache: Any = None, **kw
    ) -> tuple[jax.Array, jax.Array]:
        """Per-sample prediction, passing ``cache`` when the surrogate prepares one."""
        if self.prepare is None:
            return self.predict(params, data, X, **kw)
        return self.predict(params, data, X, cache, **kw)

    def require_joint(self) -> None:
        """Raise ``TypeError`` unless the surrogate offers ``predict_joint``."""
        if self.predict_joint is None:
            raise TypeError(
                f"surrogate {self.name!r} offers no predict_joint, so joint draws "
                "are not available; build it with a predict_joint function"
            )

    def predict_joint_one(
        self, params: Params, data: Dataset, X: jax.Array, cache: Any = None, **kw
    ) -> tuple[jax.Array, jax.Array]:
        """Per-sample joint prediction (mean (m,), covariance (m, m))."""
        self.require_joint()
        if self.prepare is None:
            return self.predict_joint(params, data, X, **kw)
        return self.predict_joint(params, data, X, cache, **kw)

    def __repr__(self) -> str:
        return f"Surrogate(name={self.name!r})"


class DiagnosticWarning(UserWarning):
    """An MCMC diagnostic (R-hat, ESS, divergences, tree depth) looks poor."""


class Diagnostics(NamedTuple):
    """Convergence diagnostics of a posterior, per hyperparameter site.

    Attributes:
        rhat: site -> split R-hat (max over the site's elements), NaN if undefined.
        ess_bulk: site -> bulk effective sample size (min over elements).
        ess_tail: site -> tail effective sample size (min over elements).
        num_divergences: number of divergent transitions after warm-up.
        num_max_tree_depth: post-warm-up NUTS iterations that hit the depth limit.
        warnings: human-readable messages for everything that looks poor.
    """

    rhat: dict[str, float]
    ess_bulk: dict[str, float]
    ess_tail: dict[str, float]
    num_divergences: int
    num_max_tree_depth: int
    warnings: tuple[str, ...]


def _predict_samples(posterior: Posterior, X: jax.Array, options: tuple) -> Any:
    surrogate = posterior.surrogate
    kw = dict(options)

    def one(params, cache):
        return surrogate.predict_one(params, posterior.data, X, cache, **kw)

    return jax.vmap(one)(posterior.samples, posterior.cache)


_predict_jit = jax.jit(_predict_samples, static_argnames=("options",))


@partial(jax.jit, static_argnames=("options",))
def _marginal_jit(posterior: Posterior, X: jax.Array, options: tuple):
    mean, var = _predict_samples(posterior, X, options)
    mix_mean = jnp.mean(mean, axis=0)
    mix_var = jnp.mean(var + mean**2, axis=0) - mix_mean**2
    return mix_mean, jnp.maximum(mix_var, 0.0)


@partial(jax.jit, static_argnames=("num", "options"))
def _sample_f_jit(posterior: Posterior, key, X, num: int, options: tuple):
    surrogate = posterior.surrogate
    kw = dict(options)

    def one(key, params, cache):
        mean, cov = surrogate.predict_joint_one(params, posterior.data, X, cache, **kw)
        L = cholesky(0.5 * (cov + cov.T))
        eps = jax.random.normal(key, (num, X.shape[0]), dtype=mean.dtype)
        return mean + eps @ L.T

    keys = jax.random.split(key, posterior.num_samples)
    return jax.vmap(one)(keys, posterior.samples, posterior.cache)


def _validate_X(X: Any, dim: int) -> jax.Array:
    from ppbo.data import _as_float64, _check_finite

    X = _as_float64("X", X)
    if X.ndim == 1 and dim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[1] != dim:
        raise ValueError(f"X must have shape (m, {dim}), got shape {X.shape}")
    _check_finite("X", X)
    return jnp.asarray(X)


class Posterior:
    """Hyperparameter samples of a surrogate, conditioned on a dataset.

    A pytree: ``samples`` (site -> array with a leading sample axis s), the
    :class:`~ppbo.Dataset` it conditions on, cached per-sample factors from
    ``surrogate.prepare`` and per-draw sampler statistics. Build it with
    :func:`ppbo.fit`; nothing mutates it.

    Attributes:
        samples: site -> array of shape (s, ...), chains concatenated in order.
        data: the conditioning dataset.
        cache: per-sample factors (leading axis s) or None.
        sample_stats: statistic name -> array of shape (s,) (e.g. ``diverging``,
            ``tree_depth``, ``energy``, ``step_size``); may be empty.
        surrogate: the surrogate the samples belong to.
        num_chains: number of chains the ``s`` samples came from.
        method: name of the inference method.
        state: sampler state for warm starts (NUTS: last position, step size and
            inverse mass matrix per chain); None for other methods.

    Example:
        >>> from ppbo.models import gp  # data: a Dataset with d = 2
        >>> surrogate = gp.surrogate()
        >>> posterior = ppbo.fit(surrogate, data, ppbo.MAP(), jax.random.key(0))
        >>> X = np.array([[0.5, 0.5], [0.1, 0.9]])
        >>> [a.shape for a in posterior.predict(X)]           # per sample
        [(1, 2), (1, 2)]
        >>> [a.shape for a in posterior.predict_marginal(X)]  # mixture
        [(2,), (2,)]
    """

    __slots__ = (
        "samples",
        "data",
        "cache",
        "sample_stats",
        "state",
        "surrogate",
        "num_chains",
        "method",
    )

    def __init__(
        self,
        surrogate: Surrogate,
        samples: Mapping[str, jax.Array],
        data: Dataset,
        *,
        cache: Any = None,
        sample_stats: Mapping[str, jax.Array] | None = None,
        state: Any = None,
        num_chains: int = 1,
        method: str = "unknown",
    ) -> None:
        self.surrogate = surrogate
        self.samples = dict(samples)
        self.data = data
        self.cache = cache
        self.sample_stats = dict(sample_stats or {})
        self.state = state
        self.num_chains = int(num_chains)
        self.method = str(method)

    # -- pytree -------------------------------------------------------------------
    def tree_flatten(self):
        children = (self.samples, self.data, self.cache, self.sample_stats, self.state)
        aux = (self.surrogate, self.num_chains, self.method)
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.samples, obj.data, obj.cache, obj.sample_stats, obj.state = children
        obj.surrogate, obj.num_chains, obj.method = aux
        return obj

    # -- basic views --------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Number of hyperparameter samples s."""
        leaves = jax.tree.leaves(self.samples)
        return int(leaves[0].shape[0]) if leaves else 0

    def __repr__(self) -> str:
        return (
            f"Posterior(surrogate={self.surrogate.name!r}, method={self.method!r}, "
            f"num_samples={self.num_samples}, num_chains={self.num_chains}, "
            f"data={self.data!r})"
        )

    def sample(self, index: int) -> Posterior:
        """Return the posterior restricted to the single sample ``index``.

        Example:
            >>> posterior.sample(0).num_samples
            1
        """
        s = self.num_samples
        if not -s <= int(index) < s:
            raise IndexError(f"index must be in [-{s}, {s}), got index={index}")
        take = partial(lambda a, i: a[i : i + 1] if i >= 0 else a[i:][:1], i=index)
        return Posterior(
            self.surrogate,
            jax.tree.map(take, self.samples),
            self.data,
            cache=jax.tree.map(take, self.cache),
            sample_stats={},
            state=None,
            num_chains=1,
            method=self.method,
        )

    def thin(self, num: int) -> Posterior:
        """Return ``num`` evenly spaced samples; with ``num > s`` they repeat.

        For acquisitions whose per-sample preparation is expensive (PES, ES),
        which the campaign layer averages over a fixed number of samples, as the
        PES authors' code averages over 10 MCMC samples. Repetition matters for
        PES, which draws one maximiser x* per sample: a one-sample (MAP, fixed
        or PES-NB) posterior repeated 16 times gives 16 draws of x*.

        Example:
            >>> posterior.thin(4).num_samples  # 1 sample, repeated
            4
        """
        if isinstance(num, bool) or int(num) != num or num < 1:
            raise ValueError(f"num must be a positive integer, got {num!r}")
        s = self.num_samples
        if num == s:
            return self
        index = (jnp.arange(int(num)) * s) // int(num)
        take = partial(lambda a, i: a[i], i=index)
        return Posterior(
            self.surrogate,
            jax.tree.map(take, self.samples),
            self.data,
            cache=jax.tree.map(take, self.cache),
            sample_stats=jax.tree.map(take, self.sample_stats),
            state=None,
            num_chains=1,
            method=self.method,
        )

    # -- prediction ---------------------------------------------------------------
    def predict(self, X: Any, **options: Any) -> tuple[jax.Array, jax.Array]:
        """Per-sample latent predictive means and variances.

        Args:
            X: candidate points in the unit cube, shape (m, d), float64.
            **options: passed to the surrogate's ``predict`` (e.g. ``task=1``);
                must be hashable.

        Returns:
            ``(mean, var)``, each of shape (s, m).

        Example:
            >>> mean, var = posterior.predict(np.array([[0.5, 0.5]]))
            >>> mean.shape == (posterior.num_samples, 1)
            True
        """
        X = _validate_X(X, self.data.dim)
        return _predict_jit(self, X, tuple(sorted(options.items())))

    def predict_marginal(self, X: Any, **options: Any) -> tuple[jax.Array, jax.Array]:
        """Mean and variance of the predictive mixture over hyperparameter samples.

        .. math:: \\mu = \\frac1s\\sum_i \\mu_i, \\quad
            \\sigma^2 = \\frac1s\\sum_i (\\sigma_i^2 + \\mu_i^2) - \\mu^2

        Returns:
            ``(mean, var)``, each of shape (m,).

        Example:
            >>> mean, var = posterior.predict_marginal(np.array([[0.5, 0.5]]))
            >>> mean.shape, bool(var[0] >= 0)
            ((1,), True)
        """
        X = _validate_X(X, self.data.dim)
        return _marginal_jit(self, X, tuple(sorted(options.items())))

    def sample_f(self, key: jax.Array, X: Any, num: int, **options: Any) -> jax.Array:
        """Joint draws of the latent function at ``X`` for every hyperparameter sample.

        Args:
            key: JAX PRNG key.
            X: points, shape (m, d).
            num: draws per hyperparameter sample.

        Returns:
            Array of shape (s, num, m); ``reshape(-1, m)`` gives draws from the
            marginal (mixture) posterior.

        Raises:
            TypeError: if the surrogate has no ``predict_joint``.

        Example:
            >>> X = np.array([[0.5, 0.5]])
            >>> f = posterior.sample_f(jax.random.key(1), X, num=16)
            >>> f.shape == (posterior.num_samples, 16, 1)
            True
        """
        X = _validate_X(X, self.data.dim)
        self.surrogate.require_joint()
        num = int(num)
        if num < 1:
            raise ValueError(f"num must be >= 1, got num={num}")
        return _sample_f_jit(self, key, X, num, tuple(sorted(options.items())))

    # -- inspection ---------------------------------------------------------------
    def to_arviz(self):
        """Convert to ArviZ (``InferenceData`` on ArviZ 0.x, ``DataTree`` on 1.x).

        Groups: ``posterior`` (chain, draw, ...), ``sample_stats`` (diverging,
        tree_depth, n_steps, energy, step_size, acceptance_rate, lp where the sampler
        records them) and ``observed_data`` (the unpadded y and X).

        Example:
            >>> idata = posterior.to_arviz()  # az.summary(idata) for sampled posteriors
        """
        from ppbo.inference.diagnostics import to_arviz

        return to_arviz(self)

    def diagnostics(self, *, warn: bool = True) -> Diagnostics:
        """R-hat, bulk and tail ESS, divergences and tree-depth hits.

        Poor values are reported as :class:`DiagnosticWarning` (when ``warn``) and in
        ``Diagnostics.warnings``; this never raises on degenerate samples.

        Example:
            >>> report = posterior.diagnostics()
            >>> report.num_divergences
            0
        """
        from ppbo.inference.diagnostics import diagnose

        report = diagnose(self)
        if warn:
            for message in report.warnings:
                warnings.warn(message, DiagnosticWarning, stacklevel=2)
        return report


jax.tree_util.register_pytree_node(
    Posterior, Posterior.tree_flatten, Posterior.tree_unflatten
)
