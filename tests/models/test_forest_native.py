"""The forest's native integer and categorical inputs.

References: the space's own decoding (:meth:`ppbo.Space.from_unit`), category
means computed with numpy, scikit-learn's forest grown on features built from
those, the best of all subset splits found by brute force, and the
uninterrupted campaign that a resumed one must reproduce.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.tree import DecisionTreeRegressor

import ppbo
from ppbo.models import forest

CHOICES = ["a", "b", "c", "d"]
SPACE = ppbo.Space(
    {
        "x": ppbo.Real(0.0, 1.0),
        "n": ppbo.Integer(1, 6),
        "m": ppbo.Integer(1, 100, log=True),
        "c": ppbo.Categorical(CHOICES),
    }
)


def objective(params):
    effect = {"a": 0.0, "b": 1.5, "c": 0.2, "d": 1.2}[params["c"]]
    return (
        np.sin(5.0 * params["x"])
        + 0.2 * params["n"]
        + np.log(params["m"]) * 0.3
        + (effect)
    )


def _snapped_data(n, capacity, seed=0):
    U = np.stack([SPACE.snap(u) for u in np.random.default_rng(seed).random((n, 7))])
    y = np.array([objective(SPACE.from_unit(u)) for u in U])
    return ppbo.Dataset(U, (y - y.mean()) / y.std(), capacity=capacity)


def _reference_features(U, rank_of):
    """Features from the space's decoding: unit x, integer values, category rank."""
    rows = []
    for u in U:
        p = SPACE.from_unit(u)
        rows.append([u[0], p["n"], p["m"], rank_of[CHOICES.index(p["c"])]])
    return np.array(rows, dtype=np.float64)


def _reference_ranks(U, y):
    """Ranks of the categories by mean target (numpy), unobserved at the mean."""
    chosen = np.argmax(U[:, 3:7], axis=1)
    means = [
        y[chosen == c].mean() if np.any(chosen == c) else y.mean() for c in range(4)
    ]
    order = np.argsort(means, kind="stable")
    rank = np.empty(4)
    rank[order] = np.arange(4)
    return rank


def test_features_are_the_parameters_the_space_decodes():
    rng = np.random.default_rng(0)
    U = rng.random((300, SPACE.dim))
    U[:11, 1] = np.arange(11) / 10  # integer values k + 1/2: half to even
    U[11:22, 2] = np.arange(11) / 10
    rank = np.array([2.0, 0.0, 3.0, 1.0])
    features = np.asarray(forest.encode(SPACE, jnp.asarray(rank), jnp.asarray(U)))
    np.testing.assert_array_equal(features, _reference_features(U, rank))
    assert forest.columns_of(SPACE) == [
        ["real"],
        ["integer", 1, 6, False],
        ["integer", 1, 100, True],
        ["categorical", 4],
    ]


def test_category_ranks_are_the_order_of_the_category_means():
    data = _snapped_data(13, 16)
    U, y, _ = data.unpadded()
    U = U.copy()
    chosen = np.argmax(U[:, 3:7], axis=1)
    U[:, 3:7] = np.eye(4)[np.where(chosen == 2, 0, chosen)]
    data = ppbo.Dataset(U, y, capacity=16)  # category "c" unobserved
    ranks = forest.category_ranks(SPACE, data.X, data.y, data.mask)
    np.testing.assert_array_equal(np.asarray(ranks), _reference_ranks(U, y))


@pytest.mark.parametrize("kind", forest.KINDS)
def test_predictions_are_sklearns_on_the_decoded_features(kind):
    data = _snapped_data(27, 32)
    surrogate = forest.surrogate(num_trees=10, kind=kind, columns=SPACE)
    key = jax.random.key(5)
    posterior = ppbo.fit(surrogate, data, ppbo.Train(), key)
    U, y, _ = data.unpadded()
    rank = _reference_ranks(U, y)
    np.testing.assert_array_equal(posterior.samples["rank"][0], rank)
    options = {"bootstrap": True} if kind == "random_forest" else {}
    model = forest.fit_forest(
        int(forest.seed_from_key(key)),
        _reference_features(U, rank),
        y,
        kind=kind,
        n_estimators=10,
        min_samples_split=3,
        min_samples_leaf=1,
        max_features=5.0 / 6.0,
        **options,
    )
    # new unsnapped points (predicted at the values they would run at) and data
    Xs = np.vstack([np.random.default_rng(1).random((60, SPACE.dim)), U])
    reference = _reference_features(Xs, rank)
    per_tree = np.stack([t.predict(reference) for t in model.estimators_])
    mean, var = posterior.predict(Xs)
    np.testing.assert_allclose(
        mean[0], model.predict(reference), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        var[0], per_tree.var(axis=0) + forest.MIN_VARIANCE, rtol=1e-10, atol=1e-14
    )
    assert np.ptp(per_tree, axis=0).max() > 0.1  # the trees differ


def test_predictions_and_paths_are_those_of_the_snapped_points():
    data = _snapped_data(20, 32)
    surrogate = forest.surrogate(num_trees=8, columns=forest.columns_of(SPACE))
    posterior = ppbo.fit(surrogate, data, ppbo.Train(), jax.random.key(2))
    U = np.random.default_rng(3).random((50, SPACE.dim))
    snapped = np.stack([SPACE.snap(u) for u in U])
    for a, b in zip(posterior.predict(U), posterior.predict(snapped), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    params = {k: v[0] for k, v in posterior.samples.items()}
    paths = surrogate.paths.draw(jax.random.key(4), params, data, None, 16)
    np.testing.assert_array_equal(
        surrogate.paths.evaluate(paths, jnp.asarray(U)),
        surrogate.paths.evaluate(paths, jnp.asarray(snapped)),
    )


def _sse(y, groups):
    return sum(((y[g] - y[g].mean()) ** 2).sum() for g in groups if g.any())


def test_one_split_separates_the_best_category_subset_an_index_would_lump():
    # five categories, three rows each; the low ones (a, c, e) and the high ones
    # (b, d) alternate, so no split of the index order separates them
    effect = np.array([0.0, 2.0, 0.2, 1.8, 0.1])
    category = np.repeat(np.arange(5), 3)
    y = effect[category] + 0.05 * np.random.default_rng(0).standard_normal(15)
    data = ppbo.Dataset(np.eye(5)[category], y)
    # reference: every one of the 2^4 - 1 splits of the categories into two sets
    subsets = [
        np.array(s) for r in range(1, 5) for s in itertools.combinations(range(5), r)
    ]
    best = min(
        subsets, key=lambda s: _sse(y, [np.isin(category, s), ~np.isin(category, s)])
    )
    left = np.isin(category, best)
    assert sorted(best.tolist()) in ([0, 2, 4], [1, 3])
    stumps = {"num_trees": 3, "max_depth": 1, "bootstrap": False, "max_features": 1.0}
    native = forest.surrogate(columns=[["categorical", 5]], **stumps)
    posterior = ppbo.fit(native, data, ppbo.Train(), jax.random.key(0))
    mean, _ = posterior.predict(np.eye(5))
    expected = np.where(np.isin(np.arange(5), best), y[left].mean(), y[~left].mean())
    np.testing.assert_allclose(mean[0], expected, rtol=1e-12)
    best_sse = _sse(y, [left, ~left])
    # a continuous index (one feature 0..4) and one-hot columns both lump a high
    # category with low ones: their best single split is far worse
    index = DecisionTreeRegressor(max_depth=1).fit(category[:, None] * 1.0, y)
    index_sse = ((index.predict(category[:, None] * 1.0) - y) ** 2).sum()
    onehot = ppbo.fit(forest.surrogate(**stumps), data, ppbo.Train(), jax.random.key(0))
    onehot_sse = (
        (np.asarray(onehot.predict(np.eye(5)[category])[0][0]) - y) ** 2
    ).sum()
    noise_sse = 15 * 0.05**2 + _sse(effect[category], [left, ~left])
    assert best_sse < 2 * noise_sse
    assert min(index_sse, onehot_sse) > 10 * noise_sse


def test_one_compilation_per_bucket(compile_counter):
    surrogate = forest.surrogate(num_trees=4, columns=SPACE)
    full = _snapped_data(30, 32)
    X, y, _ = full.unpadded()

    def fit(n):
        part = ppbo.Dataset(X[:n], y[:n], capacity=32)
        return ppbo.fit(surrogate, part, ppbo.Train(), jax.random.key(n))

    fit(20)
    with compile_counter.measure():
        fit(21)
        fit(22)
    assert compile_counter.count == 0


def test_bad_columns_are_refused():
    with pytest.raises(ValueError, match=r"columns\[1\] must be"):
        forest.surrogate(columns=[["real"], ["categorical", 1]])
    with pytest.raises(ValueError, match=r"columns\[0\] must be"):
        forest.surrogate(columns=[["integer", 0, 3, True]])
    with pytest.raises(ValueError, match="columns must be a non-empty list"):
        forest.surrogate(columns="real")
    with pytest.raises(ValueError, match="max_depth"):
        forest.surrogate(max_depth=0)
    data = ppbo.Dataset(np.random.default_rng(0).random((5, 2)), np.arange(5.0))
    surrogate = forest.surrogate(num_trees=2, columns=[["real"], ["categorical", 3]])
    with pytest.raises(ValueError, match="describe 4 unit-cube coordinates.*d=2"):
        ppbo.fit(surrogate, data, ppbo.Train(), jax.random.key(0))


FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}
MIXED = {
    "x": ppbo.Real(0.0, 1.0),
    "n": ppbo.Integer(0, 4),
    "c": ppbo.Categorical(["a", "b", "c"]),
}


def mixed_objective(params):
    effect = {"a": 0.5, "b": 0.0, "c": 1.0}[params["c"]]
    return (params["x"] - 0.3) ** 2 + 0.1 * (params["n"] - 3) ** 2 + effect


@pytest.mark.parametrize("acquisition", ["log_ei", "thompson"])
def test_mixed_campaign_resumes_exactly(tmp_path, acquisition, interrupted_campaign):
    def campaign(path, steps, stop_at=None):
        storage = ppbo.storage.SQLiteStorage(path)

        def make():
            return ppbo.Optimizer(
                MIXED,
                surrogate={"name": "forest", "num_trees": 8},
                acquisition=acquisition,
                n_initial=3,
                seed=4,
                storage=storage,
                name="mixed",
                optimizer_options=FAST,
            )

        def load():
            return ppbo.Optimizer.load(storage, "mixed")

        value = lambda trial: mixed_objective(trial.params)  # noqa: E731
        return interrupted_campaign(make, load, value, steps, stop_at)

    whole = campaign(tmp_path / "a.db", 8)
    resumed = campaign(tmp_path / "b.db", 9, stop_at=6)
    assert [t.params for t in whole] == [t.params for t in resumed]
    assert [t.value for t in whole] == [t.value for t in resumed]
    assert [t.origin for t in resumed].count("model") == 5
    for trial in resumed:  # valid values, in the types the space decodes to
        assert type(trial.params["n"]) is int and 0 <= trial.params["n"] <= 4
        assert trial.params["c"] in ("a", "b", "c")
    opt = ppbo.Optimizer.load(ppbo.storage.SQLiteStorage(tmp_path / "b.db"), "mixed")
    assert opt.config["surrogate"]["columns"] == [
        ["real"],
        ["integer", 0, 4, False],
        ["categorical", 3],
    ]
    # the stored posterior keeps the category order of its fit
    assert np.asarray(opt.posterior.samples["rank"]).shape == (1, 3)
