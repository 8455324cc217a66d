"""The random-forest surrogate against scikit-learn's own trees.

Reference: the same forest refitted by scikit-learn with the same seed; its
``predict`` (the mean over trees) and the variance of ``estimators_[b].predict``
across trees (Hutter et al. 2011, §4.3).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.models import forest
from ppbo.surrogate import Capability


def objective(X):
    return np.sin(6.0 * X[:, 0]) + X[:, 1] ** 2 - 0.5 * X[:, 2]


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).random((29, 3))
    return ppbo.Dataset(X, objective(X), capacity=32)


def _sklearn(key, data, kind, num_trees):
    X, y, _ = data.unpadded()
    seed = int(forest.seed_from_key(key))
    options = {"bootstrap": True} if kind == "random_forest" else {}
    return forest.fit_forest(
        seed,
        X,
        y,
        kind=kind,
        n_estimators=num_trees,
        min_samples_split=3,
        min_samples_leaf=1,
        max_features=5.0 / 6.0,
        **options,
    )


@pytest.mark.parametrize("kind", forest.KINDS)
def test_mean_and_variance_are_those_across_sklearns_trees(data, kind):
    surrogate = forest.surrogate(num_trees=12, kind=kind)
    key = jax.random.key(3)
    posterior = ppbo.fit(surrogate, data, ppbo.Train(), key)
    model = _sklearn(key, data, kind, 12)
    X, _, _ = data.unpadded()
    # random points, the training points and points on the split thresholds
    tree = model.estimators_[0].tree_
    on_split = np.tile(X[:1], (8, 1))
    internal = np.flatnonzero(tree.children_left != -1)[:8]
    on_split[np.arange(len(internal)), tree.feature[internal]] = tree.threshold[
        internal
    ]
    Xs = np.vstack([np.random.default_rng(1).random((40, 3)), X, on_split])
    per_tree = np.stack([t.predict(Xs) for t in model.estimators_])
    mean, var = posterior.predict(Xs)
    np.testing.assert_allclose(mean[0], model.predict(Xs), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        var[0], per_tree.var(axis=0) + forest.MIN_VARIANCE, rtol=1e-10, atol=1e-14
    )
    assert np.ptp(per_tree, axis=0).max() > 0.1  # the trees differ
    np.testing.assert_allclose(
        forest.predict_trees(
            {k: v[0] for k, v in posterior.samples.items()}, jnp.asarray(Xs)
        ),
        per_tree,
        rtol=1e-12,
        atol=1e-12,
    )


def test_capabilities_and_gradients():
    surrogate = forest.surrogate(num_trees=4)
    assert surrogate.capabilities == {Capability.SAMPLE_PATHS}
    X = np.random.default_rng(2).random((10, 3))
    posterior = ppbo.fit(
        surrogate, ppbo.Dataset(X, objective(X)), ppbo.Train(), jax.random.key(0)
    )
    params = {k: v[0] for k, v in posterior.samples.items()}

    def total(X):
        mean, var = surrogate.predict(params, posterior.data, X)
        return jnp.sum(mean + var)

    grad = jax.grad(total)(jnp.asarray(X[:3] + 0.01))
    assert np.all(grad == 0.0)  # piecewise constant: a finite, zero gradient


def test_paths_are_single_trees(data):
    surrogate = forest.surrogate(num_trees=6)
    posterior = ppbo.fit(surrogate, data, ppbo.Train(), jax.random.key(1))
    params = {k: v[0] for k, v in posterior.samples.items()}
    Xs = jnp.asarray(np.random.default_rng(4).random((5, 3)))
    per_tree = np.asarray(forest.predict_trees(params, Xs))
    paths = surrogate.paths.draw(jax.random.key(2), params, data, None, 64)
    values = np.asarray(surrogate.paths.evaluate(paths, Xs))
    assert values.shape == (64, 5)
    matches = np.all(values[:, None, :] == per_tree[None, :, :], axis=2)
    assert matches.any(axis=1).all()  # every path is one of the trees
    assert len(np.unique(matches.argmax(axis=1))) > 1  # and not always the same


def test_one_compilation_per_bucket(data, compile_counter):
    surrogate = forest.surrogate(num_trees=4)
    X, y, _ = data.unpadded()

    def fit(n):
        part = ppbo.Dataset(X[:n], y[:n], capacity=32)
        return ppbo.fit(surrogate, part, ppbo.Train(), jax.random.key(n))

    fit(20)
    with compile_counter.measure():
        fit(21)
        fit(22)
    assert compile_counter.count == 0


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="kind"):
        forest.surrogate(kind="boosted")
    with pytest.raises(ValueError, match="num_trees"):
        forest.surrogate(num_trees=0)
