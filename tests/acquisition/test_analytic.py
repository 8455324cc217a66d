"""PI, EI, log-EI and GP-UCB on a fake posterior with given means and variances.

The fake surrogate predicts ``mean = a * X[:, 0] + b`` and ``var = c * X[:, 1]`` with
per-sample ``a, b, c``: candidates encode their own predictive moments, and the
values are smooth in X so gradients are meaningful. References are scipy.stats
closed forms, hard-coded values, quadrature and the asymptotic series of erfc.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special
from scipy.stats import norm

import ppbo
from ppbo.acquisition.analytic import ei, log_aei, log_ei, pi, ucb, ucb_beta
from ppbo.acquisition.base import (
    Sample,
    best_observed_mean,
    bind,
    effective_best_mean,
    evaluate,
    per_sample,
)


def _never_run(data):
    raise AssertionError("acquisitions must only call predict")


def _predict(params, data, X):
    return params["a"] * X[:, 0] + params["b"], params["c"] * X[:, 1]


FAKE = ppbo.Surrogate(model=_never_run, predict=_predict, name="fake")

SAMPLES = {"a": [1.0, 0.8, 1.3], "b": [0.0, 0.2, -0.1], "c": [1.0, 0.5, 2.0]}
# Observed x0 < 0, so the padded rows (x0 = 0, mean b) would beat every observed
# mean: the default incumbent is wrong unless the mask is honoured.
X_OBS = [[-0.5, 0.1], [-0.1, 0.2], [-0.3, 0.3]]
CANDIDATES = np.array(
    [[-1.0, 0.04], [0.0, 1.0], [0.3, 0.25], [1.5, 2.5], [-0.2, 1e-4], [0.05, 0.0]]
)


def _posterior(samples=None, X_obs=X_OBS):
    samples = SAMPLES if samples is None else samples
    data = ppbo.Dataset(np.asarray(X_obs), np.zeros(len(X_obs)))
    samples = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in samples.items()}
    return ppbo.Posterior(FAKE, samples, data, method="fake")


UNIT = {"a": [1.0], "b": [0.0], "c": [1.0]}  # mean = X[:, 0], var = X[:, 1]


def _moments(i, X, best_f):
    a, b, c = (SAMPLES[k][i] for k in "abc")
    mu = a * X[:, 0] + b
    sigma = np.sqrt(np.maximum(c * X[:, 1], 1e-18))
    if best_f is None:
        best_f = max(a * x[0] + b for x in X_OBS)
    return mu, sigma, best_f


@pytest.mark.parametrize("best_f, xi", [(None, 0.0), (0.1, 0.0), (None, 0.05)])
def test_pi_ei_ucb_match_scipy_closed_forms(best_f, xi):
    posterior = _posterior()
    options = {"xi": xi} if best_f is None else {"best_f": best_f, "xi": xi}
    values = {
        name: np.asarray(per_sample(acq, posterior, CANDIDATES, **options))
        for name, acq in [("pi", pi), ("ei", ei), ("log_ei", log_ei)]
    }
    values["ucb"] = np.asarray(per_sample(ucb, posterior, CANDIDATES, beta=3.0))
    for i in range(3):
        mu, sigma, incumbent = _moments(i, CANDIDATES, best_f)
        improvement = mu - incumbent - xi
        z = improvement / sigma
        expected_ei = improvement * norm.cdf(z) + sigma * norm.pdf(z)
        np.testing.assert_allclose(values["pi"][i], norm.cdf(z), rtol=1e-12)
        # the textbook formula cancels for z << 0 (relative error ~ eps z^2 plus
        # scipy's own error); there the quadrature reference takes over
        direct = z > -5
        np.testing.assert_allclose(
            values["ei"][i][direct], expected_ei[direct], rtol=1e-12, atol=0
        )
        log_expected = np.array([_reference_log_h(v) for v in z]) + np.log(sigma)
        np.testing.assert_allclose(
            values["log_ei"][i], log_expected, rtol=1e-13, atol=1e-11
        )
        np.testing.assert_allclose(
            values["ei"][i], np.exp(log_expected), rtol=1e-11, atol=0
        )
        np.testing.assert_allclose(
            values["ucb"][i], mu + np.sqrt(3.0) * sigma, rtol=1e-12
        )


def test_hard_coded_values():
    posterior = _posterior(UNIT)
    X = np.array([[0.0, 1.0], [1.0, 4.0], [-1.0, 0.25]])  # (mu, var)
    np.testing.assert_allclose(
        evaluate(ei, posterior, X, best_f=0.0),
        [0.3989422804014327, 1.3955931148026122, 0.004245351308414837],
        rtol=1e-13,
    )
    np.testing.assert_allclose(
        evaluate(pi, posterior, X, best_f=0.0),
        [0.5, 0.6914624612740131, 0.022750131948179195],
        rtol=1e-13,
    )
    np.testing.assert_allclose(
        evaluate(ucb, posterior, X, beta=2.0),
        [1.4142135623730951, 3.8284271247461903, -0.2928932188134524],
        rtol=1e-13,
    )
    # the incumbent defaults to the best observed mean (here X_OBS[1]: -0.1)
    np.testing.assert_allclose(
        evaluate(ei, posterior, X), evaluate(ei, posterior, X, best_f=-0.1)
    )


def test_averages_are_the_mean_of_per_sample_values():
    posterior = _posterior()
    for acq, options in [(ei, {}), (pi, {"xi": 0.1}), (ucb, {"beta": 2.0})]:
        values = per_sample(acq, posterior, CANDIDATES, **options)
        assert values.shape == (3, len(CANDIDATES))
        np.testing.assert_allclose(
            evaluate(acq, posterior, CANDIDATES, **options),
            np.mean(values, axis=0),
            rtol=1e-14,
        )
    log_values = np.asarray(per_sample(log_ei, posterior, CANDIDATES))
    averaged = np.asarray(evaluate(log_ei, posterior, CANDIDATES))
    np.testing.assert_allclose(
        averaged, np.log(np.mean(np.exp(log_values), axis=0)), rtol=1e-13
    )
    np.testing.assert_allclose(
        averaged, np.log(evaluate(ei, posterior, CANDIDATES)), rtol=1e-12
    )


def _reference_log_h(z):
    """log(z Phi(z) + phi(z)) by quadrature of h(z) = int_{-z}^inf Phi(-t) dt,
    scaled by Phi(z) so nothing underflows; h(z) = z + h(-z) for z > 0, and the
    asymptotic series below z = -1e3 (truncation error < 1e-40 there)."""
    if z > 0:
        return math.log(z + math.exp(_reference_log_h(-z)))
    if z < -1e3:
        return _asymptotic_log_h(z)
    scale = 1.0 + abs(z)
    log_cdf = special.log_ndtr(z)

    def ratio(s):
        return math.exp(special.log_ndtr(z - s / scale) - log_cdf)

    integral, _ = integrate.quad(ratio, 0, np.inf, epsabs=0, epsrel=1e-12, limit=200)
    return log_cdf + math.log(integral / scale)


def _asymptotic_log_h(z):
    """Abramowitz and Stegun 7.1.23: h(z) = phi(z) / z^2 sum_k (-1)^k (2k+1)!! / z^2k,
    nine terms (relative truncation error < 1e-18 for z <= -40)."""
    u, term, total = 1.0 / (z * z), 1.0, 1.0
    for k in range(1, 9):
        term *= -(2 * k + 1) * u
        total += term
    return (
        -0.5 * z * z - 0.5 * math.log(2 * math.pi) - 2 * math.log(-z) + math.log(total)
    )


Z_GRID = np.concatenate([-np.logspace(3, -3, 31), [0.0], np.logspace(-3, 3, 31)])
SIGMAS = [1e-100, 1e-50, 1e-10, 1.0, 1e10, 1e50, 1e100]


def test_reference_agrees_with_closed_forms():
    # guard the quadrature reference itself
    for z in [-5.0, -2.0, -0.5, 0.0, 0.5, 3.0]:
        direct = math.log(z * norm.cdf(z) + norm.pdf(z))
        assert abs(_reference_log_h(z) - direct) < 1e-12
    for z in [-40.0, -100.0, -1e3]:
        assert abs(_reference_log_h(z) - _asymptotic_log_h(z)) < 1e-15 * z * z


def test_log_ei_is_accurate_across_z_and_value_scales():
    posterior = _posterior(UNIT)
    reference = np.array([_reference_log_h(z) for z in Z_GRID])
    for sigma in SIGMAS:
        # mean = z sigma, var = sigma^2, best_f = 0; no variance floor, so the
        # tiny scales are not clipped (the floor is the only scale-dependent part)
        X = np.stack([Z_GRID * sigma, np.full_like(Z_GRID, sigma**2)], axis=1)
        log_values = np.asarray(evaluate(log_ei, posterior, X, best_f=0.0, min_var=0.0))
        expected = reference + math.log(sigma)
        assert np.all(np.isfinite(log_values))
        np.testing.assert_allclose(log_values, expected, rtol=1e-13, atol=1e-11)
        # EI itself wherever it is a normal float: relative accuracy
        values = np.asarray(evaluate(ei, posterior, X, best_f=0.0, min_var=0.0))
        normal = expected > math.log(np.finfo(float).tiny)
        np.testing.assert_allclose(
            values[normal], np.exp(expected[normal]), rtol=1e-11, atol=0
        )
        assert np.all(values[~normal] < 1e-300)


def test_log_ei_where_ei_underflows_matches_the_asymptotic_series():
    posterior = _posterior(UNIT)
    z = np.array([-40.0, -75.0, -100.0, -150.0, -1e3, -1e5, -1e10, -1e50, -1e100])
    X = np.stack([z, np.ones_like(z)], axis=1)
    assert np.all(np.asarray(evaluate(ei, posterior, X, best_f=0.0)) == 0.0)
    log_values = np.asarray(evaluate(log_ei, posterior, X, best_f=0.0))
    expected = np.array([_asymptotic_log_h(v) for v in z])
    np.testing.assert_allclose(log_values, expected, rtol=1e-14, atol=1e-12)


def test_log_ei_is_finite_monotone_with_finite_gradients():
    posterior = _posterior(UNIT)
    z = np.concatenate([-np.logspace(100, -3, 400), [0.0], np.logspace(-3, 100, 400)])
    # dense around the branch switches at z = -1 and z = -100
    z = np.sort(np.concatenate([z, -1 + np.linspace(-1e-3, 1e-3, 41)]))
    z = np.sort(np.concatenate([z, -100 + np.linspace(-1e-3, 1e-3, 41)]))
    X = jnp.asarray(np.stack([z, np.ones_like(z)], axis=1))
    values, grads = map(
        np.asarray, bind(log_ei, posterior, best_f=0.0).value_and_grad(X)
    )
    np.testing.assert_allclose(
        values, evaluate(log_ei, posterior, X, best_f=0.0), rtol=1e-15
    )
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads))
    assert np.all(np.diff(values) > 0)
    assert np.all(grads[:, 0] > 0)  # increasing in the mean
    # d log EI / d mu = Phi(z) / (sigma h(z)); reference for |z| <= 1e3
    moderate = np.abs(z) <= 1e3
    expected = np.exp(
        special.log_ndtr(z[moderate])
        - np.array([_reference_log_h(v) for v in z[moderate]])
    )
    np.testing.assert_allclose(grads[moderate, 0], expected, rtol=1e-8)


@pytest.mark.parametrize("acq, options", [
    (pi, {}), (ei, {"xi": 0.01}), (log_ei, {}), (ucb, {"beta": 2.0}),
    (ucb, {"t": 5.0, "size": 100}), (ucb, {"t": 5.0}),
])  # fmt: skip
def test_gradients_are_finite_and_match_finite_differences(acq, options):
    _assert_gradients_match_finite_differences(acq, _posterior(), **options)


def _assert_gradients_match_finite_differences(acq, posterior, **options):
    # the candidates include var = 0 (floored) and var = 1e-4
    _, grads = bind(acq, posterior, **options).value_and_grad(jnp.asarray(CANDIDATES))
    grads = np.asarray(grads)
    assert np.all(np.isfinite(grads))
    # central differences on the candidates whose variance is not floored
    h = 1e-6
    for j in range(2):
        step = np.zeros_like(CANDIDATES)
        step[:4, j] = h
        numeric = (
            np.asarray(evaluate(acq, posterior, CANDIDATES + step, **options))
            - np.asarray(evaluate(acq, posterior, CANDIDATES - step, **options))
        ) / (2 * h)
        np.testing.assert_allclose(grads[:4, j], numeric[:4], rtol=1e-5, atol=1e-8)


def test_ucb_schedules_follow_srinivas_et_al():
    posterior = _posterior(UNIT)
    X = np.array([[0.2, 0.49], [-0.3, 2.25]])
    mu, sigma = X[:, 0], np.sqrt(X[:, 1])
    t, delta = 7.0, 0.05
    # Theorem 1: beta_t = 2 log(|D| t^2 pi^2 / (6 delta))
    beta1 = 2 * math.log(500 * t**2 * math.pi**2 / (6 * delta))
    np.testing.assert_allclose(
        evaluate(ucb, posterior, X, t=t, delta=delta, size=500),
        mu + math.sqrt(beta1) * sigma,
        rtol=1e-13,
    )
    # Theorem 2 on [0, r]^d with d = 2
    a, b, r, d = 2.0, 3.0, 1.0, 2
    beta2 = 2 * math.log(2 * t**2 * math.pi**2 / (3 * delta)) + 2 * d * math.log(
        t**2 * d * b * r * math.sqrt(math.log(4 * d * a / delta))
    )
    np.testing.assert_allclose(
        evaluate(ucb, posterior, X, t=t, delta=delta, a=a, b=b),
        mu + math.sqrt(beta2) * sigma,
        rtol=1e-13,
    )
    np.testing.assert_allclose(ucb_beta(t, delta=delta, d=d, a=a, b=b), beta2)
    with pytest.raises(ValueError, match="ucb needs beta"):
        evaluate(ucb, posterior, X)
    with pytest.raises(ValueError, match="size= .* or d="):
        ucb_beta(1.0)


def test_float_options_do_not_recompile(compile_counter):
    posterior = _posterior()
    per_sample(ei, posterior, CANDIDATES, best_f=0.3, xi=0.0)
    per_sample(ucb, posterior, CANDIDATES, t=1.0, size=100)
    with compile_counter.measure():
        a = per_sample(ei, posterior, CANDIDATES, best_f=0.7, xi=0.1)
        b = per_sample(ucb, posterior, CANDIDATES, t=2.0, size=100)
    assert compile_counter.count == 0
    assert a.shape == b.shape == (3, len(CANDIDATES))


def test_marginal_incumbent_is_the_best_mixture_mean_for_every_sample():
    posterior = _posterior()
    a, b = (np.array(SAMPLES[k]) for k in "ab")
    # the mixture's mean at each observed input, its best over the observed rows
    best = max(np.mean(a * x[0] + b) for x in X_OBS)
    for acq in (pi, ei, log_ei):
        values = np.asarray(
            per_sample(acq, posterior, CANDIDATES, incumbent="marginal")
        )
        expected = per_sample(acq, posterior, CANDIDATES, best_f=best)
        np.testing.assert_allclose(values, expected, rtol=1e-13)
    for i in range(3):
        mu, sigma, _ = _moments(i, CANDIDATES, best)
        z = (mu - best) / sigma
        direct = z > -5
        np.testing.assert_allclose(
            np.asarray(per_sample(ei, posterior, CANDIDATES, incumbent="marginal"))[i][
                direct
            ],
            ((mu - best) * norm.cdf(z) + sigma * norm.pdf(z))[direct],
            rtol=1e-12,
        )
    with pytest.raises(ValueError, match="incumbent must be one of.*'best'"):
        evaluate(ei, posterior, CANDIDATES, incumbent="best")


def test_observed_incumbent_is_the_best_observed_value_for_every_sample():
    # padded rows (y = 0) lie above every observed value: the mask must hold
    data = ppbo.Dataset(np.asarray(X_OBS), np.array([-0.4, -0.2, -0.9]))
    samples = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in SAMPLES.items()}
    posterior = ppbo.Posterior(FAKE, samples, data, method="fake")
    for acq in (pi, ei, log_ei):
        np.testing.assert_allclose(
            per_sample(acq, posterior, CANDIDATES, incumbent="observed"),
            per_sample(acq, posterior, CANDIDATES, best_f=-0.2),
            rtol=1e-13,
        )


def _noise(params, X):
    return jnp.full(X.shape[0], params["n"])


NOISY = ppbo.Surrogate(model=_never_run, predict=_predict, noise=_noise, name="noisy")
# the best mean (x0 = -0.1) has the widest interval: its lower bound is not the
# best, so the effective best is another point for every sample
X_NOISY = np.array([[-0.1, 0.9], [-0.2, 0.01], [-0.5, 0.1]])


def _noisy_posterior():
    samples = SAMPLES | {"n": [0.04, 0.01, 0.2]}
    samples = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in samples.items()}
    return ppbo.Posterior(NOISY, samples, ppbo.Dataset(X_NOISY, np.zeros(3)))


def test_log_aei_is_ei_at_the_effective_best_times_huangs_factor():
    posterior = _noisy_posterior()
    values = np.asarray(per_sample(log_aei, posterior, CANDIDATES))
    for i in range(3):
        a, b, c = (SAMPLES[k][i] for k in "abc")
        n = float(posterior.samples["n"][i])
        mu_obs, s_obs = a * X_NOISY[:, 0] + b, np.sqrt(c * X_NOISY[:, 1])
        best = mu_obs[np.argmax(mu_obs - s_obs)]  # Huang et al.'s c = 1
        assert best < mu_obs.max()
        mu, sigma, _ = _moments(i, CANDIDATES, best)
        z = (mu - best) / sigma
        expected_ei = (mu - best) * norm.cdf(z) + sigma * norm.pdf(z)
        r = np.sqrt(sigma**2 + n)
        factor = 1.0 - np.sqrt(n) / r
        # the same factor rationalised, exact where sigma^2 << n (var floored)
        exact = sigma**2 / (r * (r + np.sqrt(n)))
        np.testing.assert_allclose(factor[sigma > 1e-3], exact[sigma > 1e-3])
        factor = exact
        direct = z > -5  # where the textbook formula is itself accurate
        np.testing.assert_allclose(
            values[i][direct],
            np.log(expected_ei[direct] * factor[direct]),
            rtol=1e-10,
        )
    # finite where the variance is floored (the candidate with var = 0)
    assert np.all(np.isfinite(values))


def test_effective_best_is_the_mean_at_the_best_lower_bound():
    posterior = _noisy_posterior()
    params = {k: v[0] for k, v in posterior.samples.items()}
    sample = Sample(params, None, posterior.data, NOISY)
    assert float(effective_best_mean(sample)) == pytest.approx(-0.2, abs=1e-15)
    assert float(best_observed_mean(sample)) == pytest.approx(-0.1, abs=1e-15)
    np.testing.assert_allclose(
        per_sample(log_ei, posterior, CANDIDATES, incumbent="effective")[0],
        per_sample(log_ei, posterior, CANDIDATES, best_f=-0.2)[0],
        rtol=1e-13,
    )


def test_log_aei_gradients_match_finite_differences_and_it_needs_a_noise():
    _assert_gradients_match_finite_differences(log_aei, _noisy_posterior())
    with pytest.raises(ppbo.MissingCapabilityError, match="noise"):
        evaluate(log_aei, _posterior(), CANDIDATES)
