"""The Bayesian-optimisation step: fit the surrogate, maximise the acquisition.

:func:`step` is the one BO step of ppbo. Every driver calls it: the ask/tell
:class:`ppbo.Optimizer` (and so :func:`ppbo.minimize`, :func:`ppbo.maximize` and
the ``ppbo`` command), the functional :func:`ppbo.suggest`, and the benchmark
methods of :mod:`ppbo.benchmarks`. It works in model space only: inputs in the
unit cube, outputs standardised and to be maximised. Points under evaluation are
handled as pending points (the Kriging believer of Ginsbourger, Le Riche and
Carraro 2010, "Kriging is well-suited to parallelize optimization").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

import jax
import numpy as np

from ppbo import acquisition as _acquisition_module
from ppbo.acquisition.base import Acquisition
from ppbo.campaign.validation import check_explore_below
from ppbo.data import Dataset
from ppbo.inference import fit
from ppbo.optimize import optimize_acquisition
from ppbo.surrogate import Posterior, Surrogate

__all__ = [
    "ACQUISITION_SAMPLES", "EXPLORE_BELOW", "EXPLORE_WITHIN", "Step", "step",
    "Suggestion", "suggest",
]  # fmt: skip


class Step(NamedTuple):
    """The result of :func:`step`.

    Attributes:
        X: suggested points in the unit cube, shape (q, d).
        values: their acquisition values, shape (q,).
        posterior: the fitted posterior (before thinning or ``transform``); pass
            it as ``init`` to the next step for a warm start.
        explored: the acquisition's best point all but repeated an observed
            input for a negligible expected improvement, so ``X`` maximises the
            posterior variance instead (:data:`EXPLORE_BELOW`) and ``values`` are
            its log variances.
    """

    X: np.ndarray
    values: np.ndarray
    posterior: Posterior
    explored: bool = False


#: Evenly spaced posterior samples an acquisition averages over when neither the
#: campaign nor the acquisition sets a number: the handful that PES averages
#: (Hernandez-Lobato et al. 2014 use 10 MCMC samples). Measured over 20 seeds of
#: Branin and Hartmann-6 with NUTS (benchmarks/README.md), log-EI averaged over
#: 16 of 128 draws is as good as over all 128 (better on 12/20 and 10/20 seeds)
#: and makes a large-n step several times cheaper; pass ``acquisition_samples``
#: to average over more.
ACQUISITION_SAMPLES = 16

#: The step's exploration rule for improvement acquisitions (EI, log-EI, noisy EI):
#: when the best point's expected improvement is below this many standard
#: deviations of the observed outputs AND the point lies within
#: :data:`EXPLORE_WITHIN` of an observed input, the step would spend an evaluation
#: all but repeating a known point for an improvement its model holds negligible
#: (Jones, Schonlau and Welch 1998 stop EGO once the expected improvement falls
#: below 1% of the best value); it evaluates the point of largest posterior
#: variance instead (:data:`ppbo.acquisition.variance`, MacKay 1992). Without the
#: rule noise-free Forrester kept 6 of 20 campaigns in its local minimum for 30
#: evaluations, proposing points within 1e-5 of each other; the improvement test
#: alone freed them but also stopped Branin's late refinement (benchmarks/README.md,
#: "The exploration rule"). ``acquisition_options={"explore_below": None}`` turns
#: the rule off, a number moves the threshold.
EXPLORE_BELOW = 1e-3

#: The distance in the unit cube within which the rule counts a suggested point as
#: repeating an observed input (see :data:`EXPLORE_BELOW`).
EXPLORE_WITHIN = 1e-4


def step(
    key: jax.Array,
    surrogate: Surrogate,
    inference: Any,
    acquisition: Acquisition,
    data: Dataset,
    *,
    pending: Any = None,
    init: Posterior | None = None,
    q: int = 1,
    acquisition_samples: int | None = None,
    acquisition_options: Mapping[str, Any] | None = None,
    optimizer_options: Mapping[str, Any] | None = None,
    fitted: Posterior | None = None,
    transform: Callable[[Posterior], Posterior] | None = None,
    snap: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Step:
    """Fit the surrogate to ``data`` and maximise the marginalised acquisition.

    GP-UCB without ``beta`` gets ``beta = UCB_BETA`` (1); given any option of the
    schedule of Srinivas et al. (2010) (``delta``, ``size``, ``a``, ``b``, ``r``)
    it gets that schedule at the round ``t = n``.

    Args:
        key: PRNG key, split into the fit's and the acquisition optimiser's.
        surrogate, inference, acquisition: e.g. ``gp.surrogate()``, ``ppbo.MAP()``
            and ``ppbo.acquisition.log_ei``.
        data: observations in model space (unit cube, standardised, maximise).
        pending: points under evaluation, shape (k, d), or None.
        init: the previous step's posterior, to warm-start the fit.
        q: number of points to suggest.
        acquisition_samples: the acquisition averages over this many evenly
            spaced posterior samples (default: its own ``num_samples``, e.g. 16
            for PES; when it has none, :data:`ACQUISITION_SAMPLES` of a posterior
            that has more, all of a smaller one); fewer are repeated unless the
            acquisition has ``repeat_samples=False`` (noisy EI).
        acquisition_options: static options of the acquisition, and
            ``explore_below`` (default :data:`EXPLORE_BELOW`; None: off): an
            improvement acquisition whose best point is below it and next to an
            observed input gives way to the posterior variance for this step.
        optimizer_options: passed to :func:`ppbo.optimize_acquisition`
            (``num_raw``, ``num_restarts``, ``max_iterations`` ...).
        fitted: a posterior already fitted to ``data``; skips the fit (the
            optimiser's key is the same).
        transform: applied to the fitted posterior before the acquisition (e.g.
            one task's view); the returned posterior is the untransformed one.
        snap: maps unit points (m, d) to the unit images of the points that
            will be run (integer and categorical parameters); each suggested
            point is then the best snapped point by the acquisition AT the
            snapped points (the optimum and the raw candidates, snapped).

    Returns:
        A :class:`Step`.

    Example:
        >>> result = step(
        ...     key, posterior.surrogate, ppbo.MAP(), ppbo.acquisition.ei, data,
        ...     optimizer_options={"num_raw": 64},
        ... )
        >>> result.X.shape
        (1, 2)
    """
    key_fit, key_opt = jax.random.split(key)
    posterior = fitted
    if posterior is None:
        posterior = fit(surrogate, data, inference, key_fit, init=init)
    scored = posterior if transform is None else transform(posterior)
    scored = _thinned(scored, acquisition, acquisition_samples)
    options = _acquisition_options(acquisition, acquisition_options, data)
    explore_below = check_explore_below(options.pop("explore_below", EXPLORE_BELOW))
    pending = _as_pending(pending)
    optimizer_options = dict(optimizer_options or {})
    maximise = partial(optimize_acquisition, posterior=scored, key=key_opt, q=q)
    X, values = maximise(acquisition, pending=pending, **optimizer_options, **options)
    explored = _converged(acquisition, X, values, scored.data, explore_below)
    if explored:
        acquisition, options = _acquisition_module.variance, {}
        X, values = maximise(acquisition, pending=pending, **optimizer_options)
    if snap is not None:
        num_raw = int(optimizer_options.get("num_raw", 512))
        X, values = _snapped(
            acquisition, scored, key_opt, X, pending, snap, num_raw, options
        )
    return Step(X=X, values=values, posterior=posterior, explored=explored)


def _as_pending(pending) -> np.ndarray | None:
    if pending is None or len(pending) == 0:
        return None
    return np.asarray(pending, dtype=np.float64)


def _converged(acquisition, X, values, data: Dataset, threshold) -> bool:
    # EXPLORE_BELOW's rule: the best point (the first of a batch) all but repeats
    # an observed target input (source rows do not count), and its expected
    # improvement (standardised units) is below the threshold
    if threshold is None or not acquisition.improvement:
        return False
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values[0]):
        return False
    observed = np.asarray(data.X)[np.asarray(data.target_mask)]
    if len(observed) == 0:
        return False
    nearest = float(np.min(np.linalg.norm(observed - np.asarray(X)[0], axis=1)))
    cut = math.log(threshold) if acquisition.log_space else threshold
    return nearest < EXPLORE_WITHIN and float(values[0]) < cut


def _thinned(posterior: Posterior, acquisition, given: int | None) -> Posterior:
    # the samples the acquisition averages over: ``num`` evenly spaced ones when
    # asked for (at most all of them where repeats only add work), else
    # ACQUISITION_SAMPLES of a larger posterior, else all
    num = given or acquisition.num_samples
    if num and not acquisition.repeat_samples:
        num = min(num, posterior.num_samples)
    if num:
        return posterior.thin(num)
    if posterior.num_samples > ACQUISITION_SAMPLES:
        return posterior.thin(ACQUISITION_SAMPLES)
    return posterior


#: GP-UCB's exploration weight in a campaign that names neither ``beta`` nor the
#: schedule: the best of the weights 1, 2 and 4 measured on Branin and Hartmann-6,
#: while the schedule of Srinivas et al. (beta_t of 110-135 in 6-D) searched about
#: as well as random search (benchmarks/README.md, "Acquisitions").
UCB_BETA = 1.0

#: Options that ask for GP-UCB's schedule (:func:`ppbo.acquisition.ucb_beta`).
_UCB_SCHEDULE = frozenset({"t", "delta", "size", "a", "b", "r"})


def _acquisition_options(acquisition, given, data) -> dict:
    options = dict(given or {})
    if acquisition is _acquisition_module.ucb and not {"beta", "t"} & set(options):
        if _UCB_SCHEDULE & set(options):
            # the schedule (Srinivas et al. 2010, Theorem 2) needs the round t: the
            # number of observations the model conditions on
            options["t"] = float(data.n)
        else:
            options["beta"] = UCB_BETA
    return options


def _snapped(acquisition, posterior, key, X, pending, snap, num_raw, options):
    """The best snapped point for each row of ``X``, by the snapped value."""
    from ppbo.acquisition import evaluate
    from ppbo.optimize import condition_on_pending, raw_candidates

    d = posterior.data.dim
    busy = np.zeros((0, d)) if pending is None else pending
    chosen, values = [], []
    for x, key_i in zip(X, jax.random.split(key, len(X)), strict=True):
        current = condition_on_pending(posterior, busy) if len(busy) else posterior
        raw = raw_candidates(key_i, d, num_raw)
        candidates = np.unique(snap(np.vstack([x[None], raw])), axis=0)
        # padded to a fixed count (repeats of the first) so that the evaluation
        # compiles once per campaign
        fill = np.repeat(candidates[:1], num_raw + 1 - len(candidates), axis=0)
        candidates = np.vstack([candidates, fill])
        extra = {"key": key_i} if acquisition.stochastic else {}
        scores = np.asarray(
            evaluate(acquisition, current, candidates, **options, **extra)
        )
        best = int(np.argmax(np.where(np.isnan(scores), -np.inf, scores)))
        chosen.append(candidates[best])
        values.append(scores[best])
        busy = np.vstack([busy, candidates[best][None]])
    return np.stack(chosen), np.asarray(values)


class Suggestion(NamedTuple):
    """The result of :func:`suggest`.

    Attributes:
        X: suggested points in the unit cube, shape (q, d).
        values: their acquisition values, shape (q,).
        posterior: the posterior the acquisition was computed from.
    """

    X: np.ndarray
    values: np.ndarray
    posterior: Posterior


def suggest(
    key: jax.Array,
    surrogate: Surrogate,
    inference: Any,
    acquisition: Acquisition,
    data: Dataset,
    *,
    init: Posterior | None = None,
    q: int = 1,
    pending: Any = None,
    optimizer_options: dict | None = None,
    **options: Any,
) -> Suggestion:
    """Fit the surrogate to ``data`` and maximise the acquisition: :func:`step`.

    Args:
        key: PRNG key; split into one for the fit and one for the optimiser.
        surrogate: e.g. ``ppbo.models.gp.surrogate()``.
        inference: ``ppbo.NUTS(...)``, ``ppbo.Slice(...)``, ``ppbo.MAP()`` ...
        acquisition: e.g. ``ppbo.acquisition.ei``.
        data: observations in model space (unit cube, standardised, maximise).
        init: the previous step's posterior, for warm starts.
        q: number of points to suggest.
        pending: points already under evaluation, (k, d).
        optimizer_options: passed to :func:`ppbo.optimize_acquisition`
            (``num_raw``, ``num_restarts``, ``max_iterations``).
        **options: passed to the acquisition.

    Returns:
        A :class:`Suggestion`.

    Example:
        >>> result = suggest(
        ...     key, posterior.surrogate, ppbo.MAP(), ppbo.acquisition.ei, data,
        ...     optimizer_options={"num_raw": 64},
        ... )
        >>> result.X.shape
        (1, 2)
    """
    result = step(
        key,
        surrogate,
        inference,
        acquisition,
        data,
        pending=pending,
        init=init,
        q=q,
        acquisition_options=options,
        optimizer_options=optimizer_options,
    )
    return Suggestion(X=result.X, values=result.values, posterior=result.posterior)
