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


# -- optional structured fields: duels, anchor flags, source ids ----------------------


def _structured():
    X = np.linspace(0.0, 1.0, 5)[:, None]
    return Dataset(
        X,
        np.arange(5.0),
        duels=[[0, 1], [3, 2], [4, 0]],
        anchor=np.array([True, False, False, True, False]),
        source=[-1, 0, 0, 1, -1],
    )


def test_optional_fields_default_to_none_and_add_no_leaves():
    data = Dataset(np.zeros((3, 1)), np.zeros(3))
    assert data.duels is None and data.duel_mask is None
    assert data.anchor is None and data.source is None
    assert data.num_duels == 0 and data.duel_capacity == 0
    assert data.unpadded_fields() == {}
    assert len(jax.tree.leaves(data)) == 4  # X, y, task, mask: as before


def test_optional_fields_are_padded_like_hand_built_arrays():
    data = _structured()
    assert data.capacity == 8 and data.duel_capacity == 8 and data.num_duels == 3
    duels = np.zeros((8, 2), np.int32)
    duels[:3] = [[0, 1], [3, 2], [4, 0]]
    np.testing.assert_array_equal(np.asarray(data.duels), duels)
    assert data.duels.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(data.duel_mask), [1] * 3 + [0] * 5)
    anchor = np.array([1, 0, 0, 1, 0, 0, 0, 0], bool)
    np.testing.assert_array_equal(np.asarray(data.anchor), anchor)
    assert data.anchor.dtype == jnp.bool_
    source = np.array([-1, 0, 0, 1, -1, -1, -1, -1], np.int32)
    np.testing.assert_array_equal(np.asarray(data.source), source)
    assert data.source.dtype == jnp.int32
    fields = data.unpadded_fields()
    np.testing.assert_array_equal(fields["duels"], duels[:3])
    np.testing.assert_array_equal(fields["anchor"], anchor[:5])
    np.testing.assert_array_equal(fields["source"], source[:5])
    wide = Dataset(np.zeros((3, 1)), np.zeros(3), duels=[[0, 1]], duel_capacity=16)
    assert wide.duels.shape == (16, 2) and wide.num_duels == 1


def test_append_carries_the_fields_in_their_buckets():
    data = _structured()
    more = data.append([[0.3]], [7.0], duels=[[5, 1]], source=[2])
    assert more.capacity == 8 and more.duel_capacity == 8
    assert jax.tree.structure(more) == jax.tree.structure(data)
    fields = more.unpadded_fields()
    np.testing.assert_array_equal(fields["duels"], [[0, 1], [3, 2], [4, 0], [5, 1]])
    np.testing.assert_array_equal(fields["anchor"], [1, 0, 0, 1, 0, 0])  # default
    np.testing.assert_array_equal(fields["source"], [-1, 0, 0, 1, -1, 2])
    # a field that first appears gets its default on the existing rows
    plain = Dataset(np.zeros((2, 1)), np.zeros(2))
    flagged = plain.append([[0.5]], [1.0], anchor=[True], duels=[[2, 0]])
    np.testing.assert_array_equal(flagged.unpadded_fields()["anchor"], [0, 0, 1])
    np.testing.assert_array_equal(flagged.unpadded_fields()["duels"], [[2, 0]])
    assert flagged.source is None
    # nine duels outgrow the first duel bucket
    many = data.append(np.zeros((1, 1)), [0.0], duels=[[1, 2]] * 6)
    assert many.num_duels == 9 and many.duel_capacity == 16


def test_fields_survive_pytree_round_trip_and_jit():
    data = _structured()
    leaves, treedef = jax.tree.flatten(data)
    again = jax.tree.unflatten(treedef, leaves)
    for name in ("X", "y", "task", "mask", "duels", "duel_mask", "anchor", "source"):
        np.testing.assert_array_equal(getattr(again, name), getattr(data, name))

    @jax.jit
    def preferred(data):  # sum of y over preferred rows of real duels
        return jnp.sum(jnp.where(data.duel_mask, data.y[data.duels[:, 0]], 0.0))

    assert float(preferred(data)) == 0.0 + 3.0 + 4.0
    # same presence of fields, same buckets: the same tree structure (no recompile)
    other = Dataset(
        np.ones((6, 1)),
        np.ones(6),
        duels=[[1, 0]],
        anchor=np.ones(6, bool),
        source=np.zeros(6, np.int64),
    )
    assert jax.tree.structure(other) == jax.tree.structure(data)
    assert jax.tree.structure(
        Dataset(np.ones((6, 1)), np.ones(6))
    ) != jax.tree.structure(data)


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"duels": [0, 1]}, r"duels must have shape \(m, 2\).*\(2,\)"),
        ({"duels": [[0.0, 1.0]]}, "duels must hold integers, got dtype float64"),
        (
            {"duels": [[0, 5]]},
            r"duels must index rows in \[0, 5\), got duels\[0, 1\] = 5",
        ),
        ({"duels": [[0, 1], [-1, 2]]}, r"duels\[1, 0\] = -1"),
        ({"duels": [[0, 1], [2, 2]]}, r"different rows, got duels\[1\] = \[2, 2\]"),
        (
            {"duels": [[0, 1], [1, 2]], "duel_capacity": 1},
            "duel_capacity must be >= m = 2",
        ),
        ({"duel_capacity": 8}, "duel_capacity=8 was given without duels"),
        ({"anchor": [True, False]}, r"anchor must have shape \(5,\).*\(2,\)"),
        ({"anchor": [1, 0, 0, 1, 0]}, "anchor must hold bool flags, got dtype int"),
        ({"source": [0, 0, 0, 0]}, r"source must have shape \(5,\)"),
        ({"source": [0.0, 1, 0, 0, 0]}, "source must hold integers, got dtype float64"),
        ({"source": [0, -1, -2, 0, 0]}, r"source ids must be >= -1.*source\[2\] = -2"),
    ],
)
def test_bad_fields_name_the_field_and_value(fields, match):
    with pytest.raises(ValueError, match=match):
        Dataset(np.zeros((5, 1)), np.zeros(5), **fields)


def test_target_rows_are_the_target_first_in_a_static_buffer():
    """``target_rows`` keeps the target's rows in order, masked, in a buffer of
    ``target_capacity`` rows: the power of two >= max(32, t) with sources (at most
    the capacity), the capacity without; it is static, so it survives a pytree
    round trip under jit and changes the treedef only when ``t`` passes 32, 64, ..."""
    rng = np.random.default_rng(0)
    source = np.array([0] * 50 + [-1, 1, -1, -1] + [1] * 30)
    X, y = rng.random((len(source), 2)), rng.random(len(source))
    data = Dataset(X, y, source=source)
    assert (data.capacity, data.target_capacity) == (96, 32)
    Xt, yt, mask = jax.jit(lambda d: d.target_rows())(data)
    assert Xt.shape == (32, 2) and yt.shape == (32,)
    np.testing.assert_array_equal(yt[:3], y[source == -1])
    np.testing.assert_array_equal(Xt[:3], X[source == -1])
    assert mask.tolist() == [True] * 3 + [False] * 29
    leaves, treedef = jax.tree_util.tree_flatten(data)
    assert jax.tree_util.tree_unflatten(treedef, leaves).target_capacity == 32
    # without sources every row is a target row and nothing is cut
    plain = Dataset(X, y)
    assert plain.target_capacity == plain.capacity == 96
    np.testing.assert_array_equal(plain.target_rows()[1], plain.y)
    # the treedef changes with the target buffer, not with every target row
    more = data.append(rng.random((20, 2)), rng.random(20))
    assert more.capacity == 112 and more.target_capacity == 32
    assert jax.tree_util.tree_structure(more) == treedef
    most = more.append(rng.random((10, 2)), rng.random(10))
    assert most.target_capacity == 64
    assert jax.tree_util.tree_structure(most) != jax.tree_util.tree_structure(more)
    # a small dataset's buffer is its capacity
    small = Dataset(X[:5], y[:5], source=[0, 0, -1, -1, 0])
    assert small.target_capacity == small.capacity == 8
