"""Random-forest surrogate: mean and variance across trees (SMAC).

Hutter, Hoos and Leyton-Brown (2011), §4.3: a random forest of ``B`` regression
trees is fitted to the observations, and the predictive distribution at ``x`` is
Gaussian with the empirical mean and variance of the trees' predictions,

.. math::
    \\mu(x) = \\frac1B \\sum_b f_b(x), \\quad
    \\sigma^2(x) = \\frac1B \\sum_b \\big(f_b(x) - \\mu(x)\\big)^2,

where ``f_b(x)`` is the mean of the training targets in the leaf of tree ``b``
that ``x`` falls into. This is the across-tree variance of the survey (§4.2); the
refinement of Hutter et al. (2014, §4.3.2) that adds the mean within-leaf
variance is not implemented. A floor :data:`MIN_VARIANCE` keeps the variance
positive where all trees agree (log-EI needs it).

The trees are grown by scikit-learn (``RandomForestRegressor`` with bootstrap
samples, or ``ExtraTreesRegressor``) on the host through ``jax.pure_callback``,
so the trainer runs inside :class:`ppbo.Train`'s ``jit``. Each tree is returned as
padded float64 arrays of a fixed size per capacity bucket (at most ``2 n - 1``
nodes for ``n`` rows): split feature, threshold, left and right child and node
value, with leaves and padding pointing to themselves. Prediction is a pure JAX
traversal vmapped over trees and points, and the posterior stores as arrays, so a
campaign resumes exactly without pickle. The inputs are compared in float32, as
scikit-learn's trees compare them, so predictions equal scikit-learn's.

Samples (leading axis ``s = 1``; ``B`` trees, ``N`` padded nodes): ``feature``,
``threshold``, ``left``, ``right`` and ``value``, each (1, B, N). The surrogate
offers sample paths (one tree drawn at random per path: Thompson sampling over
trees) but no observation noise and no conditioning (ask one point at a time).
Predictions are piecewise constant in ``x``: their gradient is zero, so the
acquisition's maximiser keeps its best raw candidate.

Integer and categorical inputs (``columns``, filled by the campaign from its
:class:`ppbo.Space`) are handled natively, as in SMAC's forest: the trees do not
see the unit-cube encoding of the GP but one feature per parameter,

- a real parameter: its unit coordinate;
- an integer parameter: its integer value (the unit coordinate decoded and
  rounded as :meth:`ppbo.Space.from_unit` does), so every split is
  ``value <= k`` between two integers and every point of the unit cube is
  predicted as the integer it will be run at;
- a categorical parameter with ``k`` choices (one-hot in the unit cube, decoded
  by its largest coordinate): the rank of the chosen category when the
  categories are ordered by their mean training target (unobserved categories
  at the overall mean, ties by index). A split ``rank <= t`` sends a subset of
  the categories left, and with squared-error loss the best of all
  ``2^(k-1) - 1`` subset splits of a node is one of these ``k - 1`` splits
  (Fisher 1958; Breiman et al. 1984, §9.4, Theorem 4.5). The order is that of
  the whole training set, so it is exactly optimal at the root and a fixed
  order below it: scikit-learn (which has no categorical splits) grows the
  trees on these features unchanged. A continuous index instead can only
  split the categories into two runs of consecutive indices, and one-hot
  columns only one category from the rest per split.

The category order is stored with the trees (``rank``, (1, C) for the C one-hot
columns), so prediction and a resumed campaign use the order of the fit.

References:
    Hutter, F., Hoos, H. H. and Leyton-Brown, K. (2011). Sequential Model-Based
    Optimization for General Algorithm Configuration. LION 5.
    Hutter, F., Xu, L., Hoos, H. H. and Leyton-Brown, K. (2014). Algorithm
    runtime prediction: Methods & evaluation. Artificial Intelligence 206.
    Breiman, L. (2001). Random Forests. Machine Learning 45.
    Breiman, L., Friedman, J. H., Olshen, R. A. and Stone, C. J. (1984).
    Classification and Regression Trees. Wadsworth.
    Fisher, W. D. (1958). On grouping for maximum homogeneity. Journal of the
    American Statistical Association 53.
    Geurts, P., Ernst, D. and Wehenkel, L. (2006). Extremely randomized trees.
    Machine Learning 63.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppbo.data import Dataset
from ppbo.space import Categorical, Integer, Space
from ppbo.surrogate import PathSampler, Surrogate

__all__ = [
    "surrogate",
    "fit_forest",
    "flatten_trees",
    "predict_trees",
    "seed_from_key",
    "encode",
    "category_ranks",
    "columns_of",
    "MIN_VARIANCE",
    "KINDS",
    "PATHS",
]

#: Variance floor added to the across-tree variance (standardised outputs).
MIN_VARIANCE = 1e-10

#: Forest kinds: scikit-learn estimator names.
KINDS = ("random_forest", "extra_trees")

_FIELDS = ("feature", "threshold", "left", "right", "value")


def seed_from_key(key: jax.Array) -> jax.Array:
    """The scikit-learn ``random_state`` drawn from a JAX key (int32, traceable).

    Example:
        >>> import jax
        >>> int(seed_from_key(jax.random.key(0))) >= 0
        True
    """
    return jax.random.randint(key, (), 0, np.iinfo(np.int32).max, dtype=jnp.int32)


def columns_of(space: Space) -> list[list]:
    """The ``columns`` description of a space: one JSON entry per parameter.

    ``["real"]``, ``["integer", low, high, log]`` or ``["categorical", k]``, in
    the order of the unit-cube coordinates (a categorical takes ``k`` of them).

    Args:
        space: a :class:`ppbo.Space`.

    Returns:
        A list with one entry per parameter, as :func:`surrogate` takes it.

    Example:
        >>> import ppbo
        >>> columns_of(ppbo.Space({"x": ppbo.Real(0.0, 1.0), "n": ppbo.Integer(1, 4),
        ...                        "act": ppbo.Categorical(["relu", "tanh", "elu"])}))
        [['real'], ['integer', 1, 4, False], ['categorical', 3]]
    """
    columns = []
    for dimension in space.dimensions.values():
        if isinstance(dimension, Integer):
            columns.append(["integer", dimension.low, dimension.high, dimension.log])
        elif isinstance(dimension, Categorical):
            columns.append(["categorical", len(dimension.choices)])
        else:
            columns.append(["real"])
    return columns


def _parse_columns(columns: Any) -> tuple[tuple, ...]:
    """``columns`` (a list or a Space) as a tuple of checked tuples."""
    if isinstance(columns, Space):
        columns = columns_of(columns)
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise ValueError(
            f"columns must be a non-empty list of ['real'], ['integer', low, high, "
            f"log] or ['categorical', k] (or a ppbo.Space), got {columns!r}"
        )
    parsed = []
    for i, column in enumerate(columns):
        checked = _parse_column(column)
        if checked is None:
            raise ValueError(
                f"columns[{i}] must be ['real'], ['integer', low, high, log] with "
                f"integers low < high (low >= 1 on a log scale) or ['categorical', "
                f"k] with an integer k >= 2, got {column!r}"
            )
        parsed.append(checked)
    return tuple(parsed)


def _integral(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and (math.isfinite(value) and float(value) == int(value))
    )


def _parse_column(column: Any) -> tuple | None:
    """One checked column, or None when it is malformed."""
    if isinstance(column, str):
        column = [column]
    if not isinstance(column, Sequence) or not column:
        return None
    kind, rest = column[0], list(column[1:])
    if kind == "real" and not rest:
        return ("real",)
    if kind == "integer" and len(rest) == 3:
        low, high, log = rest
        if _integral(low) and _integral(high) and low < high and (not log or low >= 1):
            return ("integer", int(low), int(high), bool(log))
    if kind == "categorical" and len(rest) == 1 and _integral(rest[0]):
        if rest[0] >= 2:
            return ("categorical", int(rest[0]))
    return None


def _width(column: tuple) -> int:
    return column[1] if column[0] == "categorical" else 1


def category_ranks(
    columns: Any, X: jax.Array, y: jax.Array, mask: jax.Array
) -> jax.Array:
    """Each category's rank by its mean target, for every categorical parameter.

    Categories are ordered by the mean of ``y`` over the rows (with ``mask``)
    where they are chosen (the largest one-hot coordinate); categories with no
    row get the overall mean; ties go by index. With this order a threshold on
    the rank is a subset split, and the best subset split under squared-error
    loss is one of them (Fisher 1958; Breiman et al. 1984, Theorem 4.5).

    Args:
        columns: the ``columns`` of :func:`surrogate` (or a :class:`ppbo.Space`).
        X: unit-cube inputs (n, d); y: targets (n,); mask: rows to use (n,).

    Returns:
        Ranks in ``0 .. k - 1`` (as float64), one per one-hot coordinate of each
        categorical parameter in order: shape (C,), C the number of those
        coordinates (0 without categorical parameters).

    Example:
        >>> import jax.numpy as jnp
        >>> X = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        >>> category_ranks([["categorical", 3]], X, jnp.array([2.0, -1.0, 0.5]),
        ...                jnp.ones(3, bool)).tolist()
        [2.0, 0.0, 1.0]
    """
    columns = _parse_columns(columns)
    weight = jnp.asarray(mask, X.dtype)
    y = jnp.where(mask, y, 0.0)
    overall = jnp.sum(weight * y) / jnp.maximum(jnp.sum(weight), 1.0)
    ranks, start = [], 0
    for column in columns:
        k = _width(column)
        if column[0] == "categorical":
            chosen = jax.nn.one_hot(jnp.argmax(X[:, start : start + k], axis=1), k)
            chosen = chosen * weight[:, None]
            count = jnp.sum(chosen, axis=0)
            mean = jnp.where(
                count > 0, (chosen.T @ y) / jnp.maximum(count, 1.0), overall
            )
            order = jnp.argsort(mean, stable=True)
            ranks.append(jnp.zeros(k, X.dtype).at[order].set(jnp.arange(k)))
        start += k
    return jnp.concatenate(ranks) if ranks else jnp.zeros((0,), X.dtype)


def encode(columns: Any, rank: jax.Array | None, X: jax.Array) -> jax.Array:
    """The trees' features of unit-cube points: one per parameter, shape (m, F).

    A real parameter keeps its unit coordinate; an integer parameter becomes
    its integer value (decoded and rounded as :meth:`ppbo.Space.from_unit`
    does); a categorical one the ``rank`` (:func:`category_ranks`) of its
    largest one-hot coordinate.

    Args:
        columns: the ``columns`` of :func:`surrogate` (or a :class:`ppbo.Space`).
        rank: category ranks (C,), or None without categorical parameters.
        X: unit-cube points (m, d).

    Returns:
        Features (m, F), F the number of parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> columns = [["integer", 1, 5, False], ["categorical", 2]]
        >>> X = jnp.array([[0.6, 0.2, 0.9], [0.1, 0.7, 0.3]])
        >>> encode(columns, jnp.array([1.0, 0.0]), X).tolist()
        [[3.0, 0.0], [1.0, 1.0]]
    """
    columns = _parse_columns(columns)
    features, start, offset = [], 0, 0
    for column in columns:
        k = _width(column)
        if column[0] == "real":
            features.append(X[:, start])
        elif column[0] == "integer":
            _, low, high, log = column
            a, b = (math.log(low), math.log(high)) if log else (low, high)
            value = a + jnp.clip(X[:, start], 0.0, 1.0) * (b - a)
            value = jnp.clip(jnp.exp(value) if log else value, low, high)
            # half to even, as Python's round in Integer.from_unit
            features.append(jnp.clip(jnp.round(value), low, high))
        else:
            chosen = jnp.argmax(X[:, start : start + k], axis=1)
            features.append(rank[offset + chosen])
            offset += k
        start += k
    return jnp.stack(features, axis=1)


def fit_forest(
    seed: int, X: np.ndarray, y: np.ndarray, *, kind: str = "random_forest", **options
) -> Any:
    """Fit a scikit-learn forest on the host (single-threaded, seeded).

    Args:
        seed: ``random_state``.
        X: inputs (n, d); y: targets (n,).
        kind: one of :data:`KINDS`.
        **options: further estimator arguments (``n_estimators``,
            ``min_samples_leaf``, ``max_features``, ...).

    Returns:
        The fitted ``RandomForestRegressor`` or ``ExtraTreesRegressor``.

    Raises:
        ImportError: without scikit-learn (``pip install scikit-learn``).

    Example:
        >>> import numpy as np
        >>> model = fit_forest(0, np.array([[0.0], [1.0]]), np.array([0.0, 1.0]),
        ...                    n_estimators=3, bootstrap=False)
        >>> model.predict(np.array([[0.9]])).tolist()
        [1.0]
    """
    try:
        from sklearn import ensemble
    except ImportError as error:  # pragma: no cover - sklearn is a dev dependency
        raise ImportError(
            "the forest surrogate needs scikit-learn: pip install scikit-learn"
        ) from error
    cls = {
        "random_forest": ensemble.RandomForestRegressor,
        "extra_trees": ensemble.ExtraTreesRegressor,
    }[kind]
    model = cls(random_state=int(seed), n_jobs=1, **options)
    return model.fit(np.asarray(X), np.asarray(y))


def flatten_trees(model: Any, num_nodes: int) -> dict[str, np.ndarray]:
    """The fitted trees as padded float64 arrays of shape (B, ``num_nodes``).

    Leaves and padded nodes have both children equal to their own index, so a
    traversal that has reached a leaf stays there; ``feature`` and ``threshold``
    of leaves are 0.

    Raises:
        ValueError: if a tree has more than ``num_nodes`` nodes.

    Example:
        >>> import numpy as np
        >>> model = fit_forest(0, np.array([[0.0], [1.0]]), np.array([0.0, 1.0]),
        ...                    n_estimators=1, bootstrap=False)
        >>> trees = flatten_trees(model, 4)
        >>> trees["left"].tolist(), trees["value"].tolist()
        ([[1.0, 1.0, 2.0, 3.0]], [[0.5, 0.0, 1.0, 0.0]])
    """
    out = {name: np.zeros((len(model.estimators_), num_nodes)) for name in _FIELDS}
    for b, estimator in enumerate(model.estimators_):
        tree = estimator.tree_
        size = tree.node_count
        if size > num_nodes:
            raise ValueError(
                f"a tree has {size} nodes, more than num_nodes={num_nodes}"
            )
        index = np.arange(num_nodes, dtype=np.float64)
        leaf = tree.children_left == -1
        out["left"][b] = index
        out["right"][b] = index
        out["left"][b, :size] = np.where(leaf, index[:size], tree.children_left)
        out["right"][b, :size] = np.where(leaf, index[:size], tree.children_right)
        out["feature"][b, :size] = np.where(leaf, 0, tree.feature)
        out["threshold"][b, :size] = np.where(leaf, 0.0, tree.threshold)
        out["value"][b, :size] = tree.value[:, 0, 0]
    return out


def _leaf_value(tree: Mapping[str, jax.Array], x: jax.Array) -> jax.Array:
    feature = tree["feature"].astype(jnp.int32)
    left = tree["left"].astype(jnp.int32)
    right = tree["right"].astype(jnp.int32)

    def internal(node):
        return left[node] != node

    def descend(node):
        go_left = x[feature[node]] <= tree["threshold"][node]
        return jnp.where(go_left, left[node], right[node])

    return tree["value"][jax.lax.while_loop(internal, descend, jnp.int32(0))]


def predict_trees(trees: Mapping[str, jax.Array], X: jax.Array) -> jax.Array:
    """Every tree's prediction at ``X`` (m, d): shape (B, m).

    ``trees`` holds the arrays of :func:`flatten_trees` (B, N). Not
    differentiable in a useful sense: the gradient in ``X`` is zero.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> model = fit_forest(0, np.array([[0.0], [1.0]]), np.array([0.0, 1.0]),
        ...                    n_estimators=2, bootstrap=False)
        >>> trees = {k: jnp.asarray(v) for k, v in flatten_trees(model, 4).items()}
        >>> predict_trees(trees, jnp.array([[0.2], [0.7]])).tolist()
        [[0.0, 1.0], [0.0, 1.0]]
    """
    # scikit-learn compares float32 inputs with its thresholds
    X = jax.lax.stop_gradient(X).astype(jnp.float32).astype(X.dtype)
    per_point = jax.vmap(_leaf_value, in_axes=(None, 0))
    trees = {name: trees[name] for name in _FIELDS}
    return jax.vmap(per_point, in_axes=(0, None))(trees, X)


def _host_fit(seed, X, y, mask, *, num_nodes, options):
    mask = np.asarray(mask)
    model = fit_forest(int(seed), np.asarray(X)[mask], np.asarray(y)[mask], **options)
    return tuple(flatten_trees(model, num_nodes)[name] for name in _FIELDS)


def _trainer(key, data: Dataset, *, num_trees: int, options: tuple, columns):
    num_nodes = 2 * data.capacity - 1
    X, extra = data.X, {}
    if columns is not None:
        size = sum(_width(column) for column in columns)
        if size != data.dim:
            raise ValueError(
                f"the forest's columns describe {size} unit-cube coordinates, the "
                f"data have d={data.dim}"
            )
        rank = category_ranks(columns, data.X, data.y, data.mask)
        X = encode(columns, rank, data.X)
        if rank.size:
            extra = {"rank": rank[None]}
    shape = jax.ShapeDtypeStruct((num_trees, num_nodes), jnp.float64)
    arrays = jax.pure_callback(
        partial(_host_fit, num_nodes=num_nodes, options=dict(options)),
        (shape,) * len(_FIELDS),
        seed_from_key(key),
        X,
        data.y,
        data.mask,
        vmap_method="sequential",
    )
    return {name: a[None] for name, a in zip(_FIELDS, arrays, strict=True)} | extra


def _features(columns, params, X):
    if columns is None:
        return X
    return encode(columns, params.get("rank"), X)


def _predict(params, data: Dataset, X, *, columns=None):
    values = predict_trees(params, _features(columns, params, X))
    return jnp.mean(values, axis=0), jnp.var(values, axis=0) + MIN_VARIANCE


def _draw_paths(key, params, data, cache, num_paths):
    num_trees = params["value"].shape[0]
    chosen = jax.random.randint(key, (num_paths,), 0, num_trees)
    paths = {name: params[name][chosen] for name in _FIELDS}
    if "rank" in params:  # the one category order, repeated per path
        paths["rank"] = jnp.broadcast_to(
            params["rank"], (num_paths,) + params["rank"].shape
        )
    return paths


def _evaluate_paths(paths, X, *, columns=None):
    rank = paths["rank"][0] if "rank" in paths else None
    X = X if columns is None else encode(columns, rank, X)
    return predict_trees(paths, X)


#: Thompson sampling over trees: each path is one tree drawn uniformly.
PATHS = PathSampler(draw=_draw_paths, evaluate=predict_trees)


def surrogate(
    num_trees: int = 32,
    *,
    kind: str = "random_forest",
    min_samples_split: int = 3,
    min_samples_leaf: int = 1,
    max_features: float = 5.0 / 6.0,
    max_depth: int | None = None,
    bootstrap: bool = True,
    columns: Any = None,
) -> Surrogate:
    """Build the random-forest surrogate (fitted by :class:`ppbo.Train`).

    Defaults follow SMAC3's forest (bootstrap samples, 5/6 of the features tried
    per split, at least 3 rows to split) with more trees than its 10, for a
    smoother variance.

    Args:
        num_trees: number of trees B.
        kind: ``"random_forest"`` (Breiman 2001, bootstrap samples) or
            ``"extra_trees"`` (Geurts et al. 2006, random thresholds, all rows).
        min_samples_split: rows a node needs to be split.
        min_samples_leaf: rows each leaf keeps.
        max_features: fraction of the inputs tried at each split.
        max_depth: deepest split level (None: grow until the leaves are pure or
            too small to split).
        bootstrap: ``"random_forest"`` only: grow each tree on a bootstrap
            sample (False: every tree on all rows).
        columns: the parameters behind the unit-cube coordinates, for native
            integer and categorical inputs (see the module docstring): a
            :class:`ppbo.Space`, or its :func:`columns_of` list (what the
            campaign stores and fills in from its space). None: every
            coordinate is a real input, as the GP sees them.

    Returns:
        A :class:`ppbo.Surrogate` with a ``trainer`` and sample paths over trees.

    Raises:
        ValueError: for an unknown kind, a non-positive number of trees or
            malformed ``columns``; at fit time, for ``columns`` that do not
            describe the data's d coordinates.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> X = np.linspace(0, 1, 8)[:, None]
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]))
        >>> forest = surrogate(num_trees=4)
        >>> posterior = ppbo.fit(forest, data, ppbo.Train(), jax.random.key(0))
        >>> posterior.samples["value"].shape  # one sample, 4 trees, 2 * 8 - 1 nodes
        (1, 4, 15)
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if int(num_trees) < 1:
        raise ValueError(f"num_trees must be >= 1, got {num_trees}")
    options = {
        "kind": kind,
        "n_estimators": int(num_trees),
        "min_samples_split": int(min_samples_split),
        "min_samples_leaf": int(min_samples_leaf),
        "max_features": float(max_features),
    }
    if max_depth is not None:
        if int(max_depth) < 1:
            raise ValueError(f"max_depth must be >= 1 or None, got {max_depth}")
        options["max_depth"] = int(max_depth)
    if kind == "random_forest":
        options["bootstrap"] = bool(bootstrap)
    parsed = None if columns is None else _parse_columns(columns)
    trainer = partial(
        _trainer,
        num_trees=int(num_trees),
        options=tuple(sorted(options.items())),
        columns=parsed,
    )
    paths = PATHS
    if parsed is not None:
        paths = PathSampler(
            draw=_draw_paths, evaluate=partial(_evaluate_paths, columns=parsed)
        )
    discrete = parsed is not None and any(c[0] != "real" for c in parsed)
    native = ", native inputs" if discrete else ""
    return Surrogate(
        trainer=trainer,
        predict=partial(_predict, columns=parsed),
        paths=paths,
        conditioning=False,
        name=f"forest({kind}, trees={int(num_trees)}{native})",
    )
