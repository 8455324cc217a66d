"""Thompson sampling on RFF paths and max-value entropy search.

References: the entropy difference of a Gaussian and its truncation by numerical
integration (SciPy), the quartiles of the product CDF found with SciPy's root
finder, and exact bivariate-normal probabilities for Thompson sampling.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize, stats

import ppbo
from ppbo.acquisition import bind, evaluate, per_sample
from ppbo.acquisition.mes import mes, sample_max_values
from ppbo.acquisition.thompson import thompson, thompson_point
from ppbo.models import gp

# -- a fake posterior with given predictive means and variances -------------------


def _fake_predict(params, data, X):
    # mean mu + slope (x0 - 1/2), variance var (1 + x1): both depend on X so that
    # gradients with respect to the candidates are not trivially zero
    mean = params["mu"] + params["slope"] * (X[:, 0] - 0.5)
    return mean, params["var"] * (1.0 + X[:, 1])


FAKE = ppbo.Surrogate(model=lambda data: None, predict=_fake_predict, name="fake")


def _fake_posterior(mu, var, slope=0.0, y=(-50.0,)):
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    samples = {
        "mu": jnp.asarray(mu),
        "var": jnp.asarray(np.broadcast_to(var, mu.shape), dtype=jnp.float64),
        "slope": jnp.full(mu.shape, float(slope)),
    }
    y = np.asarray(y, dtype=np.float64)
    data = ppbo.Dataset(np.full((len(y), 2), 0.5), y)
    return ppbo.Posterior(FAKE, samples, data)


def _entropy_reduction_by_quadrature(mu, sd, y_star):
    """H[N(mu, sd^2)] - H[N(mu, sd^2) truncated to y < y*], both integrated."""

    def entropy(density, lower, upper):
        def integrand(y):
            p = density(y)
            return -p * np.log(p) if p > 0 else 0.0

        value, _ = integrate.quad(
            integrand, lower, upper, epsabs=1e-13, epsrel=1e-12, limit=500
        )
        return value

    normal = stats.norm(mu, sd)
    mass = normal.cdf(y_star)
    lower = mu - 40 * sd
    full = entropy(normal.pdf, lower, mu + 40 * sd)
    truncated = entropy(lambda y: normal.pdf(y) / mass, lower, y_star)
    return full - truncated


def test_mes_equals_the_entropy_difference_by_numerical_integration():
    mu = np.array([0.3, -1.2])
    var = np.array([0.25, 2.0])
    y_star = np.array([[0.1, 0.6, 1.5, 3.0], [-2.5, -1.0, 0.5, 4.0]])  # (s, K)
    posterior = _fake_posterior(mu, var)
    X = np.array([[0.5, 0.0]])  # mean mu, variance var
    values = per_sample(mes, posterior, X, key=jax.random.key(0), max_values=y_star)
    for i in range(2):
        expected = np.mean(
            [
                _entropy_reduction_by_quadrature(mu[i], np.sqrt(var[i]), y)
                for y in y_star[i]
            ]
        )
        assert float(values[i, 0]) == pytest.approx(expected, abs=1e-6)
    averaged = evaluate(mes, posterior, X, key=jax.random.key(0), max_values=y_star)
    np.testing.assert_allclose(averaged, np.mean(values, axis=0), rtol=1e-12)


def test_mes_finite_positive_with_finite_gradients_for_extreme_gamma():
    # gamma = (y* - mu) / sigma from -1e3 to 1e3
    y_star = np.array([[0.0]])
    posterior = _fake_posterior(0.0, 1.0, slope=-2000.0)
    X = np.stack([np.linspace(0.0, 1.0, 201), np.zeros(201)], axis=1)
    bound = bind(mes, posterior, key=jax.random.key(0), max_values=y_star)
    values, grads = bound.value_and_grad(jnp.asarray(X))
    values, grads = np.asarray(values), np.asarray(grads)
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads))
    assert np.all(values >= 0)
    # gamma = 2000 (x0 - 1/2) rises along X: the information falls
    assert np.all(np.diff(values) <= 1e-12)
    assert values[-1] == pytest.approx(0.0, abs=1e-12)
    # as gamma -> -inf it grows like log(-gamma) + log(2 pi) / 2 - 1/2
    assert values[0] == pytest.approx(
        np.log(1000.0) + 0.5 * np.log(2 * np.pi) - 0.5, rel=1e-5
    )


def test_gumbel_max_values_match_the_product_cdf_quartiles():
    # a grid with known means and standard deviations (fake posterior: mean and
    # variance depend on the grid point), observations far below (no clamping)
    rng = np.random.default_rng(3)
    grid = rng.random((50, 2))
    posterior = _fake_posterior(0.4, 0.3, slope=1.5)
    mean = 0.4 + 1.5 * (grid[:, 0] - 0.5)
    sd = np.sqrt(0.3 * (1 + grid[:, 1]))
    # the observed inputs (0.5, 0.5) join the grid
    mean = np.append(mean, 0.4)
    sd = np.append(sd, np.sqrt(0.45))

    def quantile(q):
        def log_cdf(y):
            return np.sum(stats.norm.logcdf((y - mean) / sd)) - np.log(q)

        return optimize.brentq(log_cdf, -20, 20, xtol=1e-14)

    q1, median, q3 = (quantile(q) for q in (0.25, 0.5, 0.75))
    K = 4000
    samples = np.asarray(
        sample_max_values(
            jax.random.key(1),
            posterior,
            method="gumbel",
            grid=grid,
            num_max_samples=K,
        )
    )[0]
    # a Gumbel fitted at the quartiles: its sample quartiles match them within
    # the quantile standard error sqrt(q (1 - q) / K) / density
    beta = (q3 - q1) / (np.log(np.log(4)) - np.log(np.log(4 / 3)))
    gumbel = stats.gumbel_r(median + beta * np.log(np.log(2)), beta)
    for q, y_q in zip((0.25, 0.5, 0.75), (q1, median, q3), strict=True):
        se = np.sqrt(q * (1 - q) / K) / gumbel.pdf(y_q)
        assert np.quantile(samples, q) == pytest.approx(y_q, abs=4 * se)


@pytest.fixture(scope="module")
def gp_posterior():
    """Matérn-5/2 GP at fixed hyperparameters, 7 points in 2-D padded to 8."""
    rng = np.random.default_rng(0)
    X = rng.random((7, 2))
    y = np.sin(4 * X[:, 0]) - (X[:, 1] - 0.4) ** 2
    data = ppbo.Dataset(X, (y - y.mean()) / y.std())
    surrogate = gp.surrogate(kernel="matern52", mean="constant")
    params = {
        "lengthscale": [0.25, 0.4],
        "outputscale": 1.0,
        "noise": 1e-3,
        "mean": 0.0,
    }
    return ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))


MES_OPTIONS = {
    "num_max_samples": 8,
    "num_features": 500,
    "num_candidates": 256,
    "num_steps": 30,
    "num_grid": 2000,
}
TWO_POINTS = np.array([[0.2, 0.5], [0.8, 0.5]])


@pytest.mark.parametrize("method", ["paths", "gumbel"])
def test_mes_on_a_gp_is_positive_with_finite_gradients(gp_posterior, method):
    posterior = gp_posterior
    options = {"method": method, **MES_OPTIONS}
    key = jax.random.key(7)
    y_star = np.asarray(sample_max_values(key, posterior, **options))
    _, y, _ = posterior.data.unpadded()
    assert y_star.shape == (1, 8)
    assert np.all(y_star >= y.max() + 0.1 - 1e-12)
    assert len(np.unique(y_star)) > 1
    X = np.random.default_rng(1).random((16, 2))
    bound = bind(mes, posterior, key=key, **options)
    values, grads = bound.value_and_grad(jnp.asarray(X))
    assert np.all(np.asarray(values) > 0)
    assert np.all(np.isfinite(np.asarray(grads)))
    np.testing.assert_allclose(
        values, evaluate(mes, posterior, X, key=key, **options), rtol=1e-12
    )
    # the same key gives the same y*; the information is lowest at the data
    X_data, _, _ = posterior.data.unpadded()
    at_data = evaluate(mes, posterior, X_data, key=key, max_values=y_star)
    assert np.max(at_data) < np.median(np.asarray(values))


def test_mes_rejects_bad_options(gp_posterior):
    X = np.full((1, 2), 0.5)
    with pytest.raises(ValueError, match="method must be one of"):
        evaluate(mes, gp_posterior, X, key=jax.random.key(0), method="exact")
    with pytest.raises(ValueError, match="max_values must have shape"):
        evaluate(mes, gp_posterior, X, key=jax.random.key(0), max_values=np.ones(3))
    with pytest.raises(ValueError, match="needs a key"):
        evaluate(mes, gp_posterior, X)


# -- Thompson sampling ------------------------------------------------------------


@pytest.fixture(scope="module")
def three_sample_posterior(gp_posterior):
    """The same GP with three hyperparameter samples (different lengthscales)."""
    base = gp_posterior
    samples = {
        "lengthscale": jnp.array([[0.25, 0.4], [0.1, 0.2], [0.5, 0.6]]),
        "outputscale": jnp.array([1.0, 0.5, 2.0]),
        "noise": jnp.full(3, 1e-3),
        "mean": jnp.array([0.0, 0.3, -0.3]),
    }
    surrogate = base.surrogate
    cache = jax.vmap(lambda p: surrogate.prepare(p, base.data))(samples)
    return ppbo.Posterior(surrogate, samples, base.data, cache=cache)


def test_thompson_evaluates_one_path_of_one_sample(three_sample_posterior):
    posterior = three_sample_posterior
    X = np.random.default_rng(2).random((5, 2))
    key = jax.random.key(3)
    values = per_sample(thompson, posterior, X, key=key, num_features=256)
    assert values.shape == (1, 5)
    assert np.all(np.isfinite(np.asarray(values)))
    again = per_sample(thompson, posterior, X, key=key, num_features=256)
    np.testing.assert_array_equal(values, again)
    mean = evaluate(thompson, posterior, X, key=key, num_features=256)
    np.testing.assert_array_equal(mean, values[0])
    other = per_sample(thompson, posterior, X, key=jax.random.key(4), num_features=256)
    assert not np.allclose(values, other)
    # the path interpolates the (nearly noise-free) data
    X_data, y, _ = posterior.data.unpadded()
    at_data = per_sample(thompson, posterior, X_data, key=key, num_features=256)
    np.testing.assert_allclose(at_data, np.broadcast_to(y, at_data.shape), atol=0.15)


def _one_dimensional_posterior():
    """A 1-D GP with two hyperparameter samples of different lengthscales and
    means, conditioned on three points, so that the maximiser is spread out."""
    X = np.array([[0.15], [0.5], [0.8]])
    y = np.array([0.3, -0.2, 0.4])
    data = ppbo.Dataset(X, y)
    surrogate = gp.surrogate(kernel="rbf", mean="constant")
    samples = {
        "lengthscale": jnp.array([[0.12], [0.3]]),
        "outputscale": jnp.array([1.0, 0.6]),
        "noise": jnp.array([1e-4, 1e-2]),
        "mean": jnp.array([0.0, 0.5]),
    }
    cache = jax.vmap(lambda p: surrogate.prepare(p, data))(samples)
    return ppbo.Posterior(surrogate, samples, data, cache=cache)


def test_thompson_suggestions_are_distributed_as_the_sampled_maximisers():
    # Reference: exact joint draws of the GP on a dense grid (sample_f, one
    # hyperparameter sample chosen uniformly per draw by pooling equal numbers of
    # draws of both), their argmax by brute force. Thompson sampling through the
    # acquisition optimiser must pick points with the same distribution; the mean
    # of the paths of both samples would concentrate near the posterior-mean
    # maximiser instead.
    posterior = _one_dimensional_posterior()
    grid = np.linspace(0.0, 1.0, 401)[:, None]
    draws = np.asarray(posterior.sample_f(jax.random.key(11), grid, num=2000))
    reference = grid[np.argmax(draws, axis=-1).ravel(), 0]
    num = 300
    keys = jax.random.split(jax.random.key(12), num)
    suggested = np.array(
        [
            ppbo.optimize_acquisition(
                thompson, posterior, k, num_raw=256, num_restarts=1, max_iterations=0
            )[0][0, 0]
            for k in keys
        ]
    )
    edges = np.array([0.0, 0.1, 0.3, 0.45, 0.65, 0.9, 1.0])
    p_ref = np.histogram(reference, edges)[0] / reference.size
    p_ts = np.histogram(suggested, edges)[0] / num
    assert np.max(p_ref) < 0.6  # the maximiser is spread: the test can fail
    # binomial Monte Carlo error of both frequencies, plus the RFF and raw-grid
    # approximation (1000 features, 256 points)
    sd = np.sqrt(p_ref * (1 - p_ref) / num + p_ref * (1 - p_ref) / reference.size)
    np.testing.assert_array_less(np.abs(p_ts - p_ref), 4 * sd + 0.03)
    assert np.std(suggested) == pytest.approx(np.std(reference), rel=0.15)


def test_thompson_point_in_the_unit_cube(three_sample_posterior):
    posterior = three_sample_posterior
    for i in range(3):
        x = np.asarray(
            thompson_point(
                jax.random.key(i),
                posterior,
                2,
                num_features=256,
                num_candidates=256,
                num_steps=30,
            )
        )
        assert x.shape == (2,) and np.all((x >= 0) & (x <= 1))
    with pytest.raises(ValueError, match="dimension"):
        thompson_point(jax.random.key(0), posterior, 3)
    with pytest.raises(ValueError, match="candidates must have shape"):
        thompson_point(jax.random.key(0), posterior, np.ones((4, 3)))


def test_thompson_point_frequencies_match_the_posterior_probability(gp_posterior):
    # Thompson sampling picks a with probability P[f(a) > f(b)], which the joint
    # Gaussian posterior gives in closed form.
    posterior = gp_posterior
    candidates = TWO_POINTS
    one = jax.tree.map(lambda a: a[0], (posterior.samples, posterior.cache))
    mean, cov = posterior.surrogate.predict_joint_one(
        one[0], posterior.data, jnp.asarray(candidates), one[1]
    )
    mean, cov = np.asarray(mean), np.asarray(cov)
    p = stats.norm.cdf(
        (mean[0] - mean[1]) / np.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    )
    assert 0.1 < p < 0.9  # a test that can fail
    num = 300
    keys = jax.random.split(jax.random.key(8), num)
    picks = np.array(
        [thompson_point(k, posterior, candidates, num_features=256) for k in keys]
    )
    # a finite candidate set: the point is one of the candidates
    assert np.all((picks == candidates[0]).all(1) | (picks == candidates[1]).all(1))
    frequency = np.mean((picks == candidates[0]).all(1))
    assert frequency == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / num) + 0.02)


def test_no_recompilation_within_a_bucket(gp_posterior, compile_counter):
    posterior = gp_posterior
    X_data, y, _ = posterior.data.unpadded()
    data = posterior.data.append([[0.5, 0.5]], [0.0])
    assert data.capacity == posterior.data.capacity
    params = {k: np.asarray(v[0]) for k, v in posterior.samples.items()}
    grown = ppbo.fit(posterior.surrogate, data, ppbo.Fixed(params), jax.random.key(0))
    # the same settings as the tests above, so that nothing new is compiled
    X = np.random.default_rng(4).random((16, 2))
    options = {"method": "gumbel", **MES_OPTIONS}
    keys = jax.random.split(jax.random.key(9), 2)

    def step(posterior, key):
        jax.block_until_ready(evaluate(mes, posterior, X, key=key, **options))
        jax.block_until_ready(per_sample(thompson, posterior, X, key=key))
        jax.block_until_ready(
            thompson_point(key, posterior, TWO_POINTS, num_features=256)
        )

    step(posterior, keys[0])
    with compile_counter.measure():
        step(grown, keys[1])
    assert compile_counter.count == 0
