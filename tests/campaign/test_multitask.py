"""Multi-task campaigns: ask and tell per task, stored and resumed."""

import numpy as np
import pytest

import ppbo
from ppbo.campaign.transforms import model_data, task_view


def _campaign(storage, **kwargs):
    return ppbo.Optimizer(
        {"x": ppbo.Real(0.0, 1.0)},
        surrogate={"name": "multitask_gp", "num_tasks": 2},
        inference=ppbo.MAP(num_restarts=2),
        n_initial=0,
        optimizer_options={"num_raw": 32, "num_restarts": 2},
        storage=storage,
        name="mt",
        **kwargs,
    )


def _f(x, task):
    return (x - 0.3) ** 2 if task == 0 else (x - 0.7) ** 2 + 0.1


def _start(opt):
    for x, task in ((0.1, 0), (0.5, 0), (0.9, 0), (0.2, 1), (0.8, 1)):
        opt.add({"x": x}, _f(x, task), task=task)
    trial = opt.ask(task=1)
    opt.tell(trial, _f(trial.params["x"], 1), task=1)
    return trial


def test_asks_are_per_task_stored_and_resumed(tmp_path):
    uninterrupted = _campaign(None)
    trial = _start(uninterrupted)
    assert trial.task == 1 and trial.origin == "model"
    np.testing.assert_array_equal(
        np.asarray(uninterrupted.posterior.data.unpadded()[2]), [0, 0, 0, 1, 1]
    )
    expected = uninterrupted.ask(task=0)
    path = str(tmp_path / "mt.db")
    _start(_campaign(path))
    reloaded = ppbo.Optimizer.load(path, "mt")
    assert [t.task for t in reloaded.get_trials()] == [0, 0, 0, 1, 1, 1]
    got = reloaded.ask(task=0)
    assert got.task == 0 and got.params == expected.params


def test_the_acquisition_of_a_task_sees_that_tasks_predictions():
    X = np.array([[0.1], [0.5], [0.9], [0.2], [0.8]])
    data, _ = model_data(X, [0.0, 1.0, 0.0, 2.0, -1.0], task=[0, 0, 0, 1, 1])
    surrogate = ppbo.campaign.registry.resolve_surrogate("multitask_gp")[0]
    posterior = ppbo.fit(
        surrogate,
        data,
        ppbo.MAP(num_restarts=2),
        ppbo.campaign.keys.campaign_key(0, 0, "step"),
    )
    grid = np.linspace(0, 1, 7)[:, None]
    for task in (0, 1):
        view = task_view(posterior, task)
        for got, expected in zip(
            view.predict(grid), posterior.predict(grid, task=task), strict=True
        ):
            np.testing.assert_allclose(np.asarray(got), np.asarray(expected))
    assert task_view(posterior, 1).surrogate is task_view(posterior, 1).surrogate


def test_tasks_are_checked(tmp_path):
    opt = _campaign(None)
    with pytest.raises(ValueError, match=r"task must be an integer in \[0, 2\)"):
        opt.ask(task=2)
    trial = opt.ask(task=1)
    with pytest.raises(ValueError, match="was asked for task 1, told task=0"):
        opt.tell(trial, 1.0, task=0)
    single = ppbo.Optimizer({"x": ppbo.Real(0.0, 1.0)})
    with pytest.raises(ValueError, match="needs a multi-task surrogate"):
        single.ask(task=0)


def test_recommendations_are_per_task():
    opt = _campaign(None)
    _start(opt)
    first, second = opt.recommend(task=0), opt.recommend(task=1)
    # task 0 has its minimum at 0.3, task 1 at 0.7 (observed on both sides)
    assert first.params["x"] < second.params["x"]
    assert opt.recommend().params == first.params  # task 0 by default


def test_pending_points_are_believed_in_their_own_task():
    from ppbo.campaign.ask import _believed_view

    X = np.array([[0.1], [0.5], [0.9], [0.2], [0.8]])
    data, _ = model_data(X, [0.0, 1.0, 0.0, 2.0, -1.0], task=[0, 0, 0, 1, 1])
    surrogate = ppbo.campaign.registry.resolve_surrogate("multitask_gp")[0]
    posterior = ppbo.fit(
        surrogate,
        data,
        ppbo.MAP(num_restarts=2),
        ppbo.campaign.keys.campaign_key(0, 0, "step"),
    )
    x = np.array([[0.35]])
    _, before = task_view(posterior, 0).predict_marginal(x)
    same = _believed_view(posterior, [x[0]], [1], task=1)
    other = _believed_view(posterior, [x[0]], [1], task=0)
    # the believed row is a task-1 row at task 1's mixture mean
    _, y, t = same.data.unpadded()
    mean1, _ = task_view(posterior, 1).predict_marginal(x)
    assert t[-1] == 1 and y[-1] == pytest.approx(float(mean1[0]), rel=1e-12)
    _, var_same = same.predict_marginal(x)
    _, var_other = other.predict_marginal(x)
    # task 1's variance at x falls below the noise variance (one sample: v n /
    # (v + n) after a noisy observation there); task 0's only by the correlation
    assert float(var_same[0]) < float(np.max(posterior.noise_var(x, task=1)))
    assert float(var_same[0]) < float(var_other[0]) < float(before[0])
    as_task_0 = task_view(posterior.condition_on_pending(x), 0)
    assert float(as_task_0.predict_marginal(x)[1][0]) < float(var_other[0])


def test_a_multi_task_batch_is_asked_point_by_point(tmp_path):
    opt = _campaign(None)
    _start(opt)
    running = opt.ask(task=1)
    batch = opt.ask(2, task=0)
    assert [t.task for t in batch] == [0, 0]
    xs = [running.params["x"]] + [t.params["x"] for t in batch]
    assert len(set(xs)) == 3
