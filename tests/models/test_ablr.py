"""ABLR: shared features, one Bayesian linear head per task.

References: each task's evidence as the Gaussian density of its rows under
``Phi_t Phi_t^T / alpha_t + I / beta_t`` (scipy.stats) and its head's posterior
from dense numpy linear algebra (Bishop 2006, eqs. 3.53-3.59), on the trained
network's features.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import ppbo
from ppbo.models import ablr, dngo
from ppbo.surrogate import Capability

TWO = ablr.surrogate(num_tasks=2, hidden=(16, 16), num_steps=300)
ONE = ablr.surrogate(num_tasks=1, hidden=(16, 16), num_steps=300)


def objective(X, task):
    # task 1 is task 0 shifted and scaled: the features transfer
    return np.sin(6.0 * X[:, 0]) + 0.5 * X[:, 0] + task * (0.3 + 0.2 * X[:, 0])


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).random((20, 1))
    task = np.arange(20) % 2
    y = objective(X, task) + 0.01 * np.random.default_rng(1).normal(size=20)
    return ppbo.Dataset(X, y, task=task, capacity=24)


@pytest.fixture(scope="module")
def posterior(data):
    return ppbo.fit(TWO, data, ppbo.Train(), jax.random.key(1))


def _params(posterior):
    return {k: v[0] for k, v in posterior.samples.items()}


def _features(posterior, X):
    return np.asarray(dngo.features(_params(posterior), jnp.asarray(X)))


def _evidence(Phi, y, alpha, beta):
    cov = Phi @ Phi.T / alpha + np.eye(len(y)) / beta
    return stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)


def test_samples_and_capabilities(posterior):
    assert posterior.samples["alpha"].shape == (1, 2)
    assert posterior.samples["beta"].shape == (1, 2)
    assert Capability.SAMPLE_PATHS not in TWO.capabilities
    assert ONE.capabilities == {
        Capability.PREDICT_JOINT,
        Capability.NOISE,
        Capability.SAMPLE_PATHS,
        Capability.CONDITIONING,
    }


def test_objective_is_the_sum_of_the_per_task_evidences(posterior, data):
    X, y, task = data.unpadded()
    params = _params(posterior)
    Phi = _features(posterior, X)
    reference = sum(
        _evidence(Phi[task == t], y[task == t], params["alpha"][t], params["beta"][t])
        for t in (0, 1)
    )
    value = ablr.negative_log_evidence(params, data, 2)
    np.testing.assert_allclose(-value, reference, rtol=1e-9)


def test_training_lowers_the_objective(posterior, data):
    init = dngo.init_network(jax.random.key(1), (1, 16, 16))
    start = dict(init, alpha=jnp.ones(2), beta=jnp.full(2, 100.0))
    before = ablr.negative_log_evidence(start, data, 2)
    after = ablr.negative_log_evidence(_params(posterior), data, 2)
    assert float(after) < float(before) - 10.0


@pytest.mark.parametrize("task", [0, 1])
def test_each_task_predicts_with_its_own_dense_blr_head(posterior, data, task):
    X, y, tasks = data.unpadded()
    params = _params(posterior)
    alpha, beta = float(params["alpha"][task]), float(params["beta"][task])
    Phi = _features(posterior, X[tasks == task])
    A = alpha * np.eye(Phi.shape[1]) + beta * Phi.T @ Phi
    S = np.linalg.inv(A)
    mean_w = beta * S @ Phi.T @ y[tasks == task]
    Xs = np.linspace(0.0, 1.0, 7)[:, None]
    Phis = _features(posterior, Xs)
    mean, var = posterior.predict(Xs, task=task)
    np.testing.assert_allclose(mean[0], Phis @ mean_w, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        var[0], np.einsum("mi,ij,mj->m", Phis, S, Phis), rtol=1e-7, atol=1e-12
    )
    np.testing.assert_allclose(
        posterior.noise_var(Xs, task=task)[0], 1.0 / beta, rtol=1e-12
    )
    # the shared features fit both tasks, inside the span of each task's data
    inner = X[tasks == task, 0]
    Xi = np.linspace(inner.min(), inner.max(), 25)[:, None]
    mean, _ = posterior.predict(Xi, task=task)
    rmse = np.sqrt(np.mean((np.asarray(mean[0]) - objective(Xi, task)) ** 2))
    assert rmse < 0.2 * np.std(objective(Xi, task))


def test_unknown_task_ids_are_refused_before_compiling(data):
    X, y, _ = data.unpadded()
    bad = ppbo.Dataset(X, y, task=np.full(len(y), 2))
    with pytest.raises(ValueError, match="task"):
        ppbo.fit(TWO, bad, ppbo.Train(), jax.random.key(0))


def test_single_task_sample_paths_have_the_predictive_moments(data):
    X, y, _ = data.unpadded()
    single = ppbo.fit(ONE, ppbo.Dataset(X, y), ppbo.Train(), jax.random.key(2))
    num = 4000
    cache = jax.tree.map(lambda a: a[0], single.cache)
    paths = ONE.paths.draw(jax.random.key(5), _params(single), single.data, cache, num)
    Xs = np.array([[0.1], [0.5], [0.9]])
    values = np.asarray(ONE.paths.evaluate(paths, jnp.asarray(Xs)))
    mean, var = (np.asarray(a[0]) for a in single.predict(Xs))
    # five Monte Carlo standard errors of the sample mean and variance
    np.testing.assert_array_less(np.abs(values.mean(0) - mean), 5 * np.sqrt(var / num))
    np.testing.assert_array_less(
        np.abs(values.var(0, ddof=1) - var), 5 * var * np.sqrt(2 / (num - 1))
    )


def test_one_compilation_per_bucket(data, compile_counter):
    X, y, task = data.unpadded()

    def fit(n):
        part = ppbo.Dataset(X[:n], y[:n], task=task[:n], capacity=24)
        return ppbo.fit(TWO, part, ppbo.Train(), jax.random.key(n))

    fit(14)
    with compile_counter.measure():
        fit(15)
        fit(16)
    assert compile_counter.count == 0


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="num_tasks"):
        ablr.surrogate(num_tasks=0)
    with pytest.raises(ValueError, match="hidden"):
        ablr.surrogate(hidden=())


def test_source_tasks_train_heads_like_task_ids(data):
    # multi-task ABLR on source rows: source k trains head k + 1 and the target
    # head 0, exactly as task ids 1 and 0 do (Perrone et al. 2018, §4)
    X, y, task = data.unpadded()
    sources = ppbo.Dataset(X, y, source=np.where(task == 1, 0, -1), capacity=24)
    transfer = ablr.surrogate(hidden=(16, 16), num_steps=300, num_sources=1)
    by_source = ppbo.fit(transfer, sources, ppbo.Train(), jax.random.key(1))
    by_task = ppbo.fit(TWO, data, ppbo.Train(), jax.random.key(1))
    Xs = np.linspace(0, 1, 7)[:, None]
    pairs = zip(by_source.predict(Xs), by_task.predict(Xs, task=0), strict=True)
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        by_source.predict(Xs, task=1)[0], by_task.predict(Xs, task=1)[0], atol=1e-12
    )
    assert Capability.SAMPLE_PATHS in transfer.capabilities


def test_source_ids_are_checked():
    transfer = ablr.surrogate(hidden=(4,), num_steps=5, num_sources=1)
    X = np.linspace(0, 1, 3)[:, None]
    with pytest.raises(ValueError, match=r"data.source\[1\] = 1"):
        ppbo.fit(
            transfer,
            ppbo.Dataset(X, np.zeros(3), source=[-1, 1, 0]),
            ppbo.Train(),
            jax.random.key(0),
        )
    with pytest.raises(ValueError, match="data.source is None"):
        ppbo.fit(
            transfer, ppbo.Dataset(X, np.zeros(3)), ppbo.Train(), jax.random.key(0)
        )
    with pytest.raises(ValueError, match="not both"):
        ablr.surrogate(num_tasks=2, num_sources=1)
    with pytest.raises(ValueError, match="num_sources must be >= 0"):
        ablr.surrogate(num_sources=-1)
