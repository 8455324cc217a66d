"""Per-observation weights of the preference GP (the weighted-penalty strategy).

Each log-likelihood term is multiplied by its weight. Checked against
independent references: weights of 1 are the unweighted model; a weight of 0 is
the dataset without that duel or anchor; an integer weight 2 is the duel
repeated; the anchors' weighted evidence against Gauss-Hermite quadrature of
``E_{f ~ N(mu, K)}[prod_l N(y_l | f_l, r_l)^{w_l}]``; the weighted Laplace mode
against an independent optimiser written with scipy.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.optimize import minimize as scipy_minimize
from scipy.stats import norm

import ppbo
from ppbo.models import preference_gp as pgp

PARAMS = {
    "lengthscale": jnp.array([0.35]),
    "outputscale": 1.3,
    "mean": 0.1,
    "preference_noise": 0.08,
    "noise": 0.04,
}
X = np.array([[0.05], [0.3], [0.45], [0.7], [0.9]])
DUELS = np.array([[1, 0], [2, 1], [2, 3], [3, 4], [1, 4], [0, 4]])
Y = np.array([0.2, 0.9, 0.0, 0.0, -0.7])
ANCHOR = np.array([True, True, False, False, True])


def _rbf(A, B, ell, scale):
    return scale * np.exp(-0.5 * (((A[:, None, :] - B[None, :, :]) / ell) ** 2).sum(-1))


def _data(duels=DUELS, anchor=ANCHOR, **fields):
    return ppbo.Dataset(
        X, Y, duels=duels, anchor=anchor, capacity=8, duel_capacity=8, **fields
    )


@partial(jax.jit, static_argnames="beta")
def _fits(data, beta=0.5):
    """Everything the weights enter: the criterion, the Laplace mode and
    precision, and the NUTS log joint density at one point (one compilation
    per dataset structure)."""
    u, B = pgp.laplace_mode(PARAMS, data, beta=beta)
    model = pgp.surrogate(beta=beta).model
    latent = jnp.linspace(-1.0, 1.0, data.capacity)
    density, _ = log_density(model, (data,), {}, {**PARAMS, "latent": latent})
    return {
        "criterion": pgp.criterion(PARAMS, data, beta=beta),
        "preference_evidence": pgp.preference_log_evidence(PARAMS, data),
        "anchor_evidence": pgp.anchor_log_evidence(PARAMS, data),
        "mode": u,
        "precision": B,
        "nuts_log_density": density,
    }


def test_weights_of_one_reproduce_the_unweighted_model_exactly():
    plain = _fits(_data())
    ones = _fits(_data(weight=np.ones(5), duel_weight=np.ones(6)))
    for name, value in plain.items():
        np.testing.assert_array_equal(ones[name], value, err_msg=name)


def test_a_zero_duel_weight_is_the_duel_dropped():
    weights = np.ones(6)
    weights[[1, 4]] = 0.0
    weighted = _fits(_data(duel_weight=weights))
    dropped = _fits(_data(duels=DUELS[weights > 0]))
    for name, value in dropped.items():
        # the same sums with exact zeros added; only the order of the float
        # operations differs, so the agreement is to rounding
        np.testing.assert_allclose(weighted[name], value, rtol=1e-12, atol=1e-12)


def test_a_zero_anchor_weight_is_the_anchor_dropped():
    weights = np.array([1.0, 0.0, 1.0, 1.0, 1.0])
    weighted = _fits(_data(weight=weights))
    dropped = _fits(_data(anchor=ANCHOR & (weights > 0)))
    for name, value in dropped.items():
        np.testing.assert_allclose(weighted[name], value, rtol=1e-12, atol=1e-12)
    # and it does matter: with weight 1 the anchor changes every quantity
    full = _fits(_data())
    assert abs(float(full["anchor_evidence"] - dropped["anchor_evidence"])) > 0.1


def test_a_duel_weight_of_two_is_the_duel_repeated():
    weights = np.ones(6)
    weights[2] = 2.0
    weighted = _fits(_data(duel_weight=weights))
    repeated = _fits(_data(duels=np.vstack([DUELS, DUELS[2:3]])))
    for name, value in repeated.items():
        np.testing.assert_allclose(weighted[name], value, rtol=1e-12, atol=1e-12)


def test_weighted_likelihood_terms_match_scipy():
    w_duel = np.array([0.3, 1.0, 0.0, 0.7, 2.0, 0.1])
    w_row = np.array([0.5, 0.25, 9.0, 9.0, 1.0])  # rows 2, 3 are not anchors
    data = _data(weight=w_row, duel_weight=w_duel)
    f = np.array([0.3, -0.2, 0.5, 0.1, -0.4, 0.0, 0.0, 0.0])
    z = (f[DUELS[:, 0]] - f[DUELS[:, 1]]) / np.sqrt(2 * 0.08)
    np.testing.assert_allclose(
        pgp.duel_log_likelihood(jnp.asarray(f), data, 0.08),
        (w_duel * norm.logcdf(z)).sum(),
        rtol=1e-12,
    )
    expected = (w_row * norm.logpdf(Y, f[:5], np.sqrt(0.04)))[ANCHOR].sum()
    np.testing.assert_allclose(
        pgp.anchor_log_likelihood(jnp.asarray(f), data, 0.04), expected, rtol=1e-12
    )


def test_weighted_anchor_evidence_matches_gauss_hermite_quadrature():
    # E_{f ~ N(mu, K)} prod_l N(y_l | f_l, r)^{w_l} over two anchors, by a
    # tensor Gauss-Hermite rule in the whitened coordinates of K. The noise is
    # wide enough for the rule to resolve the integrand: 120 and 200 nodes per
    # axis agree to 1e-14 here (at r = 0.04 they still differ in the 3rd digit).
    anchor = np.array([True, False, False, True, False])
    w = np.array([0.35, 1.0, 1.0, 1.7, 1.0])
    data = _data(anchor=anchor, weight=w)
    rows = np.flatnonzero(anchor)
    ell, scale, r = 0.35, 1.3, 0.3
    K = _rbf(X[rows], X[rows], ell, scale) + pgp.JITTER * scale * np.eye(2)
    L = np.linalg.cholesky(K)
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    e1, e2 = np.meshgrid(nodes, nodes, indexing="ij")
    f = 0.1 + np.stack([e1.ravel(), e2.ravel()], 1) @ L.T
    log_g = (w[rows] * norm.logpdf(Y[rows], f, np.sqrt(r))).sum(1)
    ww = np.outer(weights, weights).ravel() / (2 * np.pi)
    expected = np.log(ww @ np.exp(log_g))
    np.testing.assert_allclose(
        pgp.anchor_log_evidence({**PARAMS, "noise": r}, data), expected, rtol=1e-10
    )


def test_weighted_laplace_mode_matches_an_independent_optimiser():
    beta = 0.6
    w_duel = np.array([0.3, 1.0, 0.5, 0.7, 2.0, 0.1])
    w_row = np.array([0.5, 0.25, 1.0, 1.0, 1.5])
    data = _data(weight=w_row, duel_weight=w_duel)
    K = _rbf(X, X, 0.35, 1.3) + pgp.JITTER * 1.3 * np.eye(5)

    def minus_psi(f):
        r = f - 0.1
        z = (f[DUELS[:, 0]] - f[DUELS[:, 1]]) / np.sqrt(2 * 0.08)
        anchors = (w_row * norm.logpdf(Y, f, np.sqrt(0.04)))[ANCHOR].sum()
        duels = (w_duel * norm.logcdf(z)).sum()
        # the likelihood powers: beta and 1 - beta over the larger, (1, 2/3)
        return 0.5 * r @ np.linalg.solve(K, r) - duels - (1 - beta) / beta * anchors

    result = scipy_minimize(
        minus_psi, np.zeros(5), method="BFGS", options={"gtol": 1e-10}
    )
    u, _ = pgp.laplace_mode(PARAMS, data, beta=beta)
    f_hat = np.asarray(pgp.latent_values({**PARAMS, "latent": u}, data))[:5]
    np.testing.assert_allclose(f_hat, result.x, atol=1e-5)


@pytest.mark.slow
def test_laplace_fit_with_unit_weights_is_the_unweighted_fit():
    laplace = pgp.Laplace(num_samples=4, num_restarts=1, max_iterations=20)
    surrogate = pgp.surrogate(beta=0.5)
    key = jax.random.PRNGKey(0)
    plain = ppbo.fit(surrogate, _data(), laplace, key)
    ones = ppbo.fit(
        surrogate, _data(weight=np.ones(5), duel_weight=np.ones(6)), laplace, key
    )
    for name, value in plain.samples.items():
        np.testing.assert_allclose(ones.samples[name], value, rtol=1e-9, atol=1e-12)


def test_dataset_weights_are_validated_padded_and_appended():
    data = _data(weight=np.full(5, 0.5), duel_weight=np.full(6, 0.25))
    assert np.asarray(data.weight).tolist() == [0.5] * 5 + [0.0] * 3
    assert np.asarray(data.duel_weight).tolist() == [0.25] * 6 + [0.0] * 2
    more = data.append([[0.6]], [0.0], duels=[[5, 0]])
    assert np.asarray(more.weight)[:6].tolist() == [0.5] * 5 + [1.0]
    assert np.asarray(more.duel_weight)[:7].tolist() == [0.25] * 6 + [1.0]
    assert set(more.unpadded_fields()) >= {"weight", "duel_weight"}
    with pytest.raises(ValueError, match=r"weight must be >= 0, got weight\[2\] = -1"):
        _data(weight=[1.0, 1.0, -1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"duel_weight must be finite"):
        _data(duel_weight=[1.0, np.nan, 1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"duel_weight must have shape \(6,\)"):
        _data(duel_weight=np.ones(5))
    with pytest.raises(ValueError, match="duel_weight was given without duels"):
        ppbo.Dataset(X, Y, duel_weight=np.ones(2))
