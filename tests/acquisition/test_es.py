"""Entropy search and the Monte Carlo information gain against independent references.

The GP has fixed hyperparameters (``ppbo.Fixed``). References are computed with a
dense NumPy Matérn-5/2 GP: closed-form Gaussian entropies and bivariate-normal
probabilities, one-dimensional quadrature (SciPy) of the exact conditional
densities of ``y`` given a two-point maximiser, and nested NumPy Monte Carlo for
the expected change of the entropy of ``p_max``. Tolerances are multiples of the
Monte Carlo standard errors.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import ppbo
from ppbo.acquisition import bind, evaluate, per_sample
from ppbo.acquisition.es import (
    default_grid,
    entropy,
    es,
    information_gain_terms,
    monte_carlo_information_gain,
    p_max,
    sample_representers,
)
from ppbo.models import gp

X_OBS = np.array([0.1, 0.25, 0.5, 0.65, 0.9])[:, None]
Y_OBS = np.sin(6.0 * X_OBS[:, 0])
PARAMS = {"lengthscale": [0.15], "outputscale": 1.0, "noise": 1e-3, "mean": 0.0}
SURROGATE = gp.surrogate(kernel="matern52")
CANDIDATES = np.linspace(0.0, 1.0, 41)[:, None]
# the ground-truth tests share shapes (and so compilations): five candidates, two
# of them observed inputs, a 256-point grid, 4096 draws in chunks of 1024
X5 = np.array([[0.05], [0.3], [0.5], [0.65], [0.75]])
GRID = default_grid(1, 256)
SMALL = {"grid": GRID, "num_functions": 4096, "chunk_size": 1024}


def _posterior(params=PARAMS, X=X_OBS, y=Y_OBS):
    data = ppbo.Dataset(X, y)
    return ppbo.fit(SURROGATE, data, ppbo.Fixed(params), jax.random.key(0))


@pytest.fixture(scope="module")
def posterior():
    return _posterior()


@pytest.fixture(scope="module")
def two_samples():
    """A two-sample posterior: PARAMS and a longer lengthscale, larger noise."""
    other = dict(PARAMS, lengthscale=[0.3], noise=1e-2)
    first, second = _posterior(), _posterior(other)
    samples, cache = jax.tree.map(
        lambda a, b: jnp.concatenate([a, b]),
        (first.samples, first.cache),
        (second.samples, second.cache),
    )
    both = ppbo.Posterior(SURROGATE, samples, first.data, cache=cache)
    return both, (first, second)


# -- a dense NumPy GP -----------------------------------------------------------------


def _matern52(A, B, params):
    r = np.abs(A[:, None, 0] - B[None, :, 0]) / params["lengthscale"][0]
    s = math.sqrt(5.0) * r
    return params["outputscale"] * (1.0 + s + s**2 / 3.0) * np.exp(-s)


def _gp_posterior(Xs, params=PARAMS, X=X_OBS, y=Y_OBS):
    """Latent posterior mean and covariance at Xs by a dense solve."""
    K = _matern52(X, X, params) + (params["noise"] + gp.JITTER) * np.eye(len(X))
    Ks = _matern52(Xs, X, params)
    mean = params["mean"] + Ks @ np.linalg.solve(K, y - params["mean"])
    cov = _matern52(Xs, Xs, params) - Ks @ np.linalg.solve(K, Ks.T)
    return mean, cov


def _noise(params=PARAMS):
    return params["noise"] + gp.JITTER


# -- the Monte Carlo information gain --------------------------------------------------


def test_entropy_term_is_the_gaussian_predictive_entropy(posterior):
    terms = information_gain_terms(jax.random.key(1), posterior, X5, **SMALL)
    _, cov = _gp_posterior(X5)
    expected = 0.5 * np.log(2 * np.pi * np.e * (np.diag(cov) + _noise()))
    np.testing.assert_allclose(terms.entropy[0], expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        terms.information_gain, terms.entropy - terms.conditional_entropy, atol=1e-12
    )
    # the observation-noise option replaces the model's noise variance
    noisy = information_gain_terms(jax.random.key(1), posterior, X5, noise=0.5, **SMALL)
    expected = 0.5 * np.log(2 * np.pi * np.e * (np.diag(cov) + 0.5))
    np.testing.assert_allclose(noisy.entropy[0], expected, rtol=0, atol=1e-9)


def _two_point_reference(x, grid, noise, X, y):
    """Information gain about x* in {grid[0], grid[1]} from y at x, by quadrature.

    With d = f(g0) - f(g1), x* = g0 iff d > 0, and d | y is Gaussian, so
    p(y | x* = g0) = N(y; mu_y, v_y) Phi(m(y) / s) / Pr[d > 0] exactly. Returns the
    information gain with the conditional entropies replaced by Gaussian entropies
    of the exact conditional variances (what the estimator targets) and the exact
    mutual information.
    """
    mean, cov = _gp_posterior(np.concatenate([grid, x]), X=X, y=y)
    mu_d, var_d = mean[0] - mean[1], cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    mu_y, var_y = mean[2], cov[2, 2] + noise
    cov_dy = cov[0, 2] - cov[1, 2]
    s = math.sqrt(var_d - cov_dy**2 / var_y)
    p0 = stats.norm.cdf(mu_d / math.sqrt(var_d))
    sd_y = math.sqrt(var_y)

    def conditional(y, first):
        prob = stats.norm.cdf((mu_d + cov_dy / var_y * (y - mu_y)) / s)
        prob, mass = (prob, p0) if first else (1 - prob, 1 - p0)
        return stats.norm.pdf(y, mu_y, sd_y) * prob / mass

    lo, hi = mu_y - 12 * sd_y, mu_y + 12 * sd_y
    h_y = 0.5 * math.log(2 * math.pi * math.e * var_y)
    gaussian, exact = h_y, h_y
    for first, weight in ((True, p0), (False, 1 - p0)):

        def moment(k, first=first):
            return integrate.quad(
                lambda y: y**k * conditional(y, first), lo, hi, limit=400
            )[0]

        var = moment(2) - moment(1) ** 2
        gaussian -= weight * 0.5 * math.log(2 * math.pi * math.e * var)

        def neg_plogp(y, first=first):
            p = conditional(y, first)
            return -p * math.log(p) if p > 0 else 0.0

        exact -= weight * integrate.quad(neg_plogp, lo, hi, limit=400)[0]
    return gaussian, exact


# sparse data: the maximiser over {0.3, 0.7} is uncertain (Pr[x* = 0.3] ~ 0.6)
SPARSE_X, SPARSE_Y = np.array([[0.1], [0.5], [0.9]]), np.array([0.0, 0.3, 0.1])


@pytest.mark.parametrize("x", [0.3, 0.45, 0.62], ids=["on-grid", "between", "aside"])
def test_two_point_maximiser_matches_quadrature(x):
    sparse = _posterior(X=SPARSE_X, y=SPARSE_Y)
    grid = np.array([[0.3], [0.7]])
    X = np.array([[x]])
    noise = 0.05  # a noisy y keeps p(y | x*) smooth for the quadrature
    terms = information_gain_terms(
        jax.random.key(2), sparse, X, grid=grid, num_functions=2**17, noise=noise
    )
    gaussian, exact = _two_point_reference(X, grid, noise, SPARSE_X, SPARSE_Y)
    value, se = float(terms.information_gain[0, 0]), float(terms.standard_error[0, 0])
    assert gaussian > 0.01  # informative
    # two groups of ~65000 draws: what is left of the small-group bias is far below
    # the standard error
    assert abs(value - gaussian) < 4 * se, (value, gaussian, se)
    assert gaussian <= exact + 1e-9  # the Gaussian entropy bounds the true one


@pytest.fixture(scope="module")
def known():
    """Nearly noise-free data: f is known at the observed inputs."""
    return _posterior(dict(PARAMS, noise=1e-9))


def test_no_information_at_a_known_point(known):
    # a (noisy) new observation where f is known says nothing about the maximiser
    terms = information_gain_terms(jax.random.key(3), known, X5, noise=1e-2, **SMALL)
    # |I| <= log(1 + v / noise) / 2 with v ~ 1e-6, the posterior variance there
    np.testing.assert_array_less(np.abs(terms.information_gain[0, 2:4]), 1e-4)
    assert np.all(terms.information_gain[0, [0, 1, 4]] > 0.01)  # elsewhere: some


def test_standard_error_matches_the_spread_over_keys(posterior):
    num_keys = 20
    keys = jax.random.split(jax.random.key(4), num_keys)
    runs = [
        information_gain_terms(k, posterior, X5, noise=_noise(), **SMALL) for k in keys
    ]
    values = np.stack([np.asarray(r.information_gain[0]) for r in runs])
    se = np.mean([np.asarray(r.standard_error[0]) for r in runs], axis=0)
    informative = [0, 1, 4]  # at the observed inputs 0.5 and 0.65 there is ~none
    ratio = np.var(values, axis=0, ddof=1)[informative] / se[informative] ** 2
    # each ratio is ~ chi-square(19) / 19 if the standard error is right; their
    # mean (correlated: the candidates share the draws) lies within the 0.1 % and
    # 99.9 % quantiles of one of them
    dof = num_keys - 1
    low, high = stats.chi2.ppf([1e-3, 1 - 1e-3], dof) / dof
    assert low < ratio.mean() < high, (ratio, low, high)


def test_hyperparameter_average_and_determinism(two_samples):
    both, singles = two_samples
    X = np.array([[0.2], [0.45], [0.8]])
    key = jax.random.key(5)
    terms = information_gain_terms(key, both, X, **SMALL)
    averaged = monte_carlo_information_gain(key, both, X, **SMALL)
    np.testing.assert_allclose(averaged, terms.information_gain.mean(0), atol=1e-12)
    # each sample's exact term is its own GP's
    for i, params in enumerate((PARAMS, dict(PARAMS, lengthscale=[0.3], noise=1e-2))):
        _, cov = _gp_posterior(X, params)
        expected = 0.5 * np.log(2 * np.pi * np.e * (np.diag(cov) + _noise(params)))
        np.testing.assert_allclose(terms.entropy[i], expected, atol=1e-9)
    again = monte_carlo_information_gain(key, both, X, **SMALL)
    np.testing.assert_array_equal(np.asarray(averaged), np.asarray(again))


def test_default_grid_and_bad_input(posterior):
    assert default_grid(1).shape == (512, 1)
    grid = default_grid(2, 3)
    assert grid.shape == (9, 2) and grid.min() == 0.0 and grid.max() == 1.0
    with pytest.raises(ValueError, match="d = 2"):
        default_grid(3)
    with pytest.raises(ValueError, match="shape"):
        information_gain_terms(jax.random.key(0), posterior, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="num_functions"):
        information_gain_terms(
            jax.random.key(0), posterior, CANDIDATES, num_functions=1
        )


# -- entropy search -------------------------------------------------------------------


def test_p_max_of_two_points_matches_the_closed_form(posterior):
    Z = np.array([[0.3], [0.4]])
    num_paths = 20_000
    aux = es.prepare(jax.random.key(6), posterior, representers=Z, num_paths=num_paths)
    p = np.asarray(p_max(aux["F"][0]))
    mean, cov = _gp_posterior(Z)
    exact = stats.norm.cdf(
        (mean[0] - mean[1]) / math.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    )
    se = math.sqrt(exact * (1 - exact) / num_paths)
    assert abs(p[0] - exact) < 4 * se, (p[0], exact, se)
    assert p.sum() == pytest.approx(1.0)


def test_p_max_of_three_points_matches_numpy_sampling(posterior):
    Z = np.array([[0.3], [0.37], [0.75]])
    num_paths = 20_000
    aux = es.prepare(jax.random.key(7), posterior, representers=Z, num_paths=num_paths)
    p = np.asarray(p_max(aux["F"][0]))
    mean, cov = _gp_posterior(Z)
    draws = np.random.default_rng(0).multivariate_normal(mean, cov, size=400_000)
    reference = np.bincount(np.argmax(draws, 1), minlength=3) / len(draws)
    se = np.sqrt(reference * (1 - reference) * (1 / num_paths + 1 / len(draws)))
    np.testing.assert_array_less(np.abs(p - reference), 4 * se + 1e-12)


def test_entropy_of_representer_distributions():
    p = jnp.array([0.5, 0.5, 0.0])
    # Shannon entropy log 2 minus log R for uniform representers
    assert float(entropy(p)) == pytest.approx(math.log(2) - math.log(3))
    log_u = jnp.log(jnp.array([2.0, 0.5, 1.0]))
    expected = -(0.5 * math.log(3 * 2 * 0.5) + 0.5 * math.log(3 * 0.5 * 0.5))
    assert float(entropy(p, log_u)) == pytest.approx(expected)


def _nested_entropy_change(x, Z, noise, num_outer=400, num_inner=20_000, seed=0):
    """H[p_max] - E_y H[p_max | y] on representers Z by nested NumPy Monte Carlo.

    The outer expectation over y uses stratified quantiles; each inner p_max is the
    argmax frequency of fresh joint draws from the exactly re-conditioned Gaussian
    (a dense update of the joint Gaussian of f(Z) and y). Returns the estimate and
    its standard error.
    """
    rng = np.random.default_rng(seed)
    R = len(Z)
    mean, cov = _gp_posterior(np.concatenate([Z, x]))
    mu_z, cov_zz = mean[:R], cov[:R, :R]
    cov_zy, var_y = cov[:R, R], cov[R, R] + noise

    def shannon(draws):
        p = np.bincount(np.argmax(draws, 1), minlength=R) / len(draws)
        p = p[p > 0]
        return -np.sum(p * np.log(p))

    before = shannon(rng.multivariate_normal(mu_z, cov_zz, size=num_inner * 5))
    cov_after = cov_zz - np.outer(cov_zy, cov_zy) / var_y
    chol = np.linalg.cholesky(cov_after + 1e-12 * np.eye(R))
    quantiles = stats.norm.ppf(
        (np.arange(num_outer) + rng.random(num_outer)) / num_outer
    )
    after = np.empty(num_outer)
    for k, q in enumerate(quantiles):
        mu_after = mu_z + cov_zy * q / math.sqrt(var_y)
        after[k] = shannon(mu_after + rng.standard_normal((num_inner, R)) @ chol.T)
    # stratified outer sum: its error is dominated by the inner sampling noise
    se = math.sqrt(np.var(np.diff(after)) / 2 / num_outer)
    return before - after.mean(), se


@pytest.mark.parametrize("x", [0.35, 0.6], ids=["between-representers", "aside"])
def test_es_matches_nested_monte_carlo(posterior, x):
    Z = np.array([[0.3], [0.38], [0.7]])
    X = np.array([[x]])
    noise = 0.05
    reference, se_reference = _nested_entropy_change(X, Z, noise)
    keys = jax.random.split(jax.random.key(8), 8)
    values = [
        float(
            bind(es, posterior, key=k, representers=Z, num_paths=5000, noise=noise)(X)[
                0, 0
            ]
        )
        for k in keys
    ]
    mean, se = np.mean(values), np.std(values, ddof=1) / math.sqrt(len(values))
    assert reference > 0.01  # an informative observation
    assert abs(mean - reference) < 4 * math.hypot(se, se_reference), (
        mean,
        reference,
        se,
        se_reference,
    )


def test_es_vanishes_at_a_known_point(known):
    # the same shapes as in the next test: one compilation
    values = np.asarray(
        evaluate(es, known, CANDIDATES, key=jax.random.key(9), noise=1e-2)
    )
    observed = [20, 26]  # x = 0.5 and 0.65
    # the update of every path is ~1e-4 of its spread at the observed inputs, so
    # (almost) no path changes its argmax
    np.testing.assert_array_less(np.abs(values[observed]), 1e-3)
    assert values.max() > 0.1


@pytest.mark.slow
def test_es_tracks_the_ground_truth(posterior):
    # both estimate the same mutual information (ES on 50 representers drawn from
    # the EI measure): strongly correlated, with the same maximiser
    es_values = np.asarray(
        evaluate(es, posterior, CANDIDATES, key=jax.random.key(10), noise=_noise())
    )
    truth = np.asarray(
        monte_carlo_information_gain(
            jax.random.key(11), posterior, CANDIDATES, grid=GRID, num_functions=16384
        )
    )
    assert np.corrcoef(es_values, truth)[0, 1] > 0.9
    assert (
        abs(CANDIDATES[np.argmax(es_values), 0] - CANDIDATES[np.argmax(truth), 0])
        <= 0.05
    )
    # nearly non-negative: negative values are Monte Carlo noise of the entropies
    # of P = 1000 paths, a few 1e-3
    assert es_values.min() > -0.02


def test_es_averages_samples_and_is_deterministic(two_samples):
    both, _ = two_samples
    X = np.array([[0.2], [0.45], [0.8], [0.95]])
    key = jax.random.key(12)
    options = {"num_paths": 500, "num_representers": 20}
    values = evaluate(es, both, X, key=key, **options)
    separate = per_sample(es, both, X, key=key, **options)
    assert separate.shape == (2, 4)
    np.testing.assert_allclose(values, separate.mean(0), atol=1e-12)
    np.testing.assert_array_equal(
        np.asarray(values), np.asarray(evaluate(es, both, X, key=key, **options))
    )
    # gradient-free: the gradient is zero (argmax counts), but finite
    value, grad = bind(es, both, key=key, **options).value_and_grad(jnp.asarray(X))
    np.testing.assert_allclose(value, values, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(grad), 0.0)
    # raw search only (four raw candidates: the shapes above, no recompilation)
    x, best = ppbo.optimize_acquisition(
        es, both, key, num_raw=4, num_restarts=1, max_iterations=0, **options
    )
    assert x.shape == (1, 1) and np.isfinite(best).all()
    with pytest.raises(ValueError, match="key"):
        evaluate(es, both, X)


def test_representers_follow_expected_improvement(posterior):
    rep = sample_representers(
        jax.random.key(13), posterior, num_representers=20, num_pool=512
    )
    Z, log_u = np.asarray(rep.X[0]), np.asarray(rep.log_density[0])
    assert len(np.unique(Z[:, 0])) == 20  # without replacement
    mean, cov = _gp_posterior(Z)
    best = np.max(_gp_posterior(X_OBS)[0])
    sd = np.sqrt(np.diag(cov))
    z = (mean - best) / sd
    ei = sd * (z * stats.norm.cdf(z) + stats.norm.pdf(z))
    # log u = log EI + a constant (the pool normalisation)
    np.testing.assert_allclose(
        log_u - np.log(ei), np.mean(log_u - np.log(ei)), atol=1e-6
    )
    # promising points are preferred: the mean EI of the representers beats the
    # mean over the unit interval
    _, grid_cov = _gp_posterior(GRID)
    grid_mean = _gp_posterior(GRID)[0]
    grid_sd = np.sqrt(np.maximum(np.diag(grid_cov), 1e-18))
    zg = (grid_mean - best) / grid_sd
    assert ei.mean() > 2 * np.mean(
        grid_sd * (zg * stats.norm.cdf(zg) + stats.norm.pdf(zg))
    )
    with pytest.raises(ValueError, match="num_pool"):
        sample_representers(
            jax.random.key(0), posterior, num_representers=8, num_pool=4
        )
