"""Inference backends: small frozen configs with one method, ``fit``.

``ppbo.fit(surrogate, data, inference, key)`` is the front door.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax

from ppbo._memory import release_compiled_code_if_crowded
from ppbo.data import Dataset
from ppbo.inference.fixed import Fixed
from ppbo.inference.map import MAP
from ppbo.inference.nuts import NUTS
from ppbo.inference.sghmc import SGHMC, SGHMCKernel
from ppbo.inference.slice import Slice, SliceKernel
from ppbo.inference.train import Train
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "Inference",
    "fit",
    "NUTS",
    "Slice",
    "SliceKernel",
    "SGHMC",
    "SGHMCKernel",
    "MAP",
    "Fixed",
    "Train",
]


class Inference(Protocol):
    """What an inference backend offers: ``fit(key, surrogate, data) -> Posterior``."""

    def fit(self, key: jax.Array, surrogate: Surrogate, data: Dataset) -> Posterior: ...


def fit(
    surrogate: Surrogate,
    data: Dataset,
    inference: Any,
    key: jax.Array,
    *,
    init: Posterior | None = None,
) -> Posterior:
    """Infer the hyperparameters of ``surrogate`` given ``data``.

    Args:
        surrogate: the model (e.g. ``ppbo.models.gp.surrogate()``).
        data: observations in model space.
        inference: ``ppbo.NUTS(...)``, ``ppbo.Slice(...)``, ``ppbo.SGHMC(...)``,
            ``ppbo.MAP(...)``, ``ppbo.Fixed(...)``, ``ppbo.Train()`` (surrogates
            with their own trainer) or any object with a ``fit(key, surrogate, data)``.
        key: JAX PRNG key.
        init: previous posterior of the same surrogate; MCMC backends warm-start
            their positions and adaptation from it.

    A process that holds more than half of the kernel's memory-map cap
    (``vm.max_map_count`` on Linux; every compiled program holds a few maps)
    clears JAX's caches first, so that long notebooks and sweeps that compile
    many buckets and campaigns do not fail to compile (``ppbo._memory``).

    Returns:
        A :class:`~ppbo.Posterior`.

    Raises:
        TypeError: for arguments of the wrong type, and for a NumPyro-based
            inference (NUTS, Slice, SGHMC, MAP, Fixed) on a surrogate that brings its
            own trainer.
        ValueError: from ``surrogate.check_data`` for data the model cannot use.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> from ppbo.models import gp
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = ppbo.Dataset(np.random.rand(8, 1), np.random.randn(8))
        >>> posterior = ppbo.fit(gp.surrogate(), data, ppbo.MAP(), jax.random.key(0))
        >>> posterior.num_samples
        1
    """
    if not isinstance(surrogate, Surrogate):
        raise TypeError(f"surrogate must be a ppbo.Surrogate, got {surrogate!r}")
    if not isinstance(data, Dataset):
        raise TypeError(f"data must be a ppbo.Dataset, got {type(data).__name__}")
    if not callable(getattr(inference, "fit", None)):
        raise TypeError(f"inference must have a fit method, got {inference!r}")
    numpyro_based = (NUTS, Slice, SGHMC, MAP, Fixed)
    if surrogate.trainer is not None and isinstance(inference, numpyro_based):
        raise TypeError(
            f"surrogate {surrogate.name!r} brings its own trainer and has no NumPyro "
            f"model for {type(inference).__name__}; fit it with ppbo.Train()"
        )
    if surrogate.check_data is not None:
        surrogate.check_data(data)
    # a process that has compiled many buckets or campaigns drops their programs
    # before the kernel's memory-map cap makes the next compilation fail
    release_compiled_code_if_crowded()
    if init is not None and isinstance(inference, (NUTS, Slice, SGHMC)):
        return inference.fit(key, surrogate, data, init=init)
    return inference.fit(key, surrogate, data)
