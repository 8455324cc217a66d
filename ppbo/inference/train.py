"""Fitting a surrogate that brings its own trainer (forests, ensembles).

:class:`Train` runs ``surrogate.trainer(key, data)`` under ``jit`` (compiled once
per surrogate and capacity bucket) instead of sampling or optimising a NumPyro
program, and wraps the returned arrays (leading axis ``s``: ensemble members or
samples) in a :class:`~ppbo.Posterior` like every other backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["Train"]


@partial(jax.jit, static_argnames=("surrogate",))
def _train(key, data: Dataset, surrogate: Surrogate):
    return surrogate.trainer(key, data)


def _check_samples(surrogate: Surrogate, samples) -> dict[str, jax.Array]:
    if not isinstance(samples, dict) or not samples:
        raise TypeError(
            f"the trainer of surrogate {surrogate.name!r} must return a non-empty "
            f"dict of arrays, got {type(samples).__name__}"
        )
    sizes = set()
    for name, value in samples.items():
        value = np.asarray(value)
        if value.ndim == 0 or value.shape[0] == 0 or value.dtype != np.float64:
            raise ValueError(
                f"the trainer of surrogate {surrogate.name!r} returned {name!r} with "
                f"shape {value.shape} and dtype {value.dtype}; every value must be a "
                "float64 array with a leading sample axis"
            )
        if not np.all(np.isfinite(value)):
            raise FloatingPointError(
                f"the trainer of surrogate {surrogate.name!r} returned non-finite "
                f"values in {name!r}"
            )
        sizes.add(value.shape[0])
    if len(sizes) != 1:
        raise ValueError(
            f"the trainer of surrogate {surrogate.name!r} returned arrays with "
            f"different leading (sample) axes: "
            f"{ {k: np.shape(v)[0] for k, v in samples.items()} }"
        )
    return {k: jnp.asarray(v) for k, v in samples.items()}


@dataclass(frozen=True)
class Train:
    """Fit a surrogate by its own ``trainer``; a frozen config with one method.

    The inference for surrogates built with ``Surrogate(trainer=...)`` (and the
    campaign's default for them); it has no options.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> def trainer(key, data):  # two members: the mean and the maximum
        ...     y = jnp.where(data.mask, data.y, jnp.nan)
        ...     return {"c": jnp.stack([jnp.nanmean(y), jnp.nanmax(y)])}
        >>> def predict(params, data, X):
        ...     return jnp.full(X.shape[0], params["c"]), jnp.zeros(X.shape[0])
        >>> surrogate = ppbo.Surrogate(trainer=trainer, predict=predict,
        ...                            conditioning=False)
        >>> data = ppbo.Dataset(np.array([[0.1], [0.9]]), np.array([1.0, 3.0]))
        >>> posterior = ppbo.fit(surrogate, data, Train(), jax.random.key(0))
        >>> posterior.samples["c"].tolist()
        [2.0, 3.0]
    """

    def fit(self, key: jax.Array, surrogate: Surrogate, data: Dataset) -> Posterior:
        """Run ``surrogate.trainer(key, data)`` and return its posterior.

        Raises:
            TypeError: if the surrogate has no trainer, or it returns no dict.
            ValueError: for arrays that are not float64 or differ in their
                leading axis, naming the array.
            FloatingPointError: for non-finite values.
        """
        if surrogate.trainer is None:
            raise TypeError(
                f"ppbo.Train fits surrogates with their own trainer; surrogate "
                f"{surrogate.name!r} has a NumPyro model: use ppbo.MAP, ppbo.NUTS, "
                "ppbo.Slice or ppbo.Fixed"
            )
        with _mcmc.small_blas(data.capacity):
            samples = jax.block_until_ready(_train(key, data, surrogate))
        samples = _check_samples(surrogate, samples)
        cache = _mcmc.prepare_cache(surrogate, samples, data)
        return Posterior(
            surrogate, samples, data, cache=cache, num_chains=1, method="Train"
        )
