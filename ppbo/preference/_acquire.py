"""The pair acquisitions of a preference campaign, maximised over the unit cube.

EUBO (Astudillo et al. 2023) over pairs ``[x_a, x_b]`` in ``[0, 1]^{2d}``: raw
Sobol pairs, the best ``num_restarts`` refined together by L-BFGS-B on the summed
(independent) values, as BoTorch's ``optimize_acqf`` does. On a Laplace
posterior EUBO reads the exact Laplace predictive
(:func:`ppbo.models.preference_gp.laplace_predictive`), not the mixture of its
latent draws, whose Monte Carlo error in the pair's covariance decided which
pair won on Ackley-6 (``benchmarks/README.md``). Dueling Thompson
sampling (González et al. 2017) on raw candidates plus the evaluated points.
ANPEI's point against the incumbent (the evaluated point of highest posterior
mean). Private: the campaign is the public entry point.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from scipy.optimize import minimize

from ppbo.acquisition.base import bind
from ppbo.acquisition.preferential import anpei, dueling_thompson, eubo
from ppbo.models.preference_gp import laplace_predictive
from ppbo.optimize import optimize_acquisition, raw_candidates

__all__: list[str] = []


def _maximise_pairs(bound, raw: np.ndarray, num_restarts: int, max_iterations: int):
    values = np.asarray(bound.reduced(raw))
    order = np.argsort(-values)[:num_restarts]
    starts = raw[order]
    best_x, best_v = starts[0], float(values[order[0]])
    if max_iterations > 0:
        shape = starts.shape

        def fun(z):
            v, g = bound.value_and_grad(z.reshape(shape))
            return -float(np.sum(v)), -np.asarray(g).ravel()

        result = minimize(
            fun,
            starts.ravel(),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * starts.size,
            options={"maxiter": max_iterations},
        )
        refined = np.clip(result.x.reshape(shape), 0.0, 1.0)
        refined_values = np.asarray(bound.reduced(refined))
        i = int(np.argmax(refined_values))
        if np.isfinite(refined_values[i]) and refined_values[i] > best_v:
            best_x, best_v = refined[i], float(refined_values[i])
    return best_x, best_v


def _eubo_posterior(posterior):
    """The posterior EUBO averages over: the exact predictive of a Laplace fit."""
    return laplace_predictive(posterior) if posterior.method == "laplace" else posterior


def _eubo_pair(key, posterior, d, options):
    raw = raw_candidates(key, 2 * d, options["num_raw"])
    # the evaluated points paired with raw points: the incumbent is often one side
    observed = np.asarray(posterior.data.X)[: posterior.data.n]
    mixed = np.hstack([observed[np.arange(len(raw)) % len(observed)], raw[:, d:]])
    candidates = np.vstack([raw, mixed])
    bound = bind(eubo, _eubo_posterior(posterior))
    x, value = _maximise_pairs(
        bound, candidates, options["num_restarts"], options["max_iterations"]
    )
    return x[:d], x[d:], value


def _incumbent(posterior) -> np.ndarray:
    X = np.asarray(posterior.data.X)[: posterior.data.n]
    mean, _ = posterior.predict_marginal(X)
    return X[int(np.argmax(np.asarray(mean)))]


def _opponent(key, posterior, a, d, options) -> np.ndarray:
    raw = raw_candidates(jax.random.fold_in(key, 7), d, options["num_raw"])
    values = np.array(bind(eubo, _eubo_posterior(posterior), opponent=a).reduced(raw))
    values[np.all(np.isclose(raw, a[None]), axis=1)] = -np.inf
    return raw[int(np.argmax(values))]


def propose(
    key: jax.Array, posterior, problem, config: dict, iteration: int
) -> tuple[np.ndarray, np.ndarray, str, dict[str, Any]]:
    """The next pair ``(a, b)`` in the unit cube, its origin and notes."""
    d = posterior.data.dim
    options = config["optimizer_options"]
    name = config["acquisition"]["name"]
    if name == "anpei" and problem.num_anchors == 0:
        name = "eubo"
    if name == "eubo":
        a, b, value = _eubo_pair(key, posterior, d, options)
        asked = config["acquisition"]["name"]
        origin = "eubo" if asked == "eubo" else "eubo (no anchors yet)"
        return a, b, origin, {"value": value}
    if name == "dueling_thompson":
        raw = raw_candidates(key, d, options["num_raw"])
        # the evaluated points, repeated to the bucket's capacity: a fixed
        # candidate shape per bucket, so the path sampler compiles once
        data = posterior.data
        observed = np.asarray(data.X)[: data.n]
        X = np.vstack([raw, observed[np.arange(data.capacity) % data.n]])
        rows, pair = dueling_thompson(jax.random.fold_in(key, 3), posterior, X)
        a, b = np.asarray(pair[0]), np.asarray(pair[1])
        if int(rows[0]) == int(rows[1]):
            b = _opponent(key, posterior, a, d, options)
        return a, b, "dueling_thompson", {}
    opts = config["anpei_options"]
    weights = np.ones(problem.num_anchors)
    if "noise" not in posterior.samples:
        # heteroscedastic anchors: w_l is the anchor's noise sd relative to the
        # anchors' mean noise sd, so that phi(x0_l) = w_l; homoscedastic
        # anchors leave phi = 1 and ANPEI = rho EI - (1 - rho)
        r = np.asarray(posterior.noise_var(problem.anchor_X))[0]
        sd = np.sqrt(np.maximum(r, 1e-300))
        weights = sd / sd.mean()
    x, value = optimize_acquisition(
        anpei,
        posterior,
        key,
        num_raw=options["num_raw"],
        num_restarts=options["num_restarts"],
        max_iterations=options["max_iterations"],
        anchors=problem.anchor_X,
        weights=weights,
        lengthscale=opts["lengthscale"],
        gamma=opts["gamma"],
        rho=opts["rho"],
        t=float(iteration + 1),
    )
    a = np.asarray(x[0])
    b = _incumbent(posterior)
    if np.allclose(a, b):
        b = _opponent(key, posterior, a, d, options)
    return a, b, "anpei", {"value": float(np.asarray(value)[0])}
