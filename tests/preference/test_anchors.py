import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
from ppbo.models import preference_gp as pgp
from ppbo.preference import anchors as A


def test_replacement_happens_exactly_when_the_candidate_beats_the_worst_anchor():
    X0, y0 = [[0.1], [0.5], [0.8]], [1.0, 2.0, 0.5]
    # The least promising anchor is row 2 (probability 0.1).
    for p_candidate, replaced in ((0.05, -1), (0.1, -1), (0.1001, 2), (0.6, 2)):
        rest = 1.0 - p_candidate - 0.1
        p = [rest / 2, rest / 2, 0.1, p_candidate]
        X, y, i = A.replace_anchor(X0, y0, [0.3], 7.0, p)
        assert i == replaced
        if replaced < 0:
            assert X.tolist() == X0 and y.tolist() == y0
        else:
            assert X.tolist() == [[0.1], [0.5], [0.3]] and y.tolist() == [1.0, 2.0, 7.0]


def test_replacement_from_joint_draws_of_the_preference_gp():
    data = ppbo.Dataset(
        [[0.1], [0.5], [0.9]], [0.0, 0.0, 0.0], duels=[[1, 0], [1, 2], [2, 0]]
    )
    fixed = {
        "lengthscale": jnp.array([0.3]),
        "outputscale": 1.0,
        "mean": 0.0,
        "preference_noise": 0.05,
        "noise": 0.01,
    }
    post = ppbo.fit(
        pgp.surrogate(beta=1.0), data, pgp.Laplace(16, params=fixed), jax.random.key(0)
    )
    # Row 1 (x = 0.5) beats both others: it replaces the weaker anchor 0.1,
    # while 0.1 does not replace the anchor 0.9 it lost to.
    for X0, x, expect in (([[0.1], [0.9]], 0.5, 0), ([[0.5], [0.9]], 0.1, -1)):
        X0 = np.array(X0)
        pts = jnp.asarray(np.vstack([X0, [[x]]]))
        mean, cov = jax.vmap(
            post.surrogate.predict_joint_one, in_axes=(0, None, None, 0)
        )(post.samples, post.data, pts, post.cache)
        p = A.maximiser_probability(jax.random.key(1), mean, cov, 2048)
        _, _, i = A.replace_anchor(X0, [0.0, 1.0], [x], 2.0, p)
        assert i == expect, p.tolist()
        assert (i >= 0) == bool(p[2] > p[:2].min())


def test_budget_is_never_exceeded():
    rng = np.random.default_rng(0)
    X0, y0 = np.zeros((0, 2)), np.zeros(0)
    for _ in range(20):
        p = rng.dirichlet(np.ones(len(y0) + 1))
        X0, y0, _ = A.add_anchor(X0, y0, rng.random(2), rng.random(), p, budget=4)
        assert X0.shape[0] <= 4 and y0.shape == (X0.shape[0],)
    assert X0.shape[0] == 4


def test_maximiser_probability_matches_a_closed_form():
    # Two independent N(mu_i, 1): P(X1 > X0) = Phi((mu1 - mu0) / sqrt 2).
    from scipy.stats import norm

    p = A.maximiser_probability(
        jax.random.key(0), jnp.array([0.0, 0.5]), jnp.eye(2), 20000
    )
    expect = norm.cdf(0.5 / np.sqrt(2))
    assert abs(float(p[1]) - expect) < 4 * np.sqrt(expect * (1 - expect) / 20000)


def test_sliding_window_keeps_exactly_w():
    times = [0, 3, 1, 3, 2, 5, 4]
    for w in range(1, 9):
        weights = A.observation_weights("sliding_window", times, window=w)
        assert weights.sum() == min(w, len(times))
    weights = A.observation_weights("sliding_window", times, window=3)
    assert weights.tolist() == [0, 0, 0, 1, 0, 1, 1]  # times 5, 4, and the later 3


def test_restart_drops_the_right_rows():
    times = np.array([0, 1, 2, 3, 4, 5])
    w = A.observation_weights("restart", times, now=6, horizon=3)
    assert w.tolist() == [0, 0, 0, 0, 1, 1]  # ages 6..1: keep ages 1, 2
    w = A.observation_weights("restart", times, horizon=3)
    assert w.tolist() == [0, 0, 0, 1, 1, 1]


def test_weighted_penalty_weights_in_the_model_log_density():
    data = ppbo.Dataset(
        [[0.1], [0.4], [0.6], [0.9]],
        [0.3, -0.2, 0.0, 0.5],
        duels=[[0, 1], [2, 1], [3, 0]],
        anchor=[True, True, False, True],
    )
    f = jnp.zeros(data.capacity).at[:4].set(jnp.array([0.5, -0.3, 0.2, 1.1]))
    base = float(pgp.duel_log_likelihood(f, data, 0.2))
    pad = data.duel_capacity - 3
    w = A.observation_weights("weighted_penalty", [2, 2, 2], decay=1.0)
    wd = jnp.concatenate([jnp.asarray(w), jnp.zeros(pad)])
    assert float(pgp.duel_log_likelihood(f, data, 0.2, wd)) == pytest.approx(base)
    w = A.observation_weights("weighted_penalty", [0, 1, 2], decay=0.5)
    assert w.tolist() == [0.25, 0.5, 1.0]
    # A zero weight (restart) equals refitting without the row.
    w = A.observation_weights("restart", [0, 5, 5], horizon=2)
    wd = jnp.concatenate([jnp.asarray(w), jnp.zeros(pad)])
    dropped = ppbo.Dataset(
        data.X[:4], data.y[:4], duels=[[2, 1], [3, 0]], anchor=[True, True, False, True]
    )
    assert float(pgp.duel_log_likelihood(f, data, 0.2, wd)) == pytest.approx(
        float(pgp.duel_log_likelihood(f, dropped, 0.2))
    )


def test_bad_input_names_the_field_and_value():
    with pytest.raises(ValueError, match="strategy.*'forgetting'"):
        A.observation_weights("forgetting", [0, 1], horizon=1)
    with pytest.raises(ValueError, match="'window'"):
        A.observation_weights("sliding_window", [0, 1], horizon=1)
    with pytest.raises(ValueError, match="window=0"):
        A.observation_weights("sliding_window", [0, 1], window=0)
    with pytest.raises(ValueError, match="decay=1.5"):
        A.observation_weights("weighted_penalty", [0, 1], decay=1.5)
    with pytest.raises(ValueError, match=r"times\[1\] = nan"):
        A.observation_weights("restart", [0, np.nan], horizon=1)
    with pytest.raises(ValueError, match="budget=0"):
        A.add_anchor([[0.1]], [1.0], [0.2], 1.0, [0.5, 0.5], budget=0)
    with pytest.raises(ValueError, match=r"L = 2, budget=1"):
        A.add_anchor([[0.1], [0.2]], [1.0, 2.0], [0.3], 1.0, [0.3] * 3, budget=1)
    with pytest.raises(ValueError, match=r"y0\[1\] = nan"):
        A.replace_anchor([[0.1], [0.2]], [1.0, np.nan], [0.3], 1.0, [0.3] * 3)
    with pytest.raises(ValueError, match=r"probability\[0\] = -0.1"):
        A.replace_anchor([[0.1]], [1.0], [0.3], 1.0, [-0.1, 0.5])
    with pytest.raises(ValueError, match=r"probability must have shape \(2,\)"):
        A.replace_anchor([[0.1]], [1.0], [0.3], 1.0, [0.5])
    with pytest.raises(ValueError, match=r"candidate must have shape \(1,\)"):
        A.replace_anchor([[0.1]], [1.0], [0.3, 0.2], 1.0, [0.5, 0.5])
