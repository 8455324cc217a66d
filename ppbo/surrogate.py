"""Surrogates (a NumPyro model plus its predictive function) and posteriors.

A :class:`Surrogate` bundles a generative NumPyro function ``model(data, **options)``
with ``predict(params, data, X) -> (mean, var)`` for ONE hyperparameter sample, and
declares what else it offers as typed :class:`Capability` values: joint
covariances, a per-point observation noise, the parts of a stationary Gaussian
process (:class:`GPParts`) that random-feature paths and Predictive Entropy Search
need, and conditioning on fantasised data. Acquisitions ask for capabilities with
:meth:`Surrogate.require` and never read a model's sites by name.

A :class:`Posterior` holds hyperparameter samples with a leading sample axis ``s``,
the data they condition on and cached per-sample factors; the framework vmaps the
per-sample functions over ``s``. It is immutable: conditioning on more data
(:meth:`Posterior.condition`, :meth:`Posterior.condition_on_pending`) returns a new
posterior. Nothing here assumes a Gaussian process.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.data import Dataset
from ppbo.linalg import cholesky

if TYPE_CHECKING:
    from ppbo.inference.diagnostics import Diagnostics

__all__ = [
    "Surrogate",
    "Posterior",
    "Capability",
    "MissingCapabilityError",
    "StationaryKernel",
    "GPParts",
    "GPSample",
    "PathSampler",
]

Params = Mapping[str, jax.Array]


class Capability(enum.Enum):
    """What a surrogate may offer beyond the per-sample mean and variance.

    Members:
        PREDICT_JOINT: ``predict_joint``, the joint covariance of latent values
            (joint draws, knowledge gradient, entropy search).
        NOISE: ``noise(params, X)``, the observation-noise variance at each point
            for one sample (noisy incumbents, KG, ES, MES, PES; heteroscedastic
            models return a different value per point).
        GP: :class:`GPParts`, per sample a Gaussian process with a stationary
            kernel of known smoothness (hence spectral density), prior mean,
            lengthscales and signal variance (random-Fourier-feature paths:
            Thompson sampling, MES and ES with ``method="paths"``, PES).
        GP_DERIVATIVES: a GP whose sample paths are twice mean-square
            differentiable (Matérn smoothness above 2), so that the gradient and
            Hessian at a maximiser can be conditioned on (PES).
        SAMPLE_PATHS: :class:`PathSampler`, exact or approximate posterior sample
            paths of the latent function for one sample (Thompson sampling on
            surrogates that are not GPs; GPs get random-feature paths from
            :attr:`GP`).
        CONDITIONING: predictions are a function of the data, so that appending
            (fantasised) observations conditions them: greedy batches (q > 1) and
            pending points.

    Example:
        >>> Capability.NOISE.value
        'noise'
    """

    PREDICT_JOINT = "predict_joint"
    NOISE = "noise"
    GP = "gp"
    GP_DERIVATIVES = "gp_derivatives"
    SAMPLE_PATHS = "sample_paths"
    CONDITIONING = "conditioning"


class MissingCapabilityError(TypeError, ValueError):
    """A surrogate lacks a capability that an acquisition or operation needs.

    A ``TypeError`` (the surrogate is the wrong kind of object for the call) and,
    for callers written against earlier versions, a ``ValueError``.
    """


class StationaryKernel(Protocol):
    """A unit-variance stationary kernel known by its Matérn smoothness.

    ``k(x, x') = profile(|(x - x') / lengthscale|^2)``. The smoothness ``nu``
    (``inf`` for the squared-exponential) fixes the spectral density: Gaussian for
    ``nu = inf``, multivariate Student-t with ``2 nu`` degrees of freedom for
    Matérn-nu (Rasmussen and Williams 2006, eq. (4.15)). The kernel classes of
    ``ppbo.models.kernels`` satisfy this protocol.

    Attributes:
        smoothness: Matérn ``nu``, ``math.inf`` for the squared-exponential.
    """

    smoothness: float

    def profile(self, t: jax.Array) -> jax.Array:
        """Covariance at scaled squared distance ``t``; for ``smoothness > 2``
        differentiable four times at ``t = 0``."""


@dataclass(frozen=True, eq=False)
class GPParts:
    """The parts of a stationary GP surrogate, as functions of one sample.

    Per hyperparameter sample ``params`` the latent function is
    ``f ~ GP(mean(params, .), outputscale(params) * k((x - x') / lengthscale))``
    with ``k`` the :class:`StationaryKernel`; the observation noise is the
    surrogate's ``noise``. A model file declares this once (see
    ``ppbo.models.gp``); acquisitions read it through :meth:`Sample.gp`.

    Args:
        kernel: the unit-variance kernel (e.g. ``ppbo.models.kernels.Matern52``).
        mean: ``mean(params, X) -> (m,)``, the prior mean.
        lengthscale: ``lengthscale(params) -> (d,)``, ARD lengthscales.
        outputscale: ``outputscale(params) -> ()``, the signal variance.

    Example:
        >>> import jax.numpy as jnp
        >>> class Exponential:
        ...     smoothness = 0.5
        ...     profile = staticmethod(lambda t: jnp.exp(-jnp.sqrt(t)))
        >>> parts = GPParts(
        ...     kernel=Exponential,
        ...     mean=lambda params, X: jnp.zeros(X.shape[0]),
        ...     lengthscale=lambda params: params["ell"],
        ...     outputscale=lambda params: 1.0,
        ... )
        >>> parts.differentiable
        False
    """

    kernel: StationaryKernel
    mean: Callable[[Params, jax.Array], jax.Array]
    lengthscale: Callable[[Params], jax.Array]
    outputscale: Callable[[Params], jax.Array]

    @property
    def smoothness(self) -> float:
        """Matérn smoothness ``nu`` of the kernel (``inf``: squared-exponential)."""
        return float(self.kernel.smoothness)

    @property
    def differentiable(self) -> bool:
        """Whether sample paths are twice mean-square differentiable (``nu > 2``)."""
        return self.smoothness > 2.0

    def evaluate(self, params: Params) -> GPSample:
        """The parts of one hyperparameter sample.

        Example:
            >>> from ppbo.models import gp
            >>> parts = gp.surrogate(kernel="rbf").gp
            >>> one = parts.evaluate({"lengthscale": jnp.ones(2), "outputscale": 2.0,
            ...                       "noise": 0.1, "mean": 0.5})
            >>> float(one.outputscale), one.mean(jnp.zeros((3, 2))).shape
            (2.0, (3,))
        """
        return GPSample(
            kernel=self.kernel,
            lengthscale=jnp.asarray(self.lengthscale(params)),
            outputscale=jnp.asarray(self.outputscale(params)),
            mean=partial(self.mean, params),
        )


@dataclass(frozen=True, eq=False)
class PathSampler:
    """Posterior sample paths of a surrogate's latent function, per sample.

    Args:
        draw: ``draw(key, params, data, cache, num_paths) -> paths``: a pytree
            holding ``num_paths`` functions drawn from ``p(f | data, params)``
            (``cache`` is the surrogate's ``prepare`` output or None). Must work
            inside ``jit`` and ``vmap`` (``num_paths`` is static).
        evaluate: ``evaluate(paths, X) -> (num_paths, m)``, the paths' values at
            ``X`` (m, d); differentiable in ``X``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> def draw(key, params, data, cache, num_paths):  # f(x) = c, c ~ N(0, 1)
        ...     return jax.random.normal(key, (num_paths,))
        >>> sampler = PathSampler(
        ...     draw=draw, evaluate=lambda c, X: c[:, None] + 0.0 * X[:, 0])
        >>> paths = sampler.draw(jax.random.key(0), {}, None, None, 3)
        >>> sampler.evaluate(paths, jnp.zeros((2, 1))).shape
        (3, 2)
    """

    draw: Callable[..., Any]
    evaluate: Callable[[Any, jax.Array], jax.Array]


class GPSample(NamedTuple):
    """One sample's Gaussian process (see :class:`GPParts`).

    Attributes:
        kernel: the unit-variance :class:`StationaryKernel`.
        lengthscale: ARD lengthscales, shape (d,).
        outputscale: signal variance, shape ().
        mean: the prior mean as a function of points (m, d) -> (m,).
    """

    kernel: StationaryKernel
    lengthscale: jax.Array
    outputscale: jax.Array
    mean: Callable[[jax.Array], jax.Array]


@dataclass(frozen=True, eq=False)
class Surrogate:
    """A NumPyro model and what the framework needs to predict with it.

    Surrogates compare and hash by identity, so compiled fits and acquisitions are
    reused for as long as the same object is used (build it once per campaign).

    A surrogate is fitted either from a NumPyro program (``model``, by NUTS, the
    slice sampler, MAP or fixed values) or by its own ``trainer`` (random
    forests, bootstrap ensembles), with :class:`ppbo.Train`. Either way its
    samples are arrays with a leading sample axis ``s`` (hyperparameter samples
    or ensemble members), so posteriors predict, store and resume alike.

    Args:
        model: NumPyro function ``model(data, **options)`` with ``numpyro.sample``
            sites for the hyperparameters and an observation site for ``data.y``.
            It must ignore rows where ``data.mask`` is False. None when
            ``trainer`` is given.
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
        extras: named per-model pieces for users and notebooks (kernel builders,
            task correlations); documented by the model file that sets them.
            Acquisitions never read them: they use the capabilities below.
        noise: optional ``noise(params, X, **options) -> (m,)``: the variance of
            the observation noise ``y - f`` at each point of ``X`` for one sample,
            as the likelihood uses it (:attr:`Capability.NOISE`). A constant may
            be returned as a scalar; it is broadcast.
        gp: optional :class:`GPParts` (:attr:`Capability.GP`, and
            :attr:`Capability.GP_DERIVATIVES` for kernels with smoothness > 2).
        paths: optional :class:`PathSampler` (:attr:`Capability.SAMPLE_PATHS`).
        conditioning: whether predictions are a function of ``data`` so that
            appending fantasised observations conditions them
            (:attr:`Capability.CONDITIONING`); False for surrogates with their own
            trainer, whose batches must be asked one point at a time.
        trainer: optional ``trainer(key, data) -> samples``, used instead of a
            NumPyro program: a pure, jit-compatible function of a PRNG key and the
            padded :class:`~ppbo.Dataset` (it must ignore rows where ``data.mask``
            is False) returning a dict of float64 arrays with a common leading
            axis ``s`` (e.g. ensemble members). Fitted by :class:`ppbo.Train`;
            ``model`` must then be None.

    Example:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> def model(data):
        ...     c = numpyro.sample("c", dist.Normal(0.0, 1.0))
        ...     numpyro.sample("y", dist.Normal(c, 1.0).mask(data.mask), obs=data.y)
        >>> def predict(params, data, X):
        ...     return jnp.full(X.shape[0], params["c"]), jnp.zeros(X.shape[0])
        >>> surrogate = Surrogate(model=model, predict=predict, name="constant")
        >>> sorted(c.value for c in surrogate.capabilities)
        ['conditioning']

        A surrogate with its own trainer: an ensemble of ``s = 4`` constants, each
        the mean of a bootstrap resample of the observed rows.

        >>> import jax
        >>> def trainer(key, data):
        ...     def member(key):
        ...         rows = jax.random.choice(key, data.capacity, (data.capacity,),
        ...                                  p=data.mask / data.mask.sum())
        ...         return {"c": jnp.mean(data.y[rows])}
        ...     return jax.vmap(member)(jax.random.split(key, 4))
        >>> ensemble = Surrogate(trainer=trainer, predict=predict,
        ...                      conditioning=False, name="bootstrap_constant")
        >>> sorted(c.value for c in ensemble.capabilities)
        []
    """

    model: Callable[..., None] | None = None
    predict: Callable[..., tuple[jax.Array, jax.Array]] | None = None
    prepare: Callable[[Params, Dataset], Any] | None = None
    predict_joint: Callable[..., tuple[jax.Array, jax.Array]] | None = None
    name: str = "custom"
    check_data: Callable[[Dataset], None] | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    extras: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    noise: Callable[..., jax.Array] | None = None
    gp: GPParts | None = None
    paths: PathSampler | None = None
    conditioning: bool = True
    trainer: Callable[[jax.Array, Dataset], Mapping[str, jax.Array]] | None = None

    def __post_init__(self) -> None:
        if self.trainer is not None:
            if not callable(self.trainer):
                raise TypeError(
                    f"Surrogate.trainer must be callable, got {self.trainer!r}"
                )
            if self.model is not None:
                raise TypeError(
                    "a Surrogate has either a NumPyro model or its own trainer, "
                    f"not both: got model={self.model!r} and trainer={self.trainer!r}"
                )
        elif not callable(self.model):
            raise TypeError(
                "Surrogate.model must be callable (or give a trainer), got "
                f"{self.model!r}"
            )
        if not callable(self.predict):
            raise TypeError(f"Surrogate.predict must be callable, got {self.predict!r}")
        if self.noise is not None and not callable(self.noise):
            raise TypeError(f"Surrogate.noise must be callable, got {self.noise!r}")
        if self.gp is not None and not isinstance(self.gp, GPParts):
            raise TypeError(f"Surrogate.gp must be a GPParts, got {self.gp!r}")
        if self.paths is not None and not isinstance(self.paths, PathSampler):
            raise TypeError(
                f"Surrogate.paths must be a PathSampler, got {self.paths!r}"
            )
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The :class:`Capability` values this surrogate declares.

        Example:
            >>> from ppbo.models import gp
            >>> rough = gp.surrogate(kernel="matern32")
            >>> Capability.GP in rough.capabilities
            True
            >>> Capability.GP_DERIVATIVES in rough.capabilities
            False
        """
        declared = {
            Capability.PREDICT_JOINT: self.predict_joint is not None,
            Capability.NOISE: self.noise is not None,
            Capability.GP: self.gp is not None,
            Capability.GP_DERIVATIVES: self.gp is not None and self.gp.differentiable,
            Capability.SAMPLE_PATHS: self.paths is not None,
            Capability.CONDITIONING: bool(self.conditioning),
        }
        return frozenset(c for c, present in declared.items() if present)

    def require(self, *capabilities: Capability, by: str = "this operation") -> None:
        """Raise :class:`MissingCapabilityError` unless ``capabilities`` are declared.

        Args:
            *capabilities: the :class:`Capability` values needed.
            by: who needs them, for the message (e.g. ``"acquisition 'pes'"``).

        Raises:
            MissingCapabilityError: naming the first missing capability.

        Example:
            >>> from ppbo.models import gp
            >>> gp.surrogate().require(Capability.GP, by="acquisition 'thompson'")
        """
        have = self.capabilities
        for capability in capabilities:
            if capability not in have:
                raise MissingCapabilityError(
                    f"{by} needs the surrogate capability {capability.value!r} "
                    f"({_DESCRIPTIONS[capability]}), which surrogate {self.name!r} "
                    "does not declare"
                )

    def predict_one(
        self, params: Params, data: Dataset, X: jax.Array, cache: Any = None, **kw
    ) -> tuple[jax.Array, jax.Array]:
        """Per-sample prediction, passing ``cache`` when the surrogate prepares one."""
        if self.prepare is None:
            return self.predict(params, data, X, **kw)
        return self.predict(params, data, X, cache, **kw)

    def require_joint(self) -> None:
        """Raise :class:`MissingCapabilityError` unless it offers ``predict_joint``.

        Example:
            >>> from ppbo.models import gp
            >>> gp.surrogate().require_joint()
        """
        self.require(Capability.PREDICT_JOINT, by="joint draws")

    def noise_one(self, params: Params, X: jax.Array, **kw: Any) -> jax.Array:
        """Per-sample observation-noise variance at ``X`` (m, d), shape (m,).

        Raises:
            MissingCapabilityError: if the surrogate declares no ``noise``.

        Example:
            >>> from ppbo.models import gp
            >>> params = {"noise": jnp.asarray(0.1)}
            >>> gp.surrogate().noise_one(params, jnp.zeros((2, 1))).shape
            (2,)
        """
        self.require(Capability.NOISE, by="the observation noise")
        value = jnp.asarray(self.noise(params, X, **kw), dtype=X.dtype)
        return jnp.broadcast_to(value, X.shape[:1])

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


_DESCRIPTIONS = {
    Capability.PREDICT_JOINT: "a predict_joint function giving joint covariances",
    Capability.NOISE: "a per-point observation noise function noise(params, X)",
    Capability.GP: "GPParts: a stationary GP kernel with its smoothness and "
    "spectral density, prior mean, lengthscales and signal variance",
    Capability.GP_DERIVATIVES: "a GP with twice mean-square differentiable sample "
    "paths (kernel smoothness above 2: Matérn-5/2 or squared-exponential)",
    Capability.SAMPLE_PATHS: "a PathSampler drawing posterior sample paths",
    Capability.CONDITIONING: "predictions that condition on appended (fantasised) "
    "data, needed for batches q > 1 and pending points",
}


def __getattr__(name: str) -> Any:
    # Diagnostics live in ppbo.inference.diagnostics; the old import path stays
    # valid without importing the inference package when this module loads.
    if name in ("Diagnostics", "DiagnosticWarning"):
        from ppbo.inference import diagnostics

        return getattr(diagnostics, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _predict_samples(posterior: Posterior, X: jax.Array, options: tuple) -> Any:
    surrogate = posterior.surrogate
    kw = dict(options)

    def one(params, cache):
        return surrogate.predict_one(params, posterior.data, X, cache, **kw)

    return jax.vmap(one)(posterior.samples, posterior.cache)


_predict_jit = jax.jit(_predict_samples, static_argnames=("options",))


@partial(jax.jit, static_argnames=("options",))
def _noise_jit(posterior: Posterior, X: jax.Array, options: tuple):
    surrogate = posterior.surrogate
    kw = dict(options)
    return jax.vmap(lambda params: surrogate.noise_one(params, X, **kw))(
        posterior.samples
    )


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
    :func:`ppbo.fit`. It is immutable (setting an attribute raises
    ``AttributeError``); every derived posterior (:meth:`sample`, :meth:`thin`,
    :meth:`condition`, :meth:`condition_on_pending`, pytree unflattening) is built
    by the one constructor.

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
        init = partial(object.__setattr__, self)
        init("surrogate", surrogate)
        init("samples", dict(samples))
        init("data", data)
        init("cache", cache)
        init("sample_stats", dict(sample_stats or {}))
        init("state", state)
        init("num_chains", int(num_chains))
        init("method", str(method))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"Posterior is immutable: cannot set {name!r}; derive a new posterior "
            "(condition, sample, thin) instead"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Posterior is immutable: cannot delete {name!r}")

    def _replace(self, **changes: Any) -> Posterior:
        fields = {
            "surrogate": self.surrogate,
            "samples": self.samples,
            "data": self.data,
            "cache": self.cache,
            "sample_stats": self.sample_stats,
            "state": self.state,
            "num_chains": self.num_chains,
            "method": self.method,
        }
        fields.update(changes)
        surrogate, samples, data = (
            fields.pop(k) for k in ("surrogate", "samples", "data")
        )
        return Posterior(surrogate, samples, data, **fields)

    # -- pytree -------------------------------------------------------------------
    def tree_flatten(self):
        children = (self.samples, self.data, self.cache, self.sample_stats, self.state)
        aux = (self.surrogate, self.num_chains, self.method)
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        samples, data, cache, sample_stats, state = children
        surrogate, num_chains, method = aux
        return cls(
            surrogate,
            samples,
            data,
            cache=cache,
            sample_stats=sample_stats,
            state=state,
            num_chains=num_chains,
            method=method,
        )

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
        return self._replace(
            samples=jax.tree.map(take, self.samples),
            cache=jax.tree.map(take, self.cache),
            sample_stats={},
            state=None,
            num_chains=1,
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
        return self._replace(
            samples=jax.tree.map(take, self.samples),
            cache=jax.tree.map(take, self.cache),
            sample_stats=jax.tree.map(take, self.sample_stats),
            state=None,
            num_chains=1,
        )

    # -- conditioning ---------------------------------------------------------------
    def condition(self, X: Any, y: Any, task: Any = None) -> Posterior:
        """The same hyperparameter samples conditioned on extra observations.

        Appends ``(X, y)`` to the data (in the same capacity bucket when they fit)
        and recomputes the per-sample factors; the samples are not refitted (use
        :func:`ppbo.fit` for that).

        Args:
            X: points in the unit cube, shape (k, d).
            y: their (standardised) values, shape (k,).
            task: their task ids (k,) for multi-task surrogates (None: task 0).

        Returns:
            A new posterior; this one is unchanged.

        Raises:
            MissingCapabilityError: if the surrogate does not declare
                :attr:`Capability.CONDITIONING`.

        Example:
            >>> more = posterior.condition(np.array([[0.2, 0.3]]), np.array([0.1]))
            >>> more.data.n == posterior.data.n + 1
            True
        """
        from ppbo.inference._mcmc import prepare_cache

        self.surrogate.require(Capability.CONDITIONING, by="conditioning on new data")
        X = _validate_X(X, self.data.dim)
        y = np.asarray(y, dtype=np.float64)
        data = self.data.append(np.asarray(X), y, task)
        cache = prepare_cache(self.surrogate, self.samples, data)
        return self._replace(data=data, cache=cache)

    def condition_on_pending(self, pending: Any) -> Posterior:
        """Condition on points being evaluated, at their posterior-mixture means.

        The Kriging believer of Ginsbourger, Le Riche and Carraro (2010, "Kriging
        is well-suited to parallelize optimization"): each pending point is
        observed at the posterior-mixture mean, so that every sample's variance
        at (and near) pending points collapses while its mean there moves only
        towards the mixture mean (a one-sample posterior's mean is unchanged);
        greedy batches (q > 1) condition on their earlier points this way.

        Args:
            pending: points in the unit cube, shape (k, d); may be empty.

        Returns:
            A new posterior with the same samples (``self`` when ``k = 0``).

        Raises:
            MissingCapabilityError: if the surrogate does not declare
                :attr:`Capability.CONDITIONING` (ask one point at a time).

        Example:
            >>> busy = posterior.condition_on_pending(np.array([[0.2, 0.3]]))
            >>> busy.data.n == posterior.data.n + 1
            True
        """
        pending = np.asarray(pending, dtype=np.float64).reshape(-1, self.data.dim)
        if len(pending) == 0:
            return self
        self.surrogate.require(
            Capability.CONDITIONING, by="a batch of q > 1 or pending points"
        )
        mean, _ = self.predict_marginal(pending)
        return self.condition(pending, np.asarray(mean))

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

    def noise_var(self, X: Any, **options: Any) -> jax.Array:
        """Per-sample observation-noise variance at each point, shape (s, m).

        The variance of ``y - f`` that the surrogate's likelihood uses
        (:attr:`Capability.NOISE`); a heteroscedastic model gives a different
        value per point.

        Raises:
            MissingCapabilityError: if the surrogate declares no ``noise``.

        Example:
            >>> posterior.noise_var(np.array([[0.5, 0.5]])).shape
            (1, 1)
        """
        X = _validate_X(X, self.data.dim)
        self.surrogate.require(Capability.NOISE, by="noise_var")
        return _noise_jit(self, X, tuple(sorted(options.items())))

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
            MissingCapabilityError: if the surrogate has no ``predict_joint``
                (a ``TypeError``).

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
        from ppbo.inference.diagnostics import DiagnosticWarning, diagnose

        report = diagnose(self)
        if warn:
            for message in report.warnings:
                warnings.warn(message, DiagnosticWarning, stacklevel=2)
        return report


jax.tree_util.register_pytree_node(
    Posterior, Posterior.tree_flatten, Posterior.tree_unflatten
)
