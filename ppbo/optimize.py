"""Maximising acquisition functions over the unit cube, and recommendations.

:func:`optimize_acquisition` follows the two-stage scheme of BoTorch's
``optimize_acqf``: evaluate the marginalised acquisition on a scrambled Sobol or
Latin-hypercube set of raw candidates (``scipy.stats.qmc``), then refine
``num_restarts`` of them (:func:`select_starts`), each by its own L-BFGS-B run (Byrd,
Lu, Nocedal and Zhu 1995) on JAX gradients inside the bounds; one run on the summed
values shares a line search across restarts and lost the best basin on rugged
log-EI surfaces. Candidate and restart counts are fixed per campaign so nothing
recompiles between iterations.

Batches of ``q`` points are built greedily with the Kriging-believer heuristic
(Ginsbourger, Le Riche and Carraro 2010, "Kriging is well-suited to parallelize
optimization"): each chosen or pending point is added to the data with the
posterior-mixture mean as its fantasised value and every hyperparameter sample is
re-conditioned, which removes the variance there, before the next point is chosen.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np
from scipy.optimize import minimize
from scipy.stats import qmc

from ppbo.acquisition.base import Acquisition, Bound, bind
from ppbo.inference._mcmc import small_blas
from ppbo.surrogate import Posterior, _validate_X

__all__ = [
    "optimize_acquisition",
    "select_starts",
    "condition_on_pending",
    "recommend",
    "Recommendation",
    "posterior_mean",
]


def _seed(key: jax.Array) -> int:
    return int(jax.random.randint(key, (), 0, 2**31 - 1))


def raw_candidates(key: jax.Array, d: int, num: int, design: str = "sobol"):
    """Space-filling points in [0, 1]^d from ``scipy.stats.qmc``.

    Args:
        key: PRNG key (seeds the scrambling).
        d: dimension.
        num: number of points (a power of two is best for Sobol).
        design: ``"sobol"`` (scrambled, Owen 1998) or ``"lhs"`` (McKay et al. 1979).

    Example:
        >>> import jax
        >>> raw_candidates(jax.random.key(0), 2, 8).shape
        (8, 2)
    """
    seed = _seed(key)
    if design == "sobol":
        sampler = qmc.Sobol(d, scramble=True, seed=seed)
        points = sampler.random(num)
    elif design == "lhs":
        points = qmc.LatinHypercube(d, seed=seed).random(num)
    else:
        raise ValueError(f"design must be 'sobol' or 'lhs', got {design!r}")
    return np.asarray(points, dtype=np.float64)


def condition_on_pending(posterior: Posterior, pending: Any) -> Posterior:
    """Posterior with pending points added at their mixture-mean values.

    The Kriging believer of Ginsbourger et al. (2010); the same as
    :meth:`Posterior.condition_on_pending`, which documents it.

    Example:
        >>> busy = condition_on_pending(posterior, np.array([[0.2, 0.3]]))
        >>> busy.data.n == posterior.data.n + 1
        True
    """
    return posterior.condition_on_pending(pending)


def select_starts(
    key: jax.Array,
    values: np.ndarray,
    num: int,
    selection: str = "boltzmann",
    eta: float = 2.0,
) -> np.ndarray:
    """Indices of the raw candidates to refine, best first.

    ``"best"`` takes the ``num`` largest values. ``"boltzmann"`` keeps the largest
    and draws the rest without replacement with probabilities proportional to
    ``exp(eta z)``, ``z`` the standardised acquisition value, as the initialisation
    heuristic of BoTorch's ``optimize_acqf`` does (Balandat et al. 2020, "BoTorch:
    a framework for efficient Monte-Carlo Bayesian optimization"): starts spread
    over several promising basins instead of crowding into the best one.

    Args:
        key: PRNG key for the weighted draw.
        values: (m,) acquisition values of the raw candidates (-inf: never chosen
            unless nothing else is left).
        num: how many starts.
        selection: ``"boltzmann"`` or ``"best"``.
        eta: the Boltzmann temperature's inverse (BoTorch's default, 2).

    Returns:
        (num,) integer indices, the best candidate first.

    Example:
        >>> select_starts(jax.random.key(0), np.array([0.1, 3.0, 2.0]), 2, "best")
        array([1, 2])
    """
    if selection not in ("boltzmann", "best"):
        raise ValueError(f"selection must be 'boltzmann' or 'best', got {selection!r}")
    order = np.argsort(-values, kind="stable")
    if selection == "best" or np.isfinite(values).sum() <= num:
        return order[:num]
    rest = order[1:]
    z = values[rest]
    ok = np.isfinite(z)
    spread = z[ok].std()
    z = (z - z[ok].mean()) / (spread if spread > 0 else 1.0)
    weights = np.where(ok, np.exp(np.minimum(eta * z, 500.0)), 0.0)
    rng = np.random.default_rng(_seed(key))
    picked = rng.choice(rest, size=num - 1, replace=False, p=weights / weights.sum())
    picked = picked[np.argsort(-values[picked], kind="stable")]
    return np.concatenate([order[:1], picked])


def _refine(bound: Bound, starts: np.ndarray, max_iterations: int):
    """Maximise from each start by its own L-BFGS-B run inside the unit cube.

    The starts are refined one at a time, not as one L-BFGS-B problem on their
    summed values: a joint run shares one line search and one curvature estimate
    across restarts, so the long steps that restarts in steep, low regions of
    log-EI take carry a start that sits next to the best maximum past it, into a
    corner of the cube (a local maximum with zero projected gradient), and the
    best basin is lost (benchmarks/README.md, "Acquisition optimiser").
    """
    shape = (1, starts.shape[1])

    def fun(flat):
        values, grad = bound.value_and_grad(flat.reshape(shape))
        values, grad = np.asarray(values), np.asarray(grad, dtype=np.float64)
        if not np.all(np.isfinite(values)) or not np.all(np.isfinite(grad)):
            return np.inf, np.zeros(flat.shape)
        return -float(values[0]), -grad.ravel()

    X = np.empty_like(starts)
    for i, start in enumerate(starts):
        result = minimize(
            fun,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * starts.shape[1],
            options={"maxiter": max_iterations},
        )
        X[i] = np.clip(result.x, 0.0, 1.0)
    return X, np.asarray(bound.reduced(X))


def _optimize_one(
    acquisition: Acquisition,
    posterior: Posterior,
    key: jax.Array,
    num_raw: int,
    num_restarts: int,
    max_iterations: int,
    design: str,
    selection: str,
    options: dict,
):
    key_raw, key_acq, key_select = jax.random.split(key, 3)
    if acquisition.stochastic or acquisition.prepare is not None:
        options = {**options, "key": key_acq}
    bound = bind(acquisition, posterior, **options)
    raw = raw_candidates(key_raw, posterior.data.dim, num_raw, design)
    raw_values = np.asarray(bound.reduced(raw))
    raw_values = np.where(np.isfinite(raw_values), raw_values, -np.inf)
    order = select_starts(key_select, raw_values, num_restarts, selection)
    if max_iterations == 0:
        best = order[0]
        return raw[best], float(raw_values[best])
    X, values = _refine(bound, raw[order], max_iterations)
    values = np.where(np.isfinite(values), values, -np.inf)
    best = int(np.argmax(values))
    if values[best] < raw_values[order[0]]:  # refinement never makes things worse
        return raw[order[0]], float(raw_values[order[0]])
    return X[best], float(values[best])


def optimize_acquisition(
    acquisition: Acquisition,
    posterior: Posterior,
    key: jax.Array,
    *,
    q: int = 1,
    pending: Any = None,
    num_raw: int = 512,
    num_restarts: int = 8,
    max_iterations: int = 2000,
    design: str = "sobol",
    selection: str = "boltzmann",
    **options: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise a marginalised acquisition over [0, 1]^d.

    Args:
        acquisition: e.g. ``ppbo.acquisition.ei``.
        posterior: the fitted posterior (unit-cube inputs).
        key: PRNG key (raw candidates and stochastic acquisitions).
        q: number of points to return (greedy Kriging-believer batch).
        pending: points already being evaluated, shape (k, d); taken into account
            like the earlier points of a batch.
        num_raw: raw space-filling candidates (fixed per campaign).
        num_restarts: raw candidates refined by L-BFGS-B (see ``selection``).
        max_iterations: at most this many L-BFGS-B iterations (0: raw search
            only). L-BFGS-B stops on its own tolerances long before 2000 (BoTorch's
            limit too); with 100, about half of the log-EI maximisations of a
            Hartmann-6 campaign stopped unconverged at the limit.
        design: ``"sobol"`` or ``"lhs"`` raw candidates.
        selection: how restarts are picked from the raw candidates,
            ``"boltzmann"`` (the best plus a draw weighted by the acquisition; see
            :func:`select_starts`) or ``"best"`` (the top ``num_restarts``).
        **options: passed to the acquisition (``best_f``, ``beta``, ...).

    Returns:
        ``(X, values)``: the chosen points (q, d) and their acquisition values (q,)
        (each under the posterior conditioned on the points before it).

    Raises:
        ValueError: for non-positive ``q``, ``num_raw`` or ``num_restarts``.

    Example:
        >>> from ppbo.acquisition import ei
        >>> X, values = optimize_acquisition(ei, posterior, key, num_raw=64)
        >>> X.shape, values.shape
        ((1, 2), (1,))
    """
    for name, value in (("q", q), ("num_raw", num_raw), ("num_restarts", num_restarts)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value!r}")
    if num_restarts > num_raw:
        raise ValueError(f"num_restarts={num_restarts} must be <= num_raw={num_raw}")
    busy = np.zeros((0, posterior.data.dim))
    if pending is not None:
        busy = np.asarray(_validate_X(pending, posterior.data.dim))
    chosen, values = [], []
    with small_blas(posterior.data.capacity):
        for i, key_i in enumerate(jax.random.split(key, int(q))):
            current = condition_on_pending(posterior, busy) if len(busy) else posterior
            x, value = _optimize_one(
                acquisition,
                current,
                key_i,
                int(num_raw),
                int(num_restarts),
                int(max_iterations),
                design,
                selection,
                dict(options),
            )
            chosen.append(x)
            values.append(value)
            if i + 1 < q:
                busy = np.vstack([busy, x[None]])
    return np.stack(chosen), np.asarray(values)


def _posterior_mean(sample, X):
    return sample.predict(X)[0]


#: The posterior mean as an "acquisition", for recommendations.
posterior_mean = Acquisition("posterior_mean", _posterior_mean)


class Recommendation(NamedTuple):
    """Where to look for the optimum after some evaluations.

    Attributes:
        x_mean: maximiser of the posterior-mixture mean over [0, 1]^d (the
            recommendation of the PES paper, §4).
        value_mean: the posterior mean there.
        x_observed: the observed input with the largest posterior mean.
        value_observed: the posterior mean there.
    """

    x_mean: np.ndarray
    value_mean: float
    x_observed: np.ndarray
    value_observed: float


def recommend(posterior: Posterior, key: jax.Array, **kwargs: Any) -> Recommendation:
    """Recommend a point: the posterior-mean maximiser and the best observed point.

    Args:
        posterior: the fitted posterior.
        key: PRNG key for the raw candidates.
        **kwargs: passed to :func:`optimize_acquisition` (``num_raw`` ...).

    Example:
        >>> rec = recommend(posterior, jax.random.key(0), num_raw=64)
        >>> rec.value_mean >= rec.value_observed
        True
    """
    X, values = optimize_acquisition(posterior_mean, posterior, key, **kwargs)
    X_obs, _, _ = posterior.data.unpadded()
    mean_obs, _ = posterior.predict_marginal(X_obs)
    best = int(np.argmax(np.asarray(mean_obs)))
    return Recommendation(
        x_mean=X[0],
        value_mean=float(values[0]),
        x_observed=X_obs[best],
        value_observed=float(mean_obs[best]),
    )
