"""The acquisition contract and the Monte Carlo marginalisation over samples.

An acquisition is a pure function of ONE posterior sample and candidate points,
``fn(sample, X, **options) -> (m,)``; :func:`evaluate` vmaps it over the posterior's
hyperparameter samples and averages, so that every acquisition is marginalised over
the hyperparameter posterior,

.. math:: \\alpha(x) = \\frac1s \\sum_{i=1}^s \\alpha(x \\mid \\theta_i),

as Snoek, Larochelle and Adams (2012, eq. (6), "Practical Bayesian optimization of
machine learning algorithms") and Hernández-Lobato, Hoffman and Ghahramani (2014,
§2.1, "Predictive entropy search") prescribe. Log-space acquisitions (log-EI) are
reduced with log-mean-exp, which is the log of the same average. Acquisitions are
maximised; models see maximisation problems (the campaign layer flips signs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from ppbo.data import Dataset
from ppbo.surrogate import (
    Capability,
    GPSample,
    MissingCapabilityError,
    Posterior,
    Surrogate,
    _validate_X,
)

__all__ = [
    "bind",
    "Bound",
    "Acquisition",
    "Sample",
    "evaluate",
    "per_sample",
    "reduce_samples",
    "best_observed_mean",
    "effective_best_mean",
    "prepare_incumbents",
    "best_observed_input",
    "prepare_incumbent_inputs",
    "default_acquisition",
    "DEFAULT_ACQUISITIONS",
    "observation_noise",
]


class Sample:
    """One hyperparameter sample of a posterior, as an acquisition sees it.

    Built inside ``vmap`` by :func:`evaluate`; not a pytree and not stored.

    Attributes:
        params: site -> value for this sample.
        cache: this sample's factors from ``surrogate.prepare`` (or None).
        data: the conditioning dataset (padded; use ``data.mask``).
        surrogate: the surrogate (its declared capabilities, through the methods
            below; acquisitions never read ``params`` by site name).
        aux: this sample's slice of ``Acquisition.prepare``'s output (or None).
    """

    __slots__ = ("params", "cache", "data", "surrogate", "aux")

    def __init__(self, params, cache, data: Dataset, surrogate: Surrogate, aux=None):
        self.params = params
        self.cache = cache
        self.data = data
        self.surrogate = surrogate
        self.aux = aux

    def predict(self, X: jax.Array, **kw: Any) -> tuple[jax.Array, jax.Array]:
        """Latent mean and variance at ``X`` (m, d), each (m,)."""
        return self.surrogate.predict_one(self.params, self.data, X, self.cache, **kw)

    def predict_joint(self, X: jax.Array, **kw: Any) -> tuple[jax.Array, jax.Array]:
        """Latent mean (m,) and covariance (m, m) at ``X``."""
        return self.surrogate.predict_joint_one(
            self.params, self.data, X, self.cache, **kw
        )

    def noise(self, X: jax.Array, **kw: Any) -> jax.Array:
        """Observation-noise variance at each point of ``X`` (m, d), shape (m,).

        Raises:
            MissingCapabilityError: if the surrogate declares no ``noise``.
        """
        return self.surrogate.noise_one(self.params, X, **kw)

    def gp(self) -> GPSample:
        """This sample's Gaussian process (kernel, lengthscales, signal variance,
        prior mean), from the surrogate's :class:`~ppbo.GPParts`.

        Raises:
            MissingCapabilityError: if the surrogate declares no ``gp``.
        """
        self.surrogate.require(Capability.GP, by="a GP sample path")
        return self.surrogate.gp.evaluate(self.params)


def observation_noise(sample: Sample, X: jax.Array, noise: Any = None) -> jax.Array:
    """Observation-noise variance at each point of ``X`` (m, d), shape (m,).

    ``noise`` (a scalar or (m,) option of KG and ES) overrides the surrogate's
    declared per-point ``noise``.

    Raises:
        MissingCapabilityError: without ``noise`` when the surrogate declares none.

    Example:
        >>> # inside an acquisition fn(sample, X, noise=None):
        >>> #     var_y = var + observation_noise(sample, X, noise)
    """
    if noise is not None:
        return jnp.broadcast_to(jnp.asarray(noise, dtype=X.dtype), X.shape[:1])
    if Capability.NOISE not in sample.surrogate.capabilities:
        raise MissingCapabilityError(
            f"surrogate {sample.surrogate.name!r} declares no capability 'noise' "
            "(a per-point observation noise function noise(params, X)); declare "
            "one or pass noise=... (the noise variance)"
        )
    return sample.noise(X)


def best_observed_mean(sample: Sample) -> jax.Array:
    """Largest posterior mean over the observed target inputs.

    The default incumbent ``best_f`` of EI and PI for noisy observations. Padding
    and the rows of source tasks (:attr:`ppbo.Dataset.target_mask`) are excluded:
    a source's optimum is no improvement on the target.

    Example:
        >>> # inside an acquisition fn(sample, X): best_f = best_observed_mean(sample)
    """
    mean, _ = sample.predict(sample.data.X)
    return jnp.max(jnp.where(sample.data.target_mask, mean, -jnp.inf))


def effective_best_mean(sample: Sample) -> jax.Array:
    """Posterior mean at Huang et al.'s "effective best" observed target input.

    The observed input that maximises the lower bound ``mu(x) - s(x)`` (latent
    mean minus one latent standard deviation), and the mean there: the incumbent
    of augmented expected improvement (Huang, Allen, Notz and Zeng 2006, "Global
    optimization of stochastic black-box systems via sequential kriging
    meta-models", J. Global Optim. 34(3), with their ``c = 1``, written for
    maximisation). A noisy point that looks best only because its mean is
    uncertain does not become the incumbent.

    Example:
        >>> # inside an acquisition fn(sample, X): best_f = effective_best_mean(sample)
    """
    mean, var = sample.predict(sample.data.X)
    lower = mean - jnp.sqrt(jnp.maximum(var, 0.0))
    best = jnp.argmax(jnp.where(sample.data.target_mask, lower, -jnp.inf))
    return mean[best]


def best_observed_input(sample: Sample) -> jax.Array:
    """The observed target input with the largest posterior mean, shape (d,).

    The input of :func:`best_observed_mean` (the incumbent ``x+``).

    Example:
        >>> # inside an acquisition fn(sample, X): x_best = best_observed_input(sample)
    """
    mean, _ = sample.predict(sample.data.X)
    best = jnp.argmax(jnp.where(sample.data.target_mask, mean, -jnp.inf))
    return sample.data.X[best]


@partial(jax.jit, static_argnums=1)
def _per_sample_incumbent(posterior: Posterior, incumbent: Callable) -> jax.Array:
    def one(params, cache):
        return incumbent(Sample(params, cache, posterior.data, posterior.surrogate))

    return jax.vmap(one)(posterior.samples, posterior.cache)


#: Incumbents of the improvement-based acquisitions (option ``incumbent``).
INCUMBENTS = ("sample", "marginal", "observed", "effective")


@jax.jit
def _marginal_incumbent(posterior: Posterior) -> jax.Array:
    data = posterior.data

    def one(params, cache):
        return Sample(params, cache, data, posterior.surrogate).predict(data.X)[0]

    mean = jnp.mean(jax.vmap(one)(posterior.samples, posterior.cache), axis=0)
    best = jnp.max(jnp.where(data.target_mask, mean, -jnp.inf))
    return jnp.full(posterior.num_samples, best)


@jax.jit
def _observed_incumbent(posterior: Posterior) -> jax.Array:
    data = posterior.data
    best = jnp.max(jnp.where(data.target_mask, data.y, -jnp.inf))
    return jnp.full(posterior.num_samples, best)


def prepare_incumbents(key: Any, posterior: Posterior, **options: Any) -> Any:
    """``prepare`` for improvement-based acquisitions: the incumbents, shape (s,).

    ``incumbent="sample"`` (the default) gives each sample its own
    :func:`best_observed_mean`. The other two give every sample the same value, so
    that the average over samples is the integrated acquisition of Snoek,
    Larochelle and Adams (2012, "Practical Bayesian optimization of machine
    learning algorithms", eq. (5)) against one incumbent for all hyperparameters:
    ``"marginal"`` the largest posterior mean of the mixture over the samples at
    the observed target inputs, ``"observed"`` the best observed target value
    itself (that paper's ``f(x_best)``, for nearly noise-free observations).
    ``incumbent="effective"`` gives each sample its own
    :func:`effective_best_mean` (augmented EI's incumbent).
    Computed once per evaluation instead of once per call; None when ``best_f``
    is given.

    Raises:
        ValueError: for an unknown ``incumbent``.

    Example:
        >>> prepare_incumbents(None, posterior).shape == (posterior.num_samples,)
        True
        >>> common = prepare_incumbents(None, posterior, incumbent="marginal")
        >>> bool(jnp.all(common == common[0]))
        True
    """
    del key
    incumbent = options.get("incumbent", "sample")
    if incumbent not in INCUMBENTS:
        raise ValueError(
            f"incumbent must be one of {list(INCUMBENTS)}, got {incumbent!r}"
        )
    if options.get("best_f") is not None:
        return None
    if incumbent == "marginal":
        return _marginal_incumbent(posterior)
    if incumbent == "observed":
        return _observed_incumbent(posterior)
    if incumbent == "effective":
        return _per_sample_incumbent(posterior, effective_best_mean)
    return _per_sample_incumbent(posterior, best_observed_mean)


def prepare_incumbent_inputs(key: Any, posterior: Posterior, **options: Any) -> Any:
    """``prepare`` for acquisitions of the incumbent's latent value: per-sample
    :func:`best_observed_input`, shape (s, d), computed once per evaluation.

    Example:
        >>> prepare_incumbent_inputs(None, posterior).shape[0] == posterior.num_samples
        True
    """
    del key, options
    return _per_sample_incumbent(posterior, best_observed_input)


@dataclass(frozen=True, eq=False)
class Acquisition:
    """A per-sample acquisition function and how to reduce it over samples.

    Args:
        name: short name (``"ei"``).
        fn: ``fn(sample, X, **options) -> (m,)`` for one :class:`Sample`.
        log_space: values are logs; reduce with log-mean-exp instead of the mean.
        prepare: optional ``prepare(key, posterior, **options) -> aux`` computed
            once per evaluation outside the per-sample map (e.g. sampled maxima),
            a pytree with a leading sample axis s handed to ``sample.aux``.
        stochastic: whether it needs ``key`` (Thompson sampling, MES, KG).
        num_samples: how many evenly spaced hyperparameter samples a campaign
            (:class:`ppbo.Optimizer`) averages it over by default (None: all);
            :func:`evaluate` itself always uses every sample it is given.
        repeat_samples: whether a posterior with fewer samples than
            ``num_samples`` (MAP's one) is repeated up to it: PES and ES draw one
            maximiser per sample, so repetition gives them more draws; noisy EI
            draws its incumbents per evaluation, so for it a repeat only adds cost.
        requires: the :class:`~ppbo.Capability` values it needs from the
            surrogate; :func:`bind` refuses a surrogate that lacks one with a
            :class:`~ppbo.MissingCapabilityError` naming it.
        draws_sample: the acquisition is a random function of ONE hyperparameter
            sample drawn uniformly from the posterior (Thompson sampling): instead
            of averaging over samples, :func:`bind` draws the sample's index from
            ``key`` and evaluates the acquisition on that sample alone, so
            per-sample values have shape (1, m). Needs ``stochastic=True``.
        improvement: its values are an expected improvement of the standardised
            outputs (their log when ``log_space``), so that the campaign step can
            tell a negligible one and explore instead
            (:data:`ppbo.campaign.step.EXPLORE_BELOW`).

    Example:
        >>> def mean_acquisition(sample, X):
        ...     return sample.predict(X)[0]
        >>> posterior_mean = Acquisition("mean", mean_acquisition)
    """

    name: str
    fn: Callable[..., jax.Array]
    log_space: bool = False
    prepare: Callable[..., Any] | None = None
    stochastic: bool = False
    num_samples: int | None = None
    repeat_samples: bool = True
    requires: tuple[Capability, ...] = ()
    draws_sample: bool = False
    improvement: bool = False

    def __post_init__(self) -> None:
        if self.draws_sample and not self.stochastic:
            raise ValueError(
                f"acquisition {self.name!r}: draws_sample=True needs stochastic=True "
                "(the sample is drawn with the key)"
            )

    def __repr__(self) -> str:
        return f"Acquisition({self.name!r})"


def _split_options(options: Mapping[str, Any]):
    arrays = {k: v for k, v in options.items() if _is_array_like(v)}
    static = tuple(sorted((k, v) for k, v in options.items() if k not in arrays))
    return arrays, static


def _is_array_like(value: Any) -> bool:
    return isinstance(value, jax.Array | float) or hasattr(value, "__array__")


def _values(acquisition, posterior, X, aux, arrays, static):
    kw = dict(static) | dict(arrays)
    surrogate = posterior.surrogate

    def one(params, cache, aux_i):
        sample = Sample(params, cache, posterior.data, surrogate, aux_i)
        return acquisition.fn(sample, X, **kw)

    return jax.vmap(one)(posterior.samples, posterior.cache, aux)


_values_jit = jax.jit(_values, static_argnames=("acquisition", "static"))


@partial(jax.jit, static_argnames=("acquisition", "static"))
def _reduced_value_and_grad(acquisition, posterior, X, aux, arrays, static):
    def total(X):
        reduced = reduce_samples(
            acquisition, _values(acquisition, posterior, X, aux, arrays, static)
        )
        return jnp.sum(reduced), reduced

    (_, reduced), grad = jax.value_and_grad(total, has_aux=True)(X)
    return reduced, grad


class Bound:
    """An acquisition with its posterior, options and random draws fixed.

    Calling it gives per-sample values (s, m); :meth:`reduced` the marginalised
    values (m,); :meth:`value_and_grad` those and their gradients with respect to
    the candidates, (m,) and (m, d). Each is compiled once per candidate shape and
    reused for every posterior of the same bucket.
    """

    __slots__ = ("acquisition", "posterior", "aux", "arrays", "static")

    def __init__(self, acquisition, posterior, aux, arrays, static):
        self.acquisition = acquisition
        self.posterior = posterior
        self.aux = aux
        self.arrays = arrays
        self.static = static

    def _args(self, X):
        X = jnp.asarray(X)
        return (self.acquisition, self.posterior, X, self.aux, self.arrays, self.static)

    def __call__(self, X: jax.Array) -> jax.Array:
        return _values_jit(*self._args(X))

    def reduced(self, X: jax.Array) -> jax.Array:
        """Marginalised values, shape (m,)."""
        return reduce_samples(self.acquisition, self(X))

    def value_and_grad(self, X: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Marginalised values (m,) and their gradients with respect to X (m, d)."""
        return _reduced_value_and_grad(*self._args(X))


def bind(acquisition: Acquisition, posterior: Posterior, **options: Any) -> Bound:
    """Fix a posterior and options; return a :class:`Bound` acquisition.

    Stochastic parts (``prepare``, per-sample keys) are drawn once here, so the
    bound acquisition is deterministic in ``X`` (common random numbers) and
    differentiable, which the acquisition optimiser relies on. For an acquisition
    with ``draws_sample`` (Thompson sampling) the one hyperparameter sample it is
    evaluated on is drawn here too, uniformly, from ``key``.

    Example:
        >>> from ppbo.acquisition import ei
        >>> values, grad = bind(ei, posterior).value_and_grad(np.array([[0.5, 0.5]]))
        >>> values.shape, grad.shape
        ((1,), (1, 2))
    """
    posterior.surrogate.require(
        *acquisition.requires, by=f"acquisition {acquisition.name!r}"
    )
    options = dict(options)
    key = options.pop("key", None)
    if acquisition.stochastic and key is None:
        raise ValueError(f"acquisition {acquisition.name!r} needs a key=... option")
    if acquisition.draws_sample:
        posterior, key = _draw_sample(posterior, key)
    aux = None
    if acquisition.prepare is not None:
        aux = acquisition.prepare(key, posterior, **options)
    elif key is not None:
        aux = jax.random.split(key, posterior.num_samples)
    arrays, static = _split_options(options)
    return Bound(acquisition, posterior, aux, arrays, static)


#: Acquisition names in order of preference for :func:`default_acquisition`:
#: log-EI first, the campaign default (it needs only the predictive mean and
#: variance, so every surrogate qualifies).
DEFAULT_ACQUISITIONS = ("log_ei",)


def default_acquisition(
    surrogate: Surrogate, candidates: Mapping[str, Acquisition] | None = None
) -> str:
    """Name of the acquisition a campaign uses when none is given.

    The first of :data:`DEFAULT_ACQUISITIONS` whose ``requires`` the surrogate
    declares: today always ``"log_ei"``, which needs only the predictive mean and
    variance. A surrogate's extras are never consulted, so a multi-task GP (which
    declares no :class:`~ppbo.GPParts`) is never routed to PES.

    Args:
        surrogate: the campaign's surrogate.
        candidates: name -> acquisition to choose from (default: the acquisitions
            of :mod:`ppbo.acquisition` by name).

    Raises:
        MissingCapabilityError: if no preferred acquisition fits the surrogate.

    Example:
        >>> from ppbo.models import gp, multitask_gp
        >>> default_acquisition(gp.surrogate()), default_acquisition(
        ...     multitask_gp.surrogate(num_tasks=2))
        ('log_ei', 'log_ei')
    """
    if candidates is None:
        from ppbo import acquisition as module

        candidates = {name: getattr(module, name) for name in DEFAULT_ACQUISITIONS}
    have = surrogate.capabilities
    for name in DEFAULT_ACQUISITIONS:
        if name in candidates and set(candidates[name].requires) <= have:
            return name
    raise MissingCapabilityError(
        f"surrogate {surrogate.name!r} lacks what every default acquisition "
        f"{DEFAULT_ACQUISITIONS} needs; pass an acquisition explicitly"
    )


def _draw_sample(posterior: Posterior, key: jax.Array) -> tuple[Posterior, jax.Array]:
    # A draw from the marginal posterior of f is a draw of theta_i, then of f given
    # theta_i: the index is uniform over the (equally weighted) MCMC samples.
    key_index, key = jax.random.split(key)
    index = int(jax.random.randint(key_index, (), 0, posterior.num_samples))
    return posterior.sample(index), key


def per_sample(
    acquisition: Acquisition, posterior: Posterior, X: Any, **options: Any
) -> jax.Array:
    """Acquisition values for every hyperparameter sample, shape (s, m).

    Takes the same options as :func:`evaluate`. For an acquisition that
    ``draws_sample`` (Thompson sampling) the shape is (1, m): the values of the
    one sample drawn with ``key``.

    Example:
        >>> from ppbo.acquisition import ei
        >>> per_sample(ei, posterior, np.array([[0.5, 0.5]])).shape
        (1, 1)
    """
    X = _validate_X(X, posterior.data.dim)
    return bind(acquisition, posterior, **options)(X)


def reduce_samples(acquisition: Acquisition, values: jax.Array) -> jax.Array:
    """Average (s, m) per-sample values over samples: mean, or log-mean-exp."""
    if acquisition.log_space:
        return logsumexp(values, axis=0) - jnp.log(values.shape[0])
    return jnp.mean(values, axis=0)


def evaluate(
    acquisition: Acquisition, posterior: Posterior, X: Any, **options: Any
) -> jax.Array:
    """The acquisition at candidates ``X``, marginalised over posterior samples.

    Args:
        acquisition: e.g. ``ppbo.acquisition.ei``.
        posterior: a fitted :class:`~ppbo.Posterior`.
        X: candidates in the unit cube, shape (m, d), float64.
        **options: passed to the acquisition (``best_f``, ``beta``, ...);
            stochastic acquisitions need ``key``.

    Returns:
        Array of shape (m,).

    For gradients with respect to ``X`` use ``bind(acquisition, posterior,
    **options).value_and_grad(X)``: ``evaluate`` validates ``X`` on the host.

    Example:
        >>> from ppbo.acquisition import ei
        >>> evaluate(ei, posterior, np.array([[0.5, 0.5], [0.9, 0.1]])).shape
        (2,)
    """
    return reduce_samples(acquisition, per_sample(acquisition, posterior, X, **options))
