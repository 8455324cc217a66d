"""Bayesian-optimisation methods for the regret runner.

:class:`BayesOpt` turns a surrogate, an inference method and an acquisition into a
:class:`~ppbo.benchmarks.runner.Method`: it standardises the observations (flipping
the sign of minimisation problems), fits the hyperparameter posterior warm-started
from its previous fit, maximises the marginalised acquisition, and recommends the
maximiser of the posterior mean (Hernández-Lobato, Hoffman and Ghahramani 2014, §4).

The variants of that paper's experiments are options: known hyperparameters
(``inference="fixed"`` with ``params``, on unstandardised outputs), a thinned set of
hyperparameter samples for expensive acquisitions (``acquisition_samples``; PES and
ES default to 16, as their :class:`~ppbo.acquisition.Acquisition` says; given
explicitly, a posterior with fewer samples is repeated up to that number, so that
PES with known or point-estimated hyperparameters still averages over 16 sampled
maximisers), the
hyperparameters fixed at a point estimate instead of marginalised
(``point_estimate``: PES-NB is PES with ``"mean"``), and gradient-free maximisation
(``max_iterations=0``, for entropy search).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ppbo.acquisition.pes import pes_nb_posterior
from ppbo.benchmarks.problems import Problem
from ppbo.benchmarks.runner import Method
from ppbo.campaign import registry
from ppbo.campaign.step import step
from ppbo.campaign.transforms import model_data
from ppbo.inference import Fixed, fit
from ppbo.optimize import recommend
from ppbo.surrogate import Posterior

__all__ = ["BayesOpt", "bayes_opt"]

_INFERENCES = tuple(registry.INFERENCES)
_POINT_ESTIMATES = ("mean", "log_mean")
# Positive sites (models/gp.py) whose log-space mean is their geometric mean.
_POSITIVE_SITES = ("lengthscale", "outputscale", "noise")


@dataclass(frozen=True)
class _Config:
    acquisition: str
    inference: str
    num_warmup: int
    num_samples: int
    kernel: str
    num_raw: int
    num_restarts: int
    thinning: int = 1
    mean: str = "constant"
    acquisition_samples: int | None = None
    point_estimate: str | None = None
    lengthscale_prior: str | None = None
    max_iterations: int = 100
    acquisition_options: tuple[tuple[str, Any], ...] = ()
    params: tuple[tuple[str, Any], ...] = ()
    standardize: bool = True


class BayesOpt:
    """A fully Bayesian BO method with a per-process fit cache.

    The runner asks for a recommendation after each evaluation and then for the
    next point on the same data; both use one fitted posterior (the cache holds
    the latest fit and is dropped when pickled, so each worker process starts
    empty). Consecutive fits are warm-started.

    Args:
        acquisition: name of an acquisition in :mod:`ppbo.acquisition`.
        inference: ``"nuts"``, ``"slice"``, ``"map"`` or ``"fixed"`` (known
            hyperparameters ``params``; no inference).
        num_warmup, num_samples: MCMC settings.
        kernel: GP kernel name (``gp.surrogate``'s ``kernel``).
        num_raw, num_restarts: acquisition optimiser settings.
        thinning: keep every ``thinning``-th MCMC draw (``num_samples //
            thinning`` samples), e.g. 16 evenly spaced samples for PES.
        mean: GP mean function (``"zero"``, ``"constant"``, ``"linear"``).
        acquisition_samples: number of evenly spaced posterior samples the
            acquisition averages over (:meth:`ppbo.Posterior.thin`); None takes
            the acquisition's own default (16 for PES and ES, all for the rest),
            as :class:`ppbo.Optimizer` does. Given explicitly, a posterior with
            fewer samples has them repeated cyclically up to this number, so that
            a stochastic acquisition draws its randomness (PES: the maximiser x*)
            once per copy: with known hyperparameters, or a point estimate, PES
            then averages over that many x* samples, as the paper's PES does.
            Recommendations use the posterior as fitted.
        point_estimate: replace the posterior by one sample at a point estimate
            of the hyperparameters, for both the acquisition and the
            recommendation (no Bayesian treatment of the hyperparameters):
            ``"mean"``, the posterior mean of each site
            (:func:`~ppbo.acquisition.pes_nb_posterior`; PES with it is the PES-NB
            of Hernández-Lobato et al. 2014, §4), or ``"log_mean"``, the mean of
            the logarithms for the positive sites ``lengthscale``,
            ``outputscale`` and ``noise`` (their geometric mean, which heavy
            upper tails do not dominate) and the mean for the others.
        max_iterations: L-BFGS-B iterations of the acquisition optimiser; 0 for a
            raw search only (gradient-free acquisitions such as ES).
        acquisition_options: extra static options for the acquisition, e.g.
            ``{"num_paths": 500}`` for ES.
        lengthscale_prior: a name of :data:`ppbo.models.gp.LENGTHSCALE_PRIORS`
            (None: the GP's default).
        params: site -> value for ``inference="fixed"`` (every latent site of the
            GP with this ``mean``: ``lengthscale`` (d,), ``outputscale``,
            ``noise``, plus ``mean`` unless ``mean="zero"``).
        standardize: standardise the observations (zero mean, unit variance);
            known hyperparameters are usually given in the problem's units, so use
            False with them. Minimisation problems are negated either way.

    Raises:
        ValueError: for an unknown acquisition, inference or point estimate,
            ``params`` without ``inference="fixed"`` or the reverse, and
            non-positive counts.

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
        *,
        thinning: int = 1,
        mean: str = "constant",
        acquisition_samples: int | None = None,
        point_estimate: str | None = None,
        lengthscale_prior: str | None = None,
        max_iterations: int = 100,
        acquisition_options: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        standardize: bool = True,
    ) -> None:
        if acquisition not in registry.ACQUISITIONS:
            raise ValueError(f"unknown acquisition {acquisition!r}")
        if inference not in _INFERENCES:
            raise ValueError(
                f"inference must be one of {', '.join(map(repr, _INFERENCES))}, "
                f"got {inference!r}"
            )
        if (inference == "fixed") != (params is not None):
            raise ValueError(
                "params must be given exactly when inference='fixed', got "
                f"inference={inference!r} and params={params!r}"
            )
        for name, value in (
            ("thinning", thinning),
            ("acquisition_samples", acquisition_samples),
        ):
            if value is not None and int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        if point_estimate is not None and point_estimate not in _POINT_ESTIMATES:
            raise ValueError(
                f"point_estimate must be None or one of {_POINT_ESTIMATES}, got "
                f"{point_estimate!r}"
            )
        if int(max_iterations) < 0:
            raise ValueError(f"max_iterations must be >= 0, got {max_iterations!r}")
        self.config = _Config(
            acquisition,
            inference,
            num_warmup,
            num_samples,
            kernel,
            num_raw,
            num_restarts,
            thinning=int(thinning),
            mean=mean,
            acquisition_samples=(
                None if acquisition_samples is None else int(acquisition_samples)
            ),
            point_estimate=point_estimate,
            lengthscale_prior=lengthscale_prior,
            max_iterations=int(max_iterations),
            acquisition_options=tuple(sorted(dict(acquisition_options or {}).items())),
            params=tuple(
                (name, np.asarray(value, dtype=np.float64).tolist())
                for name, value in sorted(dict(params or {}).items())
            ),
            standardize=bool(standardize),
        )
        self._cache: dict[str, Any] = {}

    def __getstate__(self) -> dict:
        return {"config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.config = state["config"]
        self._cache = {}

    def _surrogate(self):
        # one surrogate object per configuration and process (the registry's):
        # compiled fits and acquisitions are cached per surrogate object
        spec = {"name": "gp", "kernel": self.config.kernel, "mean": self.config.mean}
        if self.config.lengthscale_prior is not None:
            spec["lengthscale_prior"] = self.config.lengthscale_prior
        return registry.resolve_surrogate(spec)[0]

    def _inference(self):
        c = self.config
        if c.inference == "fixed":
            return Fixed({name: np.asarray(value) for name, value in c.params})
        if c.inference == "map":
            return registry.make_inference("map")
        return registry.make_inference(
            c.inference,
            num_warmup=c.num_warmup,
            num_samples=c.num_samples,
            thinning=c.thinning,
        )

    def _data(self, problem: Problem, X: np.ndarray, y: np.ndarray):
        maximize = problem.direction == "maximize"
        data, _ = model_data(X, y, maximize, scale=self.config.standardize)
        return data

    def _fitted(self, X: np.ndarray, y: np.ndarray) -> Posterior | None:
        """The full posterior fitted to exactly these data, if cached."""
        last = self._cache.get("last")
        if last is not None and last[0] == _fingerprint(X, y):
            return last[1]
        return None

    def _store(self, X: np.ndarray, y: np.ndarray, full: Posterior) -> None:
        self._cache["full"] = full
        self._cache["last"] = (_fingerprint(X, y), full, None)

    def posterior(self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray):
        """The posterior given the evaluations so far (cached for the same data).

        With ``point_estimate`` this is the one-sample posterior at the point
        estimate; the next fit is still warm-started from the full MCMC posterior.
        """
        full = self._fitted(X, y)
        if full is None:
            data = self._data(problem, X, y)
            init = self._cache.get("full")
            full = fit(self._surrogate(), data, self._inference(), key, init=init)
            self._store(X, y, full)
        fingerprint, _, point = self._cache["last"]
        if point is None:
            point = _point_estimate(full, self.config.point_estimate)
            self._cache["last"] = (fingerprint, full, point)
        return point

    def suggest(
        self, key: jax.Array, problem: Problem, X: np.ndarray, y: np.ndarray
    ) -> np.ndarray:
        """Maximise the acquisition (:func:`ppbo.campaign.step`); returns a point
        (d,) in the unit cube.

        The same key and data give the point :meth:`ppbo.Optimizer.ask` suggests
        with the same components (both call the one step).
        """
        c = self.config
        fitted = self._fitted(X, y)
        if fitted is not None:  # the point estimate of the cached fit, once
            fitted = self.posterior(key, problem, X, y)
        result = step(
            key,
            self._surrogate(),
            self._inference(),
            registry.resolve_acquisition(c.acquisition)[0],
            self._data(problem, X, y),
            init=self._cache.get("full"),
            acquisition_samples=c.acquisition_samples,
            acquisition_options=dict(c.acquisition_options),
            optimizer_options={
                "num_raw": c.num_raw,
                "num_restarts": c.num_restarts,
                "max_iterations": c.max_iterations,
            },
            fitted=fitted,
            transform=(
                None
                if fitted is not None
                else lambda full: _point_estimate(full, c.point_estimate)
            ),
        )
        if fitted is None:
            self._store(X, y, result.posterior)
        return result.X[0]

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


def _fingerprint(X: np.ndarray, y: np.ndarray) -> tuple[bytes, bytes]:
    return (np.asarray(X).tobytes(), np.asarray(y).tobytes())


def _point_estimate(posterior: Posterior, kind: str | None) -> Posterior:
    if kind is None:
        return posterior
    if kind == "mean":
        return pes_nb_posterior(posterior)
    params = {
        name: (
            np.exp(np.mean(np.log(np.asarray(value)), axis=0))
            if name in _POSITIVE_SITES
            else np.mean(np.asarray(value), axis=0)
        )
        for name, value in posterior.samples.items()
    }
    return Fixed(params).fit(None, posterior.surrogate, posterior.data)


def bayes_opt(acquisition: str = "ei", **kwargs: Any) -> Method:
    """A :class:`~ppbo.benchmarks.runner.Method` running :class:`BayesOpt`.

    Example:
        >>> bayes_opt("ei").suggest.__self__.config.acquisition
        'ei'
    """
    bo = BayesOpt(acquisition, **kwargs)
    return Method(suggest=bo.suggest, recommend=bo.recommend)
