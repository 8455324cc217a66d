import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppbo import Dataset, bucket_capacity


def test_bucket_capacity_is_monotone_and_bounded():
    previous = 0
    for n in range(1, 2000):
        c = bucket_capacity(n)
        assert c >= n and c >= previous
        assert c <= max(8, 1.25 * n + 8)
        previous = c
    assert bucket_capacity(50) == 56 and bucket_capacity(64) == 64
    assert bucket_capacity(65) == 80


def test_padding_and_mask():
    X = np.random.default_rng(0).random((5, 3))
    y = np.arange(5.0)
    data = Dataset(X, y)
    assert data.capacity == 8 and data.n == 5 and data.dim == 3
    assert data.X.dtype == jnp.float64 and data.task.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(data.mask), [1] * 5 + [0] * 3)
    X0, y0, t0 = data.unpadded()
    np.testing.assert_array_equal(X0, X)
    np.testing.assert_array_equal(y0, y)
    np.testing.assert_array_equal(t0, 0)


def test_append_keeps_bucket_and_treedef():
    data = Dataset(np.zeros((5, 2)), np.zeros(5))
    more = data.append([[0.5, 0.5]], [1.0])
    assert more.n == 6 and more.capacity == data.capacity
    assert jax.tree.structure(more) == jax.tree.structure(data)
    assert [a.shape for a in jax.tree.leaves(more)] == [
        a.shape for a in jax.tree.leaves(data)
    ]
    grown = Dataset(np.zeros((8, 2)), np.zeros(8)).append([[0.1, 0.2]], [3.0])
    assert grown.capacity == 16 and grown.n == 9


def test_pytree_round_trip_under_jit():
    data = Dataset(np.ones((3, 2)), np.arange(3.0), task=[0, 1, 1])
    out = jax.jit(lambda d: d)(data)
    assert isinstance(out, Dataset)
    np.testing.assert_array_equal(np.asarray(out.task), [0, 1, 1, 0, 0, 0, 0, 0])
    assert out.num_tasks == 2


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.zeros((0, 2)), np.zeros(0), "X is empty"),
        (np.zeros(3), np.zeros(3), r"X must have shape \(n, d\)"),
        (np.zeros((3, 2)), np.zeros(2), r"y must have shape \(3,\)"),
        (
            np.zeros((3, 2), np.float32),
            np.zeros(3),
            "X must be float64, got dtype float32",
        ),
        (np.zeros((3, 2)), np.zeros(3, np.float32), "y must be float64"),
        (np.array([[0.0, np.nan]]), np.zeros(1), r"X\[0, 1\] = nan"),
        (np.zeros((2, 1)), np.array([1.0, np.inf]), r"y\[1\] = inf"),
        (np.array([["a"]]), np.zeros(1), "X must be numeric"),
    ],
)
def test_bad_input_names_field_and_value(X, y, match):
    with pytest.raises(ValueError, match=match):
        Dataset(X, y)


def test_bad_task_and_capacity():
    with pytest.raises(ValueError, match="task ids must be >= 0"):
        Dataset(np.zeros((2, 1)), np.zeros(2), task=[0, -1])
    with pytest.raises(ValueError, match="task must hold integer"):
        Dataset(np.zeros((2, 1)), np.zeros(2), task=[0.5, 1.0])
    with pytest.raises(ValueError, match=r"task must have shape \(2,\)"):
        Dataset(np.zeros((2, 1)), np.zeros(2), task=[0])
    with pytest.raises(ValueError, match="capacity must be >= n = 3"):
        Dataset(np.zeros((3, 1)), np.zeros(3), capacity=2)
    with pytest.raises(ValueError, match=r"X must have shape \(k, 2\)"):
        Dataset(np.zeros((3, 2)), np.zeros(3)).append(np.zeros((1, 3)), [1.0])


def test_float32_jax_array_is_rejected():
    with pytest.raises(ValueError, match="float32"):
        Dataset(jnp.zeros((2, 1), dtype=jnp.float32), np.zeros(2))


def test_requires_x64():
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(RuntimeError, match="jax_enable_x64"):
            Dataset(np.zeros((1, 1)), np.zeros(1))
    finally:
        jax.config.update("jax_enable_x64", True)
