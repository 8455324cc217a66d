"""Temporary: the Slice config (moves into slice.py)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.inference.slice import SliceKernel
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["Slice", "SliceKernel"]


@dataclass(frozen=True)
class Slice:
    num_warmup: int = 128
    num_samples: int = 256
    thinning: int = 1
    num_chains: int = 1
    width: float = 1.0

    def fit(self, key, surrogate: Surrogate, data: Dataset, *, init: Posterior | None = None) -> Posterior:
        raise NotImplementedError
