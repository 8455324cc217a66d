"""NNet: the real training objective, the shipped evaluations and the GP ground truth.

References are independent of the module's own code paths: a dense GP solve with
SciPy distances and a general linear solve, ppbo's JAX GP at fixed hyperparameters,
the Sobol design rebuilt from SciPy, and re-running the training for shipped rows.
"""

import json
import math
import pickle

import jax
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.spatial.distance import cdist
from scipy.stats import qmc

import ppbo
from ppbo import benchmarks
from ppbo.benchmarks import nnet
from ppbo.models import gp

NUM_VALIDATION = 1497
BOUNDS = np.array(nnet.BOUNDS)


@pytest.fixture(scope="module")
def problem():
    return benchmarks.get("nnet")


@pytest.fixture(scope="module")
def fit():
    with nnet._data_file("nnet_gp.json").open() as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def shipped():
    return nnet.load_evaluations()


def _unit(X):
    return (X - BOUNDS[:, 0]) / (BOUNDS[:, 1] - BOUNDS[:, 0])


def _dense_gp(fit, X, y):
    """Standardised data, kernel matrix with noise and alpha, by a general solve."""
    U = _unit(X)
    z = (y - fit["y_mean"]) / fit["y_std"]
    lengthscale = np.asarray(fit["lengthscale"])

    def kernel(A, B):
        s = math.sqrt(5) * cdist(A / lengthscale, B / lengthscale)
        return fit["outputscale"] * (1 + s + s**2 / 3) * np.exp(-s)

    K = kernel(U, U) + (fit["noise"] + fit["jitter"]) * np.eye(len(y))
    alpha = np.linalg.solve(K, z - fit["mean"])
    return kernel, U, K, alpha


# ---------------------------------------------------------------------------------
# The real objective.


def test_validation_error_is_a_noisy_reproducible_fraction():
    X = np.column_stack([np.linspace(-6, -1, 8), np.linspace(100, 400, 8)])
    first = nnet.validation_error(jax.random.key(0), X)
    again = nnet.validation_error(jax.random.key(0), X)
    other = nnet.validation_error(jax.random.key(1), X)
    assert first.shape == (8,) and first.dtype == np.float64
    assert np.all(np.isfinite(first)) and np.all((first >= 0) & (first <= 1))
    # Fractions of the validation set, exactly.
    np.testing.assert_allclose(first * NUM_VALIDATION, np.rint(first * NUM_VALIDATION))
    np.testing.assert_array_equal(first, again)
    # Eight independent trainings: all eight agreeing by chance is negligible.
    assert np.sum(first != other) >= 4, (first, other)
    # One point with its split key gives the batch's value (the documented scheme).
    key = jax.random.split(jax.random.key(0), 8)[5]
    single = nnet.validation_error(key, X[5])
    assert isinstance(single, float) and single == first[5]


def test_more_iterations_reduce_error_at_a_sensible_weight_decay():
    # lambda = 1e-4, eight trainings each: 100 Adam steps leave the network
    # under-trained. Margin: four standard errors of the difference of means.
    few = nnet.validation_error(jax.random.key(2), np.tile([-4.0, 100.0], (8, 1)))
    many = nnet.validation_error(jax.random.key(3), np.tile([-4.0, 1000.0], (8, 1)))
    gap = few.mean() - many.mean()
    standard_error = math.sqrt(few.var(ddof=1) / 8 + many.var(ddof=1) / 8)
    assert gap > 4 * standard_error, (few, many)
    assert many.max() < 0.1  # 90% of the digits right after 1000 steps


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (np.zeros(3), r"shape \(2,\) or \(m, 2\), got \(3,\)"),
        (np.array([-4.0, np.nan]), r"x\[0, 1\] = nan"),
        (np.array([[-4.0, 500.0], [0.0, 500.0]]), r"x\[1, 0\] = 0.0 is outside"),
        (np.array([-4.0, 5000.0]), r"5000.0 is outside the bounds \[100.0, 1000.0\]"),
        (np.array(["a", "b"]), "dtype <U1"),
    ],
)
def test_bad_points_are_named(x, message):
    with pytest.raises(ValueError, match=message):
        nnet.validation_error(jax.random.key(0), x)


# ---------------------------------------------------------------------------------
# The shipped evaluations.


def test_shipped_evaluations_are_the_sobol_design_in_bounds(shipped):
    X, y = shipped
    assert X.shape == (1000, 2) and y.shape == (1000,)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    assert np.all((X >= BOUNDS[:, 0]) & (X <= BOUNDS[:, 1]))
    assert np.all((y >= 0) & (y <= 1))
    np.testing.assert_allclose(y * NUM_VALIDATION, np.rint(y * NUM_VALIDATION))
    design = qmc.Sobol(2, rng=np.random.default_rng(0)).random_base2(10)[:1000]
    np.testing.assert_allclose(_unit(X), design, rtol=0, atol=1e-12)


def test_shipped_rows_reproduce(shipped):
    # Row i is the training run with key split(key(0), 1000)[i]. A float32 change
    # in a new JAX release may flip a digit or two; a different draw differs by
    # several (noise std 4-15 validation digits), so eight rows within two digits
    # each would not happen by chance. If this fails after an upgrade, rerun
    # benchmarks/make_nnet_data.py.
    X, y = shipped
    keys = jax.random.split(jax.random.key(0), 1000)
    rows = np.argsort(X[:, 1])[::125]  # spread over the iteration counts
    again = np.array([nnet.validation_error(keys[i], X[i]) for i in rows])
    np.testing.assert_allclose(again, y[rows], rtol=0, atol=2.5 / NUM_VALIDATION)


# ---------------------------------------------------------------------------------
# The GP ground truth.


def test_ground_truth_is_the_dense_gp_mean(problem, fit, shipped):
    X, y = shipped
    kernel, U, _, alpha = _dense_gp(fit, X, y)
    rng = np.random.default_rng(0)
    T = problem.from_unit(rng.random((200, 2)))
    expected = fit["y_mean"] + fit["y_std"] * (
        fit["mean"] + kernel(_unit(T), U) @ alpha
    )
    np.testing.assert_allclose(problem(T), expected, rtol=1e-9, atol=1e-12)


def test_ground_truth_is_ppbos_gp_at_the_stored_hyperparameters(problem, fit, shipped):
    X, y = shipped
    data = ppbo.Dataset(_unit(X), (y - fit["y_mean"]) / fit["y_std"], capacity=1000)
    params = {k: fit[k] for k in ("lengthscale", "outputscale", "noise", "mean")}
    posterior = ppbo.fit(
        gp.surrogate(kernel="matern52", mean="constant"),
        data,
        ppbo.Fixed(params),
        jax.random.key(0),
    )
    U = np.random.default_rng(1).random((100, 2))
    mean, _ = posterior.predict(U)
    expected = fit["y_mean"] + fit["y_std"] * np.asarray(mean[0])
    np.testing.assert_allclose(
        problem(problem.from_unit(U)), expected, rtol=1e-8, atol=1e-12
    )


def test_residuals_match_the_fitted_noise(problem, fit, shipped):
    X, y = shipped
    _, _, K, alpha = _dense_gp(fit, X, y)
    noise = fit["noise"] + fit["jitter"]
    n = y.size
    # In standardised units the in-sample residual is noise * alpha; under the
    # model E[mean r^2] = noise^2 tr(K^-1) / n. At the MAP the likelihood's noise
    # gradient, (alpha' alpha - tr K^-1) / 2, balances only the noise prior's, small
    # for n = 1000: the two agree closely.
    residual = (y - problem(X)) / fit["y_std"]
    np.testing.assert_allclose(residual, noise * alpha, rtol=1e-7, atol=1e-10)
    expected = noise**2 * np.trace(np.linalg.inv(K)) / n
    assert np.mean(residual**2) == pytest.approx(expected, rel=0.02)
    # In the problem's units: smaller than the noise (the mean follows the data),
    # but not much (1000 points, a smooth fit).
    ratio = np.var(y - problem(X)) / problem.noise_var
    assert 0.7 < ratio < 1.0, ratio


def test_problem_fields(problem, fit):
    assert problem.name == "nnet" and problem.dim == 2
    assert problem.direction == "minimize"
    np.testing.assert_array_equal(problem.bounds, BOUNDS)
    assert problem.noise_var == pytest.approx(fit["y_std"] ** 2 * fit["noise"])
    assert benchmarks.get("nnet", noise_var=0.0).noise_var == 0.0
    assert benchmarks.options("nnet") == {}
    clone = pickle.loads(pickle.dumps(problem))
    x = problem.optimizers[0]
    assert clone(x) == problem(x)


def test_optimum_is_attained_and_never_beaten(problem):
    x_star = problem.optimizers[0]
    assert problem.optimizers.shape == (1, 2)
    assert np.all((x_star >= BOUNDS[:, 0]) & (x_star <= BOUNDS[:, 1]))
    assert problem(x_star) == problem.optimum_value
    assert 0.03 < problem.optimum_value < 0.06
    slack = 1e-12
    values = problem(problem.from_unit(np.random.default_rng(2).random((20_000, 2))))
    assert values.min() >= problem.optimum_value - slack
    # Nor do the shipped design points, nor a local polish from the optimiser.
    assert problem(nnet.load_evaluations()[0]).min() >= problem.optimum_value - slack
    result = minimize(
        problem, x_star, method="Nelder-Mead", bounds=BOUNDS.tolist(),
        options={"xatol": 1e-9, "fatol": 1e-14},
    )  # fmt: skip
    assert result.fun >= problem.optimum_value - 1e-12
