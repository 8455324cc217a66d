"""Compiled MCMC driver shared by the NUTS and slice backends.

One jitted function runs warm-up and sampling for all chains (vmapped) with
``lax.scan``; the surrogate and the frozen inference config are static arguments, so
a refit on a dataset of the same bucket reuses the compiled code. Initial positions
are an argument (computed from the model's prior or taken from the previous
posterior), never a branch, so cold and warm starts share one compilation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree
from numpyro.infer import init_to_median
from numpyro.infer.util import initialize_model
from threadpoolctl import threadpool_limits

from ppbo.data import Dataset
from ppbo.linalg import CholeskyError
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "initial_positions",
    "run_mcmc",
    "finish_posterior",
    "small_blas",
    "check_schedule",
    "fit_mcmc",
    "initialize_chains",
]

#: Capacity up to which fits run LAPACK single-threaded.
SINGLE_THREAD_BLAS_MAX = 512


@contextlib.contextmanager
def small_blas(capacity: int) -> Iterator[None]:
    """Run LAPACK/BLAS single-threaded while factorising small matrices.

    JAX's CPU Cholesky and triangular solves call the BLAS/LAPACK library that
    SciPy ships (OpenBLAS). For the few-hundred-row kernel matrices of BO its
    thread pool only adds synchronisation: a 56 x 56 triangular solve takes about
    25 us on one thread and 100-300 us on two busy cores. The limit is scoped to
    the fit and restored afterwards.
    """
    if capacity > SINGLE_THREAD_BLAS_MAX:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@partial(jax.jit, static_argnames=("surrogate", "num_chains"))
def _initial_positions(key, data: Dataset, surrogate: Surrogate, num_chains: int):
    def one(key):
        info = initialize_model(
            key,
            surrogate.model,
            init_strategy=init_to_median(num_samples=15),
            model_args=(data,),
            model_kwargs=dict(surrogate.options),
        )
        return info.param_info.z

    return jax.vmap(one)(jax.random.split(key, num_chains))


def initial_positions(key, surrogate: Surrogate, data: Dataset, num_chains: int):
    """Unconstrained starting points, one per chain, from the prior's medians.

    Returns:
        dict site -> array with a leading chain axis.
    """
    return _initial_positions(key, data, surrogate, num_chains)


@partial(jax.jit, static_argnames=("surrogate", "make_kernel", "record", "schedule"))
def _run(keys, data, init_z, warm, surrogate, make_kernel, record, schedule):
    num_warmup, num_samples, thinning = schedule
    args, kwargs = (data,), dict(surrogate.options)

    def one_chain(key, z0, warm):
        kernel = make_kernel(surrogate.model, warm)
        state = kernel.init(key, num_warmup, z0, model_args=args, model_kwargs=kwargs)

        def advance(s, _):
            return kernel.sample(s, args, kwargs), None

        state, _ = lax.scan(advance, state, None, length=num_warmup)

        def draw(s, _):
            s, _ = lax.scan(advance, s, None, length=thinning)
            return s, (s.z, record(s))

        state, (zs, stats) = lax.scan(draw, state, None, length=num_samples // thinning)
        samples = jax.vmap(kernel.postprocess_fn(args, kwargs))(zs)
        flat = jax.vmap(lambda z: ravel_pytree(z)[0])(zs)
        return samples, stats, state, flat

    return jax.vmap(one_chain)(keys, init_z, warm)


def run_mcmc(
    key,
    surrogate: Surrogate,
    data: Dataset,
    *,
    make_kernel: Callable[[Callable, Any], Any],
    record: Callable[[Any], dict],
    init_z: Any,
    warm: Any,
    num_chains: int,
    num_warmup: int,
    num_samples: int,
    thinning: int,
):
    """Run ``num_chains`` chains of an MCMC kernel under one compiled function.

    Args:
        key: PRNG key, split into one key per chain.
        make_kernel: static ``(model, warm) -> MCMCKernel`` (a hashable callable).
        record: static ``state -> dict`` of per-draw statistics.
        init_z: unconstrained starting points with a leading chain axis.
        warm: per-chain warm-start pytree passed to ``make_kernel`` (leading chain
            axis).

    Returns:
        ``(samples, stats, last_state, draws)`` with leading axes (chain, draw);
        ``draws`` are the unconstrained positions flattened in
        ``jax.flatten_util.ravel_pytree`` order, shape (chain, draw, size).
    """
    keys = jax.random.split(key, num_chains)
    schedule = (int(num_warmup), int(num_samples), int(thinning))
    with small_blas(data.capacity):
        out = _run(keys, data, init_z, warm, surrogate, make_kernel, record, schedule)
        return jax.block_until_ready(out)


def _flatten_chains(tree):
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), tree)


@partial(jax.jit, static_argnames=("surrogate",))
def _prepare(samples, data, surrogate: Surrogate):
    return jax.vmap(lambda p: surrogate.prepare(p, data))(samples)


def prepare_cache(surrogate: Surrogate, samples, data: Dataset):
    """Per-sample factors from ``surrogate.prepare``, checked for finiteness.

    Raises:
        CholeskyError: if a factor is not finite (see :mod:`ppbo.linalg`).
    """
    if surrogate.prepare is None:
        return None
    with small_blas(data.capacity):
        cache = jax.block_until_ready(_prepare(samples, data, surrogate))
    for leaf in jax.tree.leaves(cache):
        finite = np.isfinite(np.asarray(leaf))
        if not finite.all():
            index = int(np.argmax(~finite.reshape(finite.shape[0], -1).all(1)))
            raise CholeskyError(
                f"the per-sample factors of surrogate {surrogate.name!r} are not "
                f"finite for posterior sample {index}: the kernel matrix is not "
                "positive definite even with jitter. Standardise the outputs, remove "
                "duplicate inputs, or give the noise prior a larger lower bound."
            )
    return cache


def finish_posterior(
    surrogate: Surrogate,
    data: Dataset,
    samples: dict,
    stats: dict,
    *,
    num_chains: int,
    method: str,
    state: Any = None,
) -> Posterior:
    """Assemble a :class:`~ppbo.Posterior` from (chain, draw) arrays."""
    samples = _flatten_chains(samples)
    stats = _flatten_chains(stats)
    cache = prepare_cache(surrogate, samples, data)
    return Posterior(
        surrogate,
        samples,
        data,
        cache=cache,
        sample_stats=stats,
        state=state,
        num_chains=num_chains,
        method=method,
    )


def flat_size(z) -> int:
    """Number of unconstrained coordinates of one position (no chain axis)."""
    return int(sum(np.prod(np.shape(leaf)) for leaf in jax.tree.leaves(z)))


def check_schedule(config: Any) -> None:
    """Validate the ``num_warmup``/``num_samples``/``thinning``/``num_chains`` of an
    MCMC config, raising ``ValueError`` naming the field and value."""
    for name in ("num_warmup", "num_samples", "thinning", "num_chains"):
        value = getattr(config, name)
        minimum = 0 if name == "num_warmup" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if config.num_samples < config.thinning:
        raise ValueError(
            f"num_samples={config.num_samples} must be >= thinning={config.thinning}"
        )


def _same_layout(a: Any, b: Any) -> bool:
    if jax.tree.structure(a) != jax.tree.structure(b):
        return False
    return all(
        np.shape(x) == np.shape(y)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def warm_start(init: Posterior | None, surrogate: Surrogate, z: Any, warm: Any):
    """``init``'s last positions and adaptation if they fit, else ``(z, warm)``.

    A previous posterior is reused only when it belongs to the same surrogate
    object and its state has the layout of a cold start (same sites, shapes and
    chain count), so a warm start never triggers a recompilation.
    """
    if init is None or init.surrogate is not surrogate or not init.state:
        return z, warm
    state = init.state
    if set(state) != {"z", "warm"}:
        return z, warm
    if _same_layout(state["z"], z) and _same_layout(state["warm"], warm):
        return state["z"], state["warm"]
    return z, warm


def fit_mcmc(
    config: Any,
    key: jax.Array,
    surrogate: Surrogate,
    data: Dataset,
    init: Posterior | None,
    *,
    cold_warm: Callable[[int], Any],
    warm_of: Callable[[Any], Any],
    make_kernel: Callable[[Callable, Any], Any],
    record: Callable[[Any], dict],
    method: str,
    refit: tuple[Callable[[Callable, Any], Any], int] | None = None,
):
    """The body of an MCMC backend's ``fit``.

    Args:
        config: the frozen config (``num_warmup``, ``num_samples``, ``thinning``,
            ``num_chains``, ``warm_start``).
        cold_warm: ``size -> warm`` adaptation pytree of a cold start (leading
            chain axis), for ``size`` unconstrained coordinates.
        warm_of: ``(last_state, draws) -> warm`` pytree to store for the next warm
            start (``draws`` as :func:`run_mcmc` returns them).
        make_kernel, record: see :func:`run_mcmc`.
        method: name stored in the posterior.
        refit: ``(make_kernel, num_warmup)`` used instead of ``make_kernel`` and
            ``config.num_warmup`` when the fit does start warm from ``init``.

    Returns:
        ``(posterior, stats)``; the caller may add statistics before returning.
    """
    key_init, key_run = jax.random.split(key)
    z = initial_positions(key_init, surrogate, data, config.num_chains)
    cold = cold_warm(flat_size(jax.tree.map(lambda a: a[0], z)))
    warm = cold
    if config.warm_start:
        z, warm = warm_start(init, surrogate, z, cold)
    num_warmup = config.num_warmup
    if refit is not None and warm is not cold:
        make_kernel, num_warmup = refit
    samples, stats, last, draws = run_mcmc(
        key_run,
        surrogate,
        data,
        make_kernel=make_kernel,
        record=record,
        init_z=z,
        warm=warm,
        num_chains=config.num_chains,
        num_warmup=num_warmup,
        num_samples=config.num_samples,
        thinning=config.thinning,
    )
    return finish_posterior(
        surrogate,
        data,
        samples,
        stats,
        num_chains=config.num_chains,
        method=method,
        state={"z": last.z, "warm": warm_of(last, draws)},
    )


def initialize_chains(
    rng_key: jax.Array,
    model: Callable | None,
    init_strategy: Callable,
    init_params: Any,
    model_args: tuple,
    model_kwargs: dict,
) -> tuple[jax.Array, Any, Any, bool]:
    """Split the chains' keys and find their initial unconstrained values.

    The shared start of ppbo's hand-written NumPyro ``MCMCKernel``s (the slice
    sampler and SGHMC): one key (or a batch of keys, one per vectorised chain)
    is split into the kernel's key and the initialisation key; a model is
    initialised with NumPyro's ``initialize_model`` (``dynamic_args=True``).

    Returns:
        ``(rng_key, init_params, info, single_chain)``: ``info`` is NumPyro's
        ``ModelInfo`` (its ``potential_fn`` and ``postprocess_fn`` generators),
        None in potential-function mode.

    Raises:
        ValueError: in potential-function mode (``model`` None) without
            ``init_params``.

    Example:
        >>> import numpyro, numpyro.distributions as dist
        >>> def model():
        ...     numpyro.sample("x", dist.Normal(0.0, 1.0))
        >>> key, z, info, single = initialize_chains(
        ...     jax.random.key(0), model, init_to_median, None, (), {})
        >>> sorted(z), single
        (['x'], True)
    """
    from numpyro.infer.util import ParamInfo
    from numpyro.util import is_prng_key

    single_chain = is_prng_key(rng_key)
    if single_chain:
        rng_key, key_init = jax.random.split(rng_key)
    else:
        keys = jax.vmap(jax.random.split)(rng_key)
        rng_key, key_init = keys[:, 0], keys[:, 1]
    info = None
    if model is not None:
        info = initialize_model(
            key_init,
            model,
            init_strategy=init_strategy,
            dynamic_args=True,
            model_args=model_args,
            model_kwargs=model_kwargs,
            validate_grad=False,
        )
        if init_params is None:
            init_params = info.param_info.z
    elif init_params is None:
        raise ValueError("`init_params` is required with `potential_fn`.")
    if isinstance(init_params, ParamInfo):
        init_params = init_params.z
    return rng_key, init_params, info, single_chain
