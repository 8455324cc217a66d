"""Predictive entropy search: derivative covariances, EP, the acquisition.

References: finite differences of the kernels of ``models/kernels.py``, numerical
integration (SciPy ``quad``) of tilted and truncated Gaussians, the Mills-ratio
series in the far tail, dense linear algebra, the GP posterior of
``models/gp.py``, and the brute-force Monte Carlo information gain of
``ppbo.acquisition.es``.
"""

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import ppbo
from ppbo.acquisition import _derivatives as derivatives
from ppbo.acquisition import bind, evaluate, per_sample
from ppbo.acquisition.es import default_grid, information_gain_terms
from ppbo.acquisition.pes import (
    condition_on_maximizers,
    expectation_propagation,
    pes,
    pes_nb_posterior,
    predictive_variances,
    probit_moments,
    step_moments,
    variance_below_maximum,
)
from ppbo.inference._mcmc import prepare_cache
from ppbo.models import gp
from ppbo.models.kernels import KERNELS
from ppbo.optimize import condition_on_pending

# one surrogate object per kernel: compiled code is cached per surrogate; the
# squared-exponential one has a linear mean (its gradient enters the conditions)
SURROGATES = {
    "matern52": gp.surrogate(),
    "rbf": gp.surrogate(kernel="rbf", mean="linear"),
}
PARAMS = {"lengthscale": [0.3, 0.4], "outputscale": 1.3, "noise": 1e-2, "mean": 0.1}
_RNG = np.random.default_rng(0)
X8 = _RNG.random((8, 2))
Y8 = np.sin(3 * X8[:, 0]) + X8[:, 1]
SMALL = {"num_features": 64, "num_candidates": 64, "num_steps": 10}
M = 8  # candidate sets have M rows (compiled code is cached per shape)


def _fixed(kernel="matern52", X=X8, y=Y8, params=PARAMS, capacity=None):
    data = ppbo.Dataset(X, y, capacity=capacity)
    return ppbo.fit(SURROGATES[kernel], data, ppbo.Fixed(params), jax.random.key(0))


def _sampled(kernel="matern52"):
    """A three-sample posterior with different lengthscales, scales and noise."""
    samples = {
        "lengthscale": jnp.array([[0.3, 0.4], [0.5, 0.2], [0.25, 0.6]]),
        "outputscale": jnp.array([1.3, 0.7, 2.0]),
        "noise": jnp.array([1e-2, 1e-4, 3e-2]),
        "mean": jnp.array([0.1, -0.3, 0.4]),
    }
    if kernel == "rbf":
        samples["mean_weights"] = jnp.array([[0.5, -1.0], [1.5, 0.2], [-0.7, 0.9]])
    data = ppbo.Dataset(X8, Y8)
    cache = prepare_cache(SURROGATES[kernel], samples, data)
    return ppbo.Posterior(SURROGATES[kernel], samples, data, cache=cache)


def _candidates(seed):
    return np.random.default_rng(seed).random((M, 2))


# -- derivative covariances ---------------------------------------------------------


def _stencil(z, h):
    """Points and weights of central differences for (f, grad f, hess f) at z."""
    d = len(z)
    E = np.eye(d) * h
    rows = [{tuple(z): 1.0}]
    for i in range(d):
        rows.append({tuple(z + E[i]): 0.5 / h, tuple(z - E[i]): -0.5 / h})
    for i, j in itertools.product(range(d), repeat=2):
        row = {}
        for si, sj in itertools.product((1, -1), repeat=2):
            point = tuple(z + si * E[i] + sj * E[j])
            row[point] = row.get(point, 0.0) + si * sj / (4 * h * h)
        rows.append(row)
    points = sorted({p for row in rows for p in row})
    where = {p: k for k, p in enumerate(points)}
    W = np.zeros((len(rows), len(points)))
    for r, row in enumerate(rows):
        for p, w in row.items():
            W[r, where[p]] += w
    return np.array(points), W


def _finite_difference_covariance(kernel, lengthscale, outputscale, a, b, h):
    """Nested central differences of the model's kernel, and a rounding bound."""
    base = KERNELS[kernel](jnp.asarray(lengthscale))
    Pa, Wa = _stencil(a, h)
    Pb, Wb = _stencil(b, h)
    K = outputscale * np.asarray(
        jax.vmap(lambda p: jax.vmap(lambda q: base.evaluate(p, q))(Pb))(Pa)
    )
    rounding = 8 * np.finfo(float).eps * (np.abs(Wa) @ np.abs(K) @ np.abs(Wb).T)
    return Wa @ K @ Wb.T, rounding


@partial(jax.jit, static_argnums=0)
def _covariance(kernel, lengthscale, outputscale, a, b):
    k = derivatives.kernel_function(KERNELS[kernel], lengthscale, outputscale)
    return derivatives.derivative_covariance(k, a, b)


@partial(jax.jit, static_argnums=0)
def _cross(kernel, lengthscale, outputscale, a, b):
    k = derivatives.kernel_function(KERNELS[kernel], lengthscale, outputscale)
    return derivatives.cross_covariance(k, a, b)


@pytest.mark.parametrize("kernel", ["matern52", "rbf"])
@pytest.mark.parametrize("coincident", [False, True], ids=["apart", "same-point"])
def test_derivative_covariances_match_finite_differences(kernel, coincident):
    # value, gradient and Hessian at a against the same at b: gradient-value,
    # Hessian-value, gradient-gradient, ..., Hessian-Hessian (4th derivatives)
    lengthscale, outputscale = np.array([0.4, 0.7]), 1.3
    a = np.array([0.3, 0.6])
    b = a.copy() if coincident else np.array([0.5, 0.45])
    C = np.asarray(_covariance(kernel, lengthscale, outputscale, a, b))
    h = 1e-3
    coarse, round_coarse = _finite_difference_covariance(
        kernel, lengthscale, outputscale, a, b, h
    )
    fine, round_fine = _finite_difference_covariance(
        kernel, lengthscale, outputscale, a, b, h / 2
    )
    # truncation error c h^p with p >= 1 (p = 1 for Matérn-5/2's |r|^5 term at
    # r = 0, p = 2 elsewhere): the error at h/2 is at most |F(h) - F(h/2)|
    tolerance = 1.5 * np.abs(coarse - fine) + 2 * (round_coarse + round_fine)
    assert np.all(np.abs(fine - C) <= tolerance)
    assert np.all(np.isfinite(C))
    if coincident:
        # the joint covariance of (f, grad f, hess f) at one point
        np.testing.assert_allclose(C, C.T, atol=1e-12 * np.abs(C).max())
        assert np.linalg.eigvalsh(C).min() > -1e-10 * np.abs(C).max()
    # cross_covariance is the first row
    row = _cross(kernel, lengthscale, outputscale, a, b)
    np.testing.assert_allclose(row, C[0], rtol=1e-12, atol=1e-12)


def test_matern52_fourth_derivative_at_zero_is_the_series_coefficient():
    # k(r) = 1 - 5 r^2 / 6 + 25 r^4 / 24 - ...: d^4 k / dx^4 = 25 / l^4 at r = 0
    C = _covariance("matern52", jnp.array([0.5]), 2.0, jnp.zeros(1), jnp.zeros(1))
    np.testing.assert_allclose(C[2, 2], 2.0 * 25 / 0.5**4, rtol=1e-12)
    np.testing.assert_allclose(C[1, 1], 2.0 * 5 / 3 / 0.5**2, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["matern32", "matern12", "linear"])
def test_kernels_without_second_derivatives_are_refused(kernel):
    surrogate = gp.surrogate(kernel=kernel)
    samples = {k: jnp.asarray(v)[None] for k, v in PARAMS.items()}
    posterior = ppbo.Posterior(surrogate, samples, ppbo.Dataset(X8, Y8))
    missing = "gp_derivatives" if kernel != "linear" else "gp"
    with pytest.raises(ppbo.MissingCapabilityError, match=f"capability '{missing}'"):
        evaluate(pes, posterior, X8[:2], key=jax.random.key(0), x_star=X8[:1])
    if kernel != "linear":
        with pytest.raises(ValueError, match="not twice differentiable"):
            derivatives.kernel_function(KERNELS[kernel], jnp.ones(2), 1.0)


# -- one-dimensional moment matching -------------------------------------------------


def _quad_moments(log_weight, lower, upper, center, scale):
    """log Z, mean and variance of exp(log_weight) by adaptive quadrature."""
    points = [center - 3 * scale, center, center + 3 * scale]
    points = [p for p in points if lower < p < upper]

    def moment(k):
        value, _ = integrate.quad(
            lambda t: t**k * np.exp(log_weight(t)),
            lower,
            upper,
            points=points or None,
            epsabs=0.0,
            epsrel=1e-12,
            limit=200,
        )
        return value

    z = moment(0)
    mean = moment(1) / z
    return np.log(z), mean, moment(2) / z - mean**2


@pytest.mark.parametrize("shift", [-6.0, -2.0, 0.0, 1.5, 6.0])
def test_probit_moments_match_quadrature(shift):
    mean, var, noise = 0.4, 0.7, 0.05
    threshold = mean - shift * np.sqrt(var + noise)  # alpha = shift

    def log_weight(f):
        return stats.norm.logpdf(f, mean, np.sqrt(var)) + stats.norm.logcdf(
            (f - threshold) / np.sqrt(noise)
        )

    sd = np.sqrt(var)
    expected = _quad_moments(log_weight, mean - 40 * sd, mean + 40 * sd, mean, sd)
    got = probit_moments(mean, var, threshold, noise)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("mean", [-3.0, -0.5, 0.0, 1.0, 4.0])
def test_step_moments_match_quadrature(mean):
    var = 0.8

    def log_weight(h):
        return stats.norm.logpdf(h, mean, np.sqrt(var))

    sd = np.sqrt(var)
    expected = _quad_moments(log_weight, min(mean, 0.0) - 40 * sd, 0.0, mean, sd)
    np.testing.assert_allclose(step_moments(mean, var), expected, rtol=1e-7)


@pytest.mark.parametrize("alpha", [-40.0, -1e3, -1e4])
def test_step_moments_in_the_far_tail_match_the_asymptotic_series(alpha):
    # N(x, 1) truncated to h <= 0 with x = -alpha: almost all mass is removed.
    # With the Mills ratio series (Abramowitz and Stegun 26.2.12) the mean is
    # x - phi/Phi = -(1/x - 2/x^3 + 10/x^5 - 74/x^7 + ...) and the variance
    # 1/x^2 - 6/x^4 + 50/x^6 - 518/x^8 + ...; truncation error < 1e-9 relative
    x = -alpha
    mean = -(1 / x - 2 / x**3 + 10 / x**5 - 74 / x**7)
    var = 1 / x**2 - 6 / x**4 + 50 / x**6 - 518 / x**8
    _, got_mean, got_var = step_moments(x, 1.0)
    np.testing.assert_allclose([got_mean, got_var], [mean, var], rtol=1e-8)


@pytest.mark.parametrize("correlation", [0.0, 0.6, 0.98, -0.5])
@pytest.mark.parametrize("offset", [-2.0, 0.0, 1.5])
def test_variance_below_maximum_matches_quadrature(correlation, offset):
    # Var[f | f < g] for (f, g) bivariate normal: integrate f^k p(f) Pr(g > f | f)
    mean, var, mean_star, var_star = 0.3, 0.5, 0.3 + offset, 0.8
    cov = correlation * np.sqrt(var * var_star)
    cond_sd = np.sqrt(var_star - cov**2 / var)

    def log_weight(f):
        cond_mean = mean_star + cov / var * (f - mean)
        return stats.norm.logpdf(f, mean, np.sqrt(var)) + stats.norm.logcdf(
            (cond_mean - f) / cond_sd
        )

    sd = np.sqrt(var)
    _, _, expected = _quad_moments(log_weight, mean - 40 * sd, mean + 40 * sd, mean, sd)
    got = variance_below_maximum(mean, var, mean_star, var_star, cov)
    np.testing.assert_allclose(got, expected, rtol=1e-7)


# -- expectation propagation ------------------------------------------------------


def test_ep_fixed_point_matches_tilted_moments_and_dense_algebra():
    # z = (f*, h_11, h_22) with a correlated prior; at the fixed point every
    # marginal equals the moments of its cavity times its factor (by quadrature)
    A = np.array([[1.0, 0.5, -0.3], [0.2, 1.2, 0.4], [-0.4, 0.1, 0.9]])
    V0 = A @ A.T
    m0 = np.array([0.2, 0.8, -0.1])
    y_max, noise = 0.9, 0.05
    result = expectation_propagation(m0, V0, y_max, noise, tolerance=1e-12)
    assert bool(result.converged)
    assert np.all(np.asarray(result.site_precision) >= 0)
    # q = N(m0, V0) times the Gaussian sites, by dense linear algebra
    tau, nu = np.asarray(result.site_precision), np.asarray(result.site_shift)
    V = np.linalg.inv(np.linalg.inv(V0) + np.diag(tau))
    np.testing.assert_allclose(result.cov, V, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        result.mean, V @ (np.linalg.solve(V0, m0) + nu), rtol=1e-8, atol=1e-12
    )
    m, v = np.asarray(result.mean), np.diag(V)
    for j in range(3):
        v_cav = 1.0 / (1.0 / v[j] - tau[j])
        m_cav = v_cav * (m[j] / v[j] - nu[j])
        sd = np.sqrt(v_cav)
        if j == 0:

            def log_weight(f, m_cav=m_cav, sd=sd):
                return stats.norm.logpdf(f, m_cav, sd) + stats.norm.logcdf(
                    (f - y_max) / np.sqrt(noise)
                )

            upper = m_cav + 40 * sd
        else:

            def log_weight(h, m_cav=m_cav, sd=sd):
                return stats.norm.logpdf(h, m_cav, sd)

            upper = 0.0
        lower = min(m_cav, 0.0) - 40 * sd
        _, mean_j, var_j = _quad_moments(log_weight, lower, upper, m_cav, sd)
        np.testing.assert_allclose([m[j], v[j]], [mean_j, var_j], rtol=1e-7)


def _check_state_and_values(posterior, x_star, X):
    state = condition_on_maximizers(posterior, x_star)
    for leaf in jax.tree.leaves(state):
        assert np.all(np.isfinite(np.asarray(leaf, dtype=float)))
    assert np.all(np.asarray(state.ep.converged))
    var, given = predictive_variances(posterior, state, X)
    assert np.all(np.asarray(given) <= np.asarray(var))
    bound = bind(pes, posterior, key=jax.random.key(0), x_star=x_star)
    values, grads = bound.value_and_grad(jnp.asarray(X))
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads))
    assert np.all(np.asarray(values) >= -1e-12)


def test_ep_stays_finite_on_ill_conditioned_inputs():
    X = X8.copy()
    X[1] = X[0] + 1e-9  # near-duplicate inputs
    X[2] = X[3]  # an exact duplicate
    candidates = np.concatenate([X[:4], _RNG.random((M - 4, 2))])
    tiny_noise = dict(PARAMS, noise=1e-10)
    long_scales = dict(PARAMS, lengthscale=[30.0, 50.0], noise=1e-8)
    for params in (PARAMS, tiny_noise, long_scales):
        posterior = _fixed(X=X, y=Y8, params=params)
        # x* on an observed input, next to one, and at a corner of the cube
        for x_star in (X[:1], X[:1] + 1e-7, np.ones((1, 2))):
            _check_state_and_values(posterior, x_star, candidates)


# -- the acquisition ------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["matern52", "rbf"])
def test_conditioning_on_the_maximiser_only_reduces_the_variance(kernel):
    posterior = _sampled(kernel)
    X = np.concatenate([_RNG.random((200, 2)), X8])
    if kernel == "matern52":  # x* sampled; the property holds for any x*
        bound = bind(pes, posterior, key=jax.random.key(1), **SMALL)
    else:
        x_star = np.array([[0.2, 0.9], [0.5, 0.5], [0.95, 0.1]])
        bound = bind(pes, posterior, key=jax.random.key(1), x_star=x_star)
    state = bound.aux
    X[:3] = np.asarray(state.x_star)  # at x* and next to it
    X[3:6] = np.asarray(state.x_star) + 1e-4
    var, given = predictive_variances(posterior, state, X)
    # v_n(x) is the GP's predictive variance
    _, var_gp = posterior.predict(X)
    np.testing.assert_allclose(var, var_gp, rtol=1e-8, atol=1e-12)
    assert np.all(np.asarray(given) <= np.asarray(var) * (1 + 1e-12))
    assert np.all(np.asarray(given) >= 0)
    values = np.asarray(bound(jnp.asarray(X)))
    assert np.all(np.isfinite(values)) and np.all(values >= -1e-12)
    assert values.max() > 0.05  # informative somewhere
    assert np.all(np.asarray(state.ep.converged))
    # C1 in the EP posterior's mean: each Hessian diagonal marginal matches a
    # Gaussian truncated to h <= 0, so its mean is negative
    assert np.all(np.asarray(state.ep.mean[:, 1:]) < 0)
    if kernel == "matern52":  # C2 at sampled maximisers: f(x*) about y_max or more
        assert np.all(np.asarray(state.ep.mean[:, 0]) > Y8.max() - 0.5)


def test_evaluate_is_the_mean_of_the_per_sample_values():
    posterior = _sampled()
    X = np.concatenate([_RNG.random((200, 2)), X8])
    options = dict(key=jax.random.key(2), **SMALL)
    values = per_sample(pes, posterior, X, **options)
    assert values.shape == (3, len(X))
    np.testing.assert_allclose(
        evaluate(pes, posterior, X, **options), np.mean(values, axis=0), rtol=1e-12
    )


def test_pes_nb_is_pes_at_the_posterior_mean_of_the_hyperparameters():
    posterior = _sampled()
    mean_params = {
        name: np.mean(np.asarray(value), axis=0)
        for name, value in posterior.samples.items()
    }
    nb = pes_nb_posterior(posterior)
    fixed = _fixed(params=mean_params)
    assert nb.num_samples == 1 and nb.method == fixed.method
    for name, value in mean_params.items():
        np.testing.assert_allclose(nb.samples[name][0], value, rtol=1e-14)
    leaves = zip(jax.tree.leaves(nb.cache), jax.tree.leaves(fixed.cache), strict=True)
    for a, b in leaves:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    X = _candidates(1)
    options = dict(key=jax.random.key(3), x_star=np.array([[0.4, 0.7]]))
    np.testing.assert_allclose(
        evaluate(pes, nb, X, **options), evaluate(pes, fixed, X, **options), rtol=1e-10
    )
    # with a single sample, PES-NB is PES: the posterior is unchanged
    single = pes_nb_posterior(fixed)
    for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(fixed), strict=True):
        np.testing.assert_array_equal(a, b)


def test_gradients_match_finite_differences():
    posterior = _fixed()
    bound = bind(pes, posterior, key=jax.random.key(4), x_star=np.array([[0.45, 0.8]]))
    X = _candidates(2)
    _, grads = bound.value_and_grad(jnp.asarray(X))
    h = 1e-6
    fd = np.zeros_like(X)
    for j in range(2):
        step = np.zeros_like(X)
        step[:, j] = h
        up = np.asarray(bound.reduced(jnp.asarray(X + step)))
        down = np.asarray(bound.reduced(jnp.asarray(X - step)))
        fd[:, j] = (up - down) / (2 * h)
    # central differences: O(h^2) truncation, rounding ~ eps / h relative
    np.testing.assert_allclose(grads, fd, rtol=1e-6, atol=1e-8)


def test_padded_rows_change_nothing():
    tight = _fixed()
    padded = _fixed(capacity=16)
    assert padded.data.capacity == 16 and tight.data.capacity == 8
    x_star = np.array([[0.45, 0.8]])
    X = _candidates(3)
    options = dict(key=jax.random.key(5), x_star=x_star)
    np.testing.assert_allclose(
        evaluate(pes, padded, X, **options),
        evaluate(pes, tight, X, **options),
        rtol=1e-10,
    )
    a = condition_on_maximizers(tight, x_star).ep
    b = condition_on_maximizers(padded, x_star).ep
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-10)
    np.testing.assert_allclose(a.cov, b.cov, rtol=1e-10, atol=1e-14)


def _grown(n):
    X = np.concatenate([X8, _RNG.random((n - 8, 2))])
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    return _fixed(X=X, y=y, capacity=16)


def test_no_recompilation_between_binds_in_one_bucket(compile_counter):
    first, second = _grown(9), _grown(10)
    X = jnp.asarray(_candidates(4))

    def step(posterior, key):
        bound = bind(pes, posterior, key=key, **SMALL)
        values, grads = bound.value_and_grad(X)
        return np.asarray(values), np.asarray(grads), np.asarray(bound.reduced(X))

    step(first, jax.random.key(6))
    with compile_counter.measure():
        values, grads, _ = step(second, jax.random.key(7))
    assert compile_counter.count == 0
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads))


def test_pending_points_are_conditioned_on():
    # Kriging believer: optimize_acquisition adds the pending point to the data
    # before PES's prepare, so the point itself has little left to tell
    posterior = _grown(10)
    options = dict(num_raw=M, num_restarts=M, max_iterations=10, **SMALL)
    X, values = ppbo.optimize_acquisition(
        pes, posterior, jax.random.key(8), q=2, **options
    )
    assert X.shape == (2, 2) and np.all(np.isfinite(values))
    assert np.linalg.norm(X[0] - X[1]) > 1e-3
    busy = condition_on_pending(posterior, X[:1])
    candidates = np.concatenate([X[:1], _candidates(5)[1:]])
    key = jax.random.key(9)
    before = float(evaluate(pes, posterior, candidates, key=key, **SMALL)[0])
    after = float(evaluate(pes, busy, candidates, key=key, **SMALL)[0])
    # a second observation at a point is worth much less than the first
    assert before > 0.05 and after < 0.5 * before


@pytest.mark.slow
def test_pes_tracks_the_monte_carlo_information_gain_in_one_dimension():
    # brute force (the PES paper's "RS"): functions drawn on a dense grid, grouped
    # by their argmax; PES averaged over 32 sampled maximisers of one GP with a
    # squared-exponential kernel and a linear mean
    X = np.array([[0.1], [0.35], [0.6], [0.9]])
    y = np.array([0.2, 1.0, -0.3, 0.5])
    params = {
        "lengthscale": [0.15],
        "outputscale": 1.0,
        "noise": 1e-3,
        "mean": 0.0,
        "mean_weights": [1.5],  # a trend: the mean's gradient matters at x*
    }
    posterior = _fixed("rbf", X=X, y=y, params=params)
    copies = 32

    def repeat(a):
        return jnp.repeat(a, copies, axis=0)

    replicated = ppbo.Posterior(
        posterior.surrogate,
        jax.tree.map(repeat, posterior.samples),
        posterior.data,
        cache=jax.tree.map(repeat, posterior.cache),
    )
    grid = np.linspace(0.0, 1.0, 101)[:, None]
    values = np.asarray(
        evaluate(pes, replicated, grid, key=jax.random.key(1), num_candidates=256)
    )
    terms = information_gain_terms(
        jax.random.key(4),
        posterior,
        grid,
        grid=default_grid(1, 256),
        num_functions=32768,
    )
    truth = np.asarray(terms.information_gain[0])
    se = np.asarray(terms.standard_error[0])
    assert np.corrcoef(values, truth)[0, 1] >= 0.9
    # the maximisers agree: the truth at PES's maximiser is within Monte Carlo
    # error of the truth's maximum (three standard errors of a difference)
    best = int(np.argmax(values))
    assert truth[best] >= truth.max() - 3 * np.sqrt(2) * se.max()
    assert abs(grid[best, 0] - grid[np.argmax(truth), 0]) <= 0.05
