"""The pair acquisitions of a preference campaign, maximised over the unit cube.

EUBO (Astudillo et al. 2023) over pairs ``[x_a, x_b]`` in ``[0, 1]^{2d}``: raw
Sobol pairs (and evaluated points paired with raw points), ``num_restarts`` of
them chosen as BoTorch's ``optimize_acqf`` chooses its starts (the best plus a
Boltzmann draw) and each refined by its own L-BFGS-B run. On a Laplace
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

from ppbo.acquisition.base import bind
from ppbo.acquisition.preferential import anpei, dueling_thompson, eubo
from ppbo.models.preference_gp import laplace_predictive
from ppbo.optimize import _refine, optimize_acquisition, raw_candidates, select_starts

__all__: list[str] = []


def _maximise_pairs(
    key, bound, raw: np.ndarray, num_restarts: int, max_iterations: int
):
    """The best pair: Boltzmann-chosen starts, each refined by its own L-BFGS-B run.

    As :func:`ppbo.optimize.optimize_acquisition` does for points: the best raw
    pair plus a draw weighted by ``exp(2 z)`` (:func:`ppbo.optimize.select_starts`),
    so that the starts reach several of EUBO's modes instead of crowding into
    the best raw one, and one L-BFGS-B run per start, so that no start's line
    search carries another out of its basin.
    """
    values = np.asarray(bound.reduced(raw))
    values = np.where(np.isfinite(values), values, -np.inf)
    order = select_starts(key, values, num_restarts, "boltzmann")
    best_x, best_v = raw[order[0]], float(values[order[0]])
    if max_iterations > 0:
        refined, refined_values = _refine(bound, raw[order], max_iterations)
        i = int(
            np.argmax(np.where(np.isfinite(refined_values), refined_values, -np.inf))
        )
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
        jax.random.fold_in(key, 11),
        bound,
        candidates,
        options["num_restarts"],
        options["max_iterations"],
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
