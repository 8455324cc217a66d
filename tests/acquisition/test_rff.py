"""Random-Fourier-feature kernels and posterior sample paths.

References: the exact kernels of ``models/kernels.py``, the GP posterior of
``models/gp.py`` (``predict_joint``), the Bayesian-linear-regression posterior in
closed form (NumPy), and exact joint GP draws on a dense grid.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.acquisition import rff
from ppbo.models import gp, multitask_gp
from ppbo.models.kernels import KERNELS, Linear, Matern52

KERNEL_NAMES = ("matern12", "matern32", "matern52", "rbf")
LENGTHSCALE = np.array([0.3, 0.7, 1.5])
OUTPUTSCALE = 1.7
_RNG = np.random.default_rng(0)
# pairs at many distances, including x == x' (k = 1, the largest feature variance)
X1 = _RNG.random((8, 3))
X2 = np.concatenate([X1[:1], X1[1:] + 0.4 * _RNG.standard_normal((7, 3))])


def _kernel_and_se(name, num_features):
    """Exact kernel values of the pairs and the Monte Carlo standard error.

    Each term of ``phi(x)^T phi(x')`` is ``2 s cos(w x + b) cos(w x' + b) =
    s [cos(w (x - x')) + cos(w (x + x') + 2 b)]`` (``s`` the outputscale); the two
    parts are uncorrelated (average over b), with variances
    ``s^2 (E cos^2(w D) - k^2) = s^2 ((1 + k(2D)) / 2 - k(D)^2)`` and ``s^2 / 2``, so
    the estimate's standard error is ``s sqrt((1 + k(2D)/2 - k(D)^2) / M)``.
    """
    base = KERNELS[name](jnp.asarray(LENGTHSCALE))
    k = np.asarray(jax.vmap(base.evaluate)(X1, X2))
    k2 = np.asarray(jax.vmap(base.evaluate)(2 * X1, 2 * X2))
    se = OUTPUTSCALE * np.sqrt((1 + k2 / 2 - k**2) / num_features)
    return OUTPUTSCALE * k, se


M_LARGE = 16_000
M0 = 500
NUM_SEEDS = 200


@functools.cache
def _approximation_errors(name):
    """Errors ``phi(x)^T phi(x') - k(x, x')`` of the pairs: with M0 = 500 and 4 M0
    features for 200 seeds, shape (200, 2, 8), and with 16000 features, (8,).

    Each seed draws 4 M0 features; the estimate with the first M0 of them is
    ``4 sum_{j <= M0} phi_j(x) phi_j(x')``. One compilation per kernel.
    """

    def estimate(key, num_features):
        features = rff.sample_features(
            key, KERNELS[name], jnp.asarray(LENGTHSCALE), OUTPUTSCALE, num_features
        )
        phi1 = rff.evaluate_features(features, jnp.asarray(X1))
        phi2 = rff.evaluate_features(features, jnp.asarray(X2))
        return phi1 * phi2  # (8, num_features)

    def both(key):
        products = estimate(key, 4 * M0)
        return jnp.stack([4 * products[:, :M0].sum(1), products.sum(1)])

    @jax.jit
    def run(keys, key_large):
        return jax.lax.map(both, keys), estimate(key_large, M_LARGE).sum(1)

    keys = jax.random.split(jax.random.key(11), NUM_SEEDS)
    small, large = run(keys, jax.random.key(3))
    k = _kernel_and_se(name, 1)[0]
    return np.asarray(small) - k, np.asarray(large) - k


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_features_approximate_the_kernel_within_standard_errors(name):
    _, se = _kernel_and_se(name, M_LARGE)
    error = _approximation_errors(name)[1]
    z = error / se
    assert np.max(np.abs(z)) < 4.5, z
    # the errors are of the size the derivation predicts, not far smaller
    assert np.max(np.abs(error)) > 0.1 * np.max(se)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_feature_error_halves_when_features_quadruple(name):
    errors = _approximation_errors(name)[0]
    for i, M in enumerate((M0, 4 * M0)):
        # standardised errors have unit root mean square (200 x 8 values)
        rms_z = np.sqrt(np.mean((errors[:, i] / _kernel_and_se(name, M)[1]) ** 2))
        assert 0.85 < rms_z < 1.15, (M, rms_z)
    rms = np.sqrt(np.mean(errors**2, axis=(0, 2)))
    assert rms[1] / rms[0] == pytest.approx(0.5, abs=0.08)


def test_spectral_smoothness_comes_from_the_kernel_class():
    assert rff.spectral_smoothness(KERNELS["matern12"]) == 0.5
    assert rff.spectral_smoothness(KERNELS["matern32"]) == 1.5
    assert rff.spectral_smoothness(Matern52) == 2.5
    assert rff.spectral_smoothness(KERNELS["rbf"]) == np.inf

    class Matern2:  # a smoothness whose Student-t density is not sampled here
        smoothness = 2.0

    with pytest.raises(ValueError, match="nu=2.0"):
        rff.spectral_smoothness(Matern2)


def _theta_moments_exact(Phi, r, noise, mask):
    """Bayesian linear regression with per-row noise variances ``noise`` (n,)."""
    Phi = np.where(mask[:, None], Phi, 0.0)
    r = np.where(mask, r, 0.0)
    A = Phi.T @ (Phi / noise[:, None]) + np.eye(Phi.shape[1])
    cov = np.linalg.inv(A)
    return cov @ Phi.T @ (r / noise), cov


@pytest.mark.parametrize("solver", [rff._theta_function_space, rff._theta_weight_space])
def test_theta_draws_have_the_linear_regression_posterior(solver):
    rng = np.random.default_rng(4)
    n, M, num = 8, 6, 20_000
    mask = np.arange(n) < 5
    Phi = np.where(mask[:, None], rng.standard_normal((n, M)) / 2, 0.0)
    r = np.where(mask, rng.standard_normal(n), 0.0)
    # heteroscedastic: one noise variance per observation (padded rows: 1)
    noise = np.where(mask, 0.05 + 0.5 * rng.random(n), 1.0)
    mean, cov = _theta_moments_exact(Phi, r, noise, mask)
    # the solvers take the standard normals they transform, M + n of them
    normals = jax.random.normal(jax.random.key(5), (num, M + n))
    draws = np.asarray(
        jax.vmap(
            lambda e: solver(
                e, jnp.asarray(Phi), jnp.asarray(r), jnp.asarray(noise), mask
            )
        )(normals)
    )
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4.5 * sd / np.sqrt(num))
    cov_se = np.sqrt((np.outer(sd**2, sd**2) + cov**2) / num)
    np.testing.assert_array_less(np.abs(np.cov(draws.T) - cov), 4.5 * cov_se)


@pytest.fixture(scope="module")
def se_posterior():
    """Squared-exponential GP at fixed hyperparameters; 6 points padded to 16."""
    rng = np.random.default_rng(1)
    X = rng.random((6, 2))
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    data = ppbo.Dataset(X, y, capacity=16)
    surrogate = gp.surrogate(kernel="rbf", mean="constant")
    params = {"lengthscale": [0.3, 0.5], "outputscale": 1.3, "noise": 1e-3, "mean": 0.2}
    return ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))


@pytest.fixture(scope="module")
def se_paths(se_posterior):
    """1000 sample paths of ``se_posterior`` with 2000 features each."""
    paths = rff.sample_posterior_paths(jax.random.key(1), se_posterior, 1000, 2000)
    return jax.tree.map(lambda a: a[0], paths)


def test_sample_paths_have_the_gp_posterior_mean_and_covariance(se_posterior, se_paths):
    posterior = se_posterior
    X_data, _, _ = posterior.data.unpadded()
    # near the origin (where the padded rows sit), near data, and far from data
    Xt = np.array([[0.02, 0.03], X_data[0] + 0.05, [0.5, 0.5], [0.95, 0.05]])
    one = jax.tree.map(lambda a: a[0], (posterior.samples, posterior.cache))
    mean, cov = posterior.surrogate.predict_joint_one(
        one[0], posterior.data, jnp.asarray(Xt), one[1]
    )
    mean, cov = np.asarray(mean), np.asarray(cov)
    values = np.asarray(rff.evaluate_paths(se_paths, jnp.asarray(Xt)))
    num, M = se_paths.theta.shape
    # Monte Carlo error plus an O(1/M) allowance for the bias of the feature
    # approximation (the per-path feature error averages out over paths).
    bias = 5.0 * float(posterior.samples["outputscale"][0]) / M
    se_mean = values.std(0) / np.sqrt(num)
    np.testing.assert_array_less(np.abs(values.mean(0) - mean), 4 * se_mean + bias)
    var = np.diag(cov)
    se_cov = np.sqrt((np.outer(var, var) + cov**2) / num)
    np.testing.assert_array_less(np.abs(np.cov(values.T) - cov), 4 * se_cov + bias)
    # the data matter: without conditioning the variance near data would be 1.3
    assert var[1] < 0.2


def test_path_maxima_match_exact_gp_maxima():
    rng = np.random.default_rng(2)
    X = np.array([[0.1], [0.35], [0.6], [0.85]])
    y = np.array([0.3, -0.5, 0.8, 0.1]) + 0.01 * rng.standard_normal(4)
    data = ppbo.Dataset(X, y)
    surrogate = gp.surrogate(kernel="rbf", mean="zero")
    params = {"lengthscale": [0.15], "outputscale": 1.0, "noise": 1e-4}
    posterior = ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))
    # exact joint draws on a dense grid: discretisation error ~1e-4 here
    grid = np.linspace(0.0, 1.0, 201)[:, None]
    exact = np.asarray(posterior.sample_f(jax.random.key(1), grid, 1000))[0].max(1)
    X_star, f_star = rff.sample_maxima(
        jax.random.key(2),
        posterior,
        300,
        num_features=1000,
        num_candidates=256,
        num_restarts=2,
        num_steps=50,
    )
    X_star, f_star = np.asarray(X_star)[0], np.asarray(f_star)[0]
    assert np.all((X_star >= 0) & (X_star <= 1))
    se = np.sqrt(exact.var() / len(exact) + f_star.var() / len(f_star))
    assert abs(f_star.mean() - exact.mean()) < 4 * se + 0.005
    assert f_star.std() == pytest.approx(exact.std(), rel=0.2)


def test_maximize_paths_returns_each_paths_maximum(se_paths):
    first = rff.Paths(
        features=jax.tree.map(lambda a: a[:4], se_paths.features),
        theta=se_paths.theta[:4],
        params=se_paths.params,
        mean_fn=se_paths.mean_fn,
    )
    X_star, f_star = rff.maximize_paths(
        jax.random.key(4), first, candidates=jnp.full((1, 2), 0.5)
    )
    assert X_star.shape == (4, 2) and f_star.shape == (4,)
    # the maximum is the path's value at the maximiser, and no grid point beats it
    # (the default search: 1024 random candidates, 4 refined by gradient ascent)
    at_star = np.diag(np.asarray(rff.evaluate_paths(first, X_star)))
    np.testing.assert_allclose(at_star, f_star, rtol=1e-10)
    grid = np.stack(np.meshgrid(*[np.linspace(0, 1, 41)] * 2), -1).reshape(-1, 2)
    on_grid = np.asarray(rff.evaluate_paths(first, jnp.asarray(grid))).max(1)
    np.testing.assert_array_less(on_grid, np.asarray(f_star) + 1e-6)


def _unfitted(surrogate, data, params):
    """A posterior at ``params`` without the surrogate's cache (never used here)."""
    samples = {k: jnp.asarray(v, dtype=jnp.float64)[None] for k, v in params.items()}
    return ppbo.Posterior(surrogate, samples, data)


def test_unsupported_surrogates_raise_clear_errors():
    X = np.random.default_rng(0).random((5, 2))
    data = ppbo.Dataset(X, X[:, 0], task=[0, 1, 1, 0, 1])
    linear = gp.surrogate(kernel="linear", mean="zero")
    params = {"lengthscale": [1.0, 1.0], "outputscale": 1.0, "noise": 1e-2}
    posterior = _unfitted(linear, data, params)
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        rff.sample_posterior_paths(jax.random.key(0), posterior, 2, 16)
    composite = gp.surrogate(
        kernel=lambda ell: Matern52(ell) + Linear(ell), mean="zero"
    )
    posterior = _unfitted(composite, data, params)
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        rff.sample_posterior_paths(jax.random.key(0), posterior, 2, 16)
    mt_params = {
        "lengthscale": np.ones(2),
        "task_scales": np.ones(2),
        "task_cholesky": np.eye(2),
        "noise": np.full(2, 1e-2),
        "mean": np.zeros(2),
    }
    posterior = _unfitted(multitask_gp.surrogate(num_tasks=2), data, mt_params)
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        rff.sample_posterior_paths(jax.random.key(0), posterior, 2, 16)
    custom = ppbo.Surrogate(model=lambda data: None, predict=lambda p, d, X: (X, X))
    posterior = _unfitted(custom, data, params)
    with pytest.raises(ppbo.MissingCapabilityError, match="capability 'gp'"):
        rff.sample_posterior_paths(jax.random.key(0), posterior, 2, 16)
