"""Campaigns with source tasks: the transfer data contract, storage and resume.

References: the contract's dataset built by hand with numpy (source rows first,
per-task standardisation, ICM task ids), the uninterrupted campaign (exact
resume), and the incumbent computed from the target rows only.
"""

import warnings

import jax
import numpy as np
import pytest

import ppbo
from ppbo.acquisition.base import Sample, best_observed_mean
from ppbo.campaign.transforms import standardize_outputs
from ppbo.models import gp
from ppbo.storage import SQLiteStorage

SPACE = {"x": ppbo.Real(0.0, 10.0)}
FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}
MAP = ppbo.MAP(num_restarts=2, max_iterations=50)


def f(x, shift):
    return x * np.sin(x + np.pi + shift) + x / 10.0


def objective(trial):
    return float(f(trial.params["x"], 0.0))


def sources(count=2, n=8):
    rng = np.random.default_rng(3)
    out = []
    for k in range(count):
        X = rng.uniform(0.0, 10.0, (n, 1))
        out.append(ppbo.Source(f"s{k}", X, f(X[:, 0], np.pi * k / 12)))
    return out


def _make(storage, name, acquisition, direction="minimize", **options):
    return ppbo.Optimizer(
        SPACE,
        surrogate="multitask_gp",
        inference=MAP,
        acquisition=acquisition,
        direction=direction,
        n_initial=3,
        seed=5,
        storage=storage,
        name=name,
        optimizer_options=FAST,
        sources=sources(),
        **options,
    )


def _run(run, storage, name, acquisition, steps, stop_at=None, **options):
    return run(
        lambda: _make(storage, name, acquisition, **options),
        lambda: ppbo.Optimizer.load(storage, name),
        objective,
        steps,
        stop_at,
    )


@pytest.mark.parametrize("acquisition", ["ei", "ucb"])
def test_transfer_campaign_resumes_exactly(tmp_path, acquisition, interrupted_campaign):
    run = interrupted_campaign
    whole = _run(run, SQLiteStorage(tmp_path / "a.db"), "a", acquisition, 6)
    path = tmp_path / "b.db"
    resumed = _run(run, SQLiteStorage(path), "b", acquisition, 7, stop_at=5)
    assert [t.params for t in whole] == [t.params for t in resumed]
    assert [t.origin for t in resumed].count("model") == 3
    # the sources came back from storage, in order and exactly
    reloaded = ppbo.Optimizer.load(str(path), "b")
    stored = reloaded.config["sources"]
    assert [s["name"] for s in stored] == ["s0", "s1"]
    assert stored[1]["values"] == sources()[1].y.tolist()
    assert reloaded.config["surrogate"]["num_tasks"] == 3


def test_the_model_sees_the_contracts_dataset():
    opt = _make(None, "c", "ei", direction="maximize")
    for _ in range(4):
        trial = opt.ask()
        opt.tell(trial, objective(trial))
    data = opt.posterior.data  # fitted at the 4th ask: 3 target rows
    given = sources()
    X, y, task = data.unpadded()
    source = data.unpadded_fields()["source"]
    assert source.tolist() == [0] * 8 + [1] * 8 + [-1] * 3
    assert task.tolist() == [1] * 8 + [2] * 8 + [0] * 3  # ICM: target = task 0
    for k, s in enumerate(given):
        rows = source == k
        np.testing.assert_allclose(X[rows], np.asarray(s.X) / 10.0)
        # maximised: each source standardised on its own, not flipped
        np.testing.assert_allclose(y[rows], (s.y - s.y.mean()) / s.y.std())
    values = [t.value for t in opt.get_trials()[:3]]
    np.testing.assert_allclose(y[source == -1], standardize_outputs(values).y)
    # the best trial is the target's own
    assert opt.best_trial.value == max(t.value for t in opt.get_trials())


def test_a_surrogate_without_transfer_ignores_sources_and_says_so():
    with pytest.warns(ppbo.CampaignWarning, match="'gp' does not use source tasks"):
        opt = ppbo.Optimizer(SPACE, sources=sources(), n_initial=2, inference=MAP)
    for _ in range(2):
        trial = opt.ask()
        opt.tell(trial, objective(trial))
    data = opt._setup.model(opt.get_trials()).data
    assert data.n == 2 and data.source is None
    with pytest.raises(ValueError, match="needs a surrogate that uses sources"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ppbo.CampaignWarning)
            ppbo.Optimizer(SPACE, sources=sources(), source_selection="bandit")


def test_bad_transfer_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="source_selection must be one of"):
        _make(None, "d", "ei", source_selection="greedy")
    with pytest.raises(ValueError, match=r"gamma must be in \(0, 1\]"):
        _make(
            None,
            "d",
            "ei",
            source_selection="bandit",
            source_selection_options={"gamma": 0.0},
        )
    with pytest.raises(ValueError, match="the sources have no meta_features"):
        _make(None, "d", "ei", meta_features=[1.0])
    with pytest.raises(ValueError, match=r"source 's9': X\[0\]: parameter 'x' = 11.0"):
        ppbo.Optimizer(
            SPACE,
            surrogate="multitask_gp",
            sources=[ppbo.Source("s9", [[11.0]], [1.0])],
        )
    path = str(tmp_path / "e.db")
    _make(path, "e", "ei")
    with pytest.raises(ValueError, match="campaign exists with different sources"):
        ppbo.Optimizer(
            SPACE,
            surrogate="multitask_gp",
            storage=path,
            name="e",
            sources=sources(count=1),
            load_if_exists=True,
        )


def test_the_incumbent_ignores_a_source_row_with_a_larger_mean():
    X = np.array([[0.2], [0.5], [0.8]])
    y = np.array([5.0, 0.3, -0.2])  # the source row (first) is far larger
    data = ppbo.Dataset(X, y, source=[0, -1, -1])
    params = {"lengthscale": [0.2], "outputscale": 1.0, "noise": 1e-3, "mean": 0.0}
    posterior = ppbo.fit(gp.surrogate(), data, ppbo.Fixed(params), jax.random.key(0))
    one = jax.tree.map(lambda v: v[0], posterior.samples)
    cache = jax.tree.map(lambda v: v[0], posterior.cache)
    sample = Sample(one, cache, posterior.data, posterior.surrogate)
    mean, _ = posterior.predict(X)
    mean = np.asarray(mean)[0]
    assert mean[0] > mean[1:].max()  # the source row's mean is the largest
    assert float(best_observed_mean(sample)) == pytest.approx(mean[1:].max())


def test_registry_entries_get_num_sources_and_meta_features(monkeypatch):
    from ppbo.campaign import registry

    built = []

    def builder(num_sources=0, meta_features=None, kernel="matern52"):
        built.append((num_sources, meta_features))
        return gp.surrogate(kernel=kernel)

    entry = (builder, {"num_sources": 0, "meta_features": [], "kernel": "matern52"})
    monkeypatch.setitem(registry.SURROGATES, "fake_transfer", entry)
    given = [
        ppbo.Source(s.name, s.X, s.y, meta_features=[float(k), 1.0])
        for k, s in enumerate(sources(count=3))
    ]
    options = {"surrogate": "fake_transfer", "n_initial": 2, "sources": given}
    opt = ppbo.Optimizer(SPACE, meta_features=[9.0, 1.0], **options)
    spec = opt.config["surrogate"]
    assert spec["num_sources"] == 3
    assert spec["meta_features"] == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [9.0, 1.0]]
    assert built[-1] == (3, spec["meta_features"])  # plain lists for the builder
    for _ in range(2):
        trial = opt.ask()
        opt.tell(trial, objective(trial))
    data = opt._setup.model(opt.get_trials()).data
    assert data.unpadded_fields()["source"].tolist() == [0] * 8 + [1] * 8 + [2] * 8 + [
        -1,
        -1,
    ]
    # the bandit's single-source variant: one source and its meta-features row
    bandit = ppbo.Optimizer(
        SPACE, meta_features=[9.0, 1.0], source_selection="bandit", **options
    )
    assert bandit.config["surrogate"]["num_sources"] == 1
    assert bandit.config["surrogate"]["meta_features"] == [[0.0, 1.0], [9.0, 1.0]]
    # without meta-features every task gets the row [0.0]
    plain = ppbo.Optimizer(SPACE, surrogate="fake_transfer", sources=sources(count=2))
    assert plain.config["surrogate"]["meta_features"] == [[0.0]] * 3
