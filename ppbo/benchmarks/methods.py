"""Bayesian-optimisation methods for the regret runner.

:class:`BayesOpt` turns a surrogate, an inference method and an acquisition into a
:class:`~ppbo.benchmarks.runner.Method`: it standardises the observations (flipping
the sign of minimisation problems), fits the hyperparameter posterior warm-started
from its previous fit, maximises the marginalised acquisition, and recommends the
maximiser of the posterior mean (Hernández-Lobato, Hoffman and Ghahramani 2014, §4).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ppbo import acquisition as acquisitions
from ppbo.benchmarks.problems import Problem
from ppbo.benchmarks.runner import Method
from ppbo.data import Dataset
from ppbo.inference import MAP, NUTS, Slice, fit
from ppbo.loop import standardize
from ppbo.optimize import optimize_acquisition, recommend

__all__ = ["BayesOpt", "bayes_opt"]


@functools.cache
def _surrogate(kernel: str):
    # One surrogate object per kernel and process: compiled fits and acquisitions
    # are cached per surrogate, so every run of a sweep reuses them.
    from ppbo.models import gp

    return gp.surrogate(kernel=kernel)


@dataclass(frozen=True)
class _Config:
    acquisition: str
    inference: str
    num_warmup: int
    num_samples: int
    kernel: str
    num_raw: int
    num_restarts: int


class BayesOpt:
    """A fully Bayesian BO method with a per-process fit cache.

    The runner asks for a recommendation after each evaluation and then for the
    next point on the same data; both use one fitted posterior (the cache holds
    the latest fit and is dropped when pickled, so each worker process starts
    empty). Consecutive fits are warm-started.

    Args:
        acquisition: name of an acquisition in :mod:`ppbo.acquisition`.
        inference: ``"nuts"``, ``"slice"`` or ``"map"``.
        num_warmup, num_samples: MCMC settings.
        kernel: GP kernel name.
        num_raw, num_restarts: acquisition optimiser settings.

    Example:
        >>> method = bayes_opt("ei", num_warmup=64, num_samples=64)
        >>> callable(method.suggest) and callable(method.recommend)
        True
    """

    def __init__(
        self,
        acquisition: str = "ei",
        inference: str = "nuts",
        num_warmup: int = 256,
        num_samples: int = 256,
        kernel: str = "matern52",
        num_raw: int = 512,
        num_restarts: int = 8,
    ) -> None:
        if not isinstance(
            getattr(acquisitions, acquisition, None), acquisitions.Acquisition
        ):
            raise ValueError(f"unknown acquisition {acquisition!r}")
        if inference not in ("nuts", "slice", "map"):
            raise ValueError(
                f"inference must be 'nuts', 'slice' or 'map', got {inference!r}"
            )
        self.config = _Config(
            acquisition,
            inference,
            num_warmup,
            num_samples,
            kernel,
            num_raw,
            num_restarts,
        )
        self._cache: dict[str, Any] = {}

    def __getstate__(self) -> dict:
        return {"config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.config = state["config"]
        self._cache = {}

    def _surrogate(self):
        return _surrogate(self.config.kernel)

    def _inference(self):
        c = self.config
        if c.inference == "nuts":
            return NUTS(num_warmup=c.num_warmup, num_samples=c.num_samples)
        if c.inference == "slice":
            return Slice(num_warmup=c.num_warmup, num_samples=c.num_samples)
        return MAP()

    def posterior(self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray):
        """The posterior given the evaluations so far (cached for the same data)."""
        fingerprint = (np.asarray(X).tobytes(), np.asarray(y).tobytes())
        last = self._cache.get("last")
        if last is not None and last[0] == fingerprint:
            return last[1]
        data = Dataset(
            np.asarray(X, dtype=np.float64),
            standardize(y, maximize=problem.direction == "maximize"),
        )
        init = last[1] if last is not None else None
        posterior = fit(self._surrogate(), data, self._inference(), key, init=init)
        self._cache["last"] = (fingerprint, posterior)
        return posterior

    def suggest(
        self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        """Maximise the acquisition; returns a point (d,) in the unit cube."""
        key_fit, key_opt = jax.random.split(key)
        posterior = self.posterior(key_fit, problem, X, y)
        acquisition = getattr(acquisitions, self.config.acquisition)
        X_next, _ = optimize_acquisition(
            acquisition,
            posterior,
            key_opt,
            num_raw=self.config.num_raw,
            num_restarts=self.config.num_restarts,
        )
        return X_next[0]

    def recommend(
        self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        """The maximiser of the posterior mean (in model space)."""
        key_fit, key_opt = jax.random.split(key)
        posterior = self.posterior(key_fit, problem, X, y)
        return recommend(
            posterior,
            key_opt,
            num_raw=self.config.num_raw,
            num_restarts=self.config.num_restarts,
        ).x_mean


def bayes_opt(acquisition: str = "ei", **kwargs: Any) -> Method:
    """A :class:`~ppbo.benchmarks.runner.Method` running :class:`BayesOpt`.

    Example:
        >>> bayes_opt("ei").suggest.__self__.config.acquisition
        'ei'
    """
    bo = BayesOpt(acquisition, **kwargs)
    return Method(suggest=bo.suggest, recommend=bo.recommend)
