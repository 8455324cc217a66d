"""Observations as a validated, padded pytree.

A :class:`Dataset` holds the inputs ``X`` (n, d), outputs ``y`` (n,) and integer task
ids of a campaign, padded to a capacity bucket with a boolean ``mask``. Every array
keeps its shape while the number of observations grows inside a bucket, so the
compiled fit and acquisition code is reused when one observation is added.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Dataset", "bucket_capacity"]

_MIN_CAPACITY = 8


def bucket_capacity(n: int, minimum: int = _MIN_CAPACITY) -> int:
    """Return the padded capacity used for ``n`` observations.

    Capacities are multiples of 8 up to 64 and then grow by factors of 1.25 between
    powers of two (80, 96, 112, 128, 160, ...), so padding wastes at most a quarter of
    the work while a campaign of a few hundred points compiles about a dozen times.

    Args:
        n: number of observations, ``n >= 1``.
        minimum: smallest capacity returned.

    Returns:
        The smallest bucket ``>= max(n, minimum)``.

    Example:
        >>> bucket_capacity(50)
        56
        >>> bucket_capacity(100)
        112
    """
    n = max(int(n), int(minimum), 1)
    if n <= 64:
        return 8 * math.ceil(n / 8)
    power = 2 ** math.floor(math.log2(n))
    step = power // 4
    return power + step * math.ceil((n - power) / step)


def _require_x64() -> None:
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "ppbo computes in float64, but JAX is in 32-bit mode: call "
            "jax.config.update('jax_enable_x64', True) before building a Dataset"
        )


def _as_float64(name: str, value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_
    ):
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating) and array.dtype != np.float64:
        raise ValueError(
            f"{name} must be float64, got dtype {array.dtype.name}; convert it with "
            f"np.asarray({name}, dtype=np.float64)"
        )
    return array.astype(np.float64)


def _check_finite(name: str, array: np.ndarray) -> None:
    bad = ~np.isfinite(array)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must be finite, but {name}[{', '.join(map(str, index))}] = "
            f"{float(array[index])}"
        )


class Dataset:
    """Observations ``(X, y, task)`` padded to a capacity bucket with a mask.

    ``Dataset`` is a JAX pytree whose leaves keep their shapes for every ``n`` inside
    a bucket (see :func:`bucket_capacity`). Padded rows have ``mask == False``; models
    must ignore them (the GP models give them unit, independent variance and zero
    residual, which leaves the likelihood unchanged).

    Args:
        X: inputs, shape (n, d), float64 (Python lists of numbers are accepted).
        y: outputs, shape (n,), float64.
        task: integer task id per observation, shape (n,); ``None`` means task 0.
        capacity: padded size; defaults to ``bucket_capacity(n)``.

    Raises:
        ValueError: for empty data, wrong shapes, non-float64 arrays, NaN or inf
            values, negative or non-integer task ids, or a capacity below ``n``.
        RuntimeError: if JAX is not in 64-bit mode.

    Example:
        >>> import jax, numpy as np
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset(np.random.rand(5, 2), np.random.rand(5))
        >>> data.n, data.capacity, data.dim
        (5, 8, 2)
        >>> data.append([[0.5, 0.5]], [1.0]).capacity
        8
    """

    __slots__ = ("X", "y", "task", "mask")

    X: jax.Array
    y: jax.Array
    task: jax.Array
    mask: jax.Array

    def __init__(
        self,
        X: Any,
        y: Any,
        task: Any = None,
        *,
        capacity: int | None = None,
    ) -> None:
        _require_x64()
        X = _as_float64("X", X)
        y = _as_float64("y", y)
        if X.ndim != 2:
            raise ValueError(
                f"X must have shape (n, d), got shape {X.shape}; reshape a single "
                "input dimension with X[:, None]"
            )
        if X.shape[0] == 0:
            raise ValueError("X is empty: a Dataset needs at least one observation")
        if X.shape[1] == 0:
            raise ValueError(f"X must have at least one column, got shape {X.shape}")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.shape != (X.shape[0],):
            raise ValueError(
                f"y must have shape ({X.shape[0]},) to match X {X.shape}, got shape "
                f"{y.shape}"
            )
        _check_finite("X", X)
        _check_finite("y", y)
        n = X.shape[0]
        if task is None:
            task = np.zeros(n, dtype=np.int32)
        else:
            task = np.asarray(task)
            if task.shape != (n,):
                raise ValueError(
                    f"task must have shape ({n},) to match X {X.shape}, got shape "
                    f"{task.shape}"
                )
            if not np.issubdtype(task.dtype, np.integer):
                if np.issubdtype(task.dtype, np.floating) and np.all(
                    np.isfinite(task) & (task == np.round(task))
                ):
                    pass
                else:
                    raise ValueError(
                        f"task must hold integer task ids, got dtype {task.dtype}"
                    )
            if np.any(task < 0):
                raise ValueError(
                    f"task ids must be >= 0, got task[{int(np.argmin(task))}] = "
                    f"{task.min()}"
                )
            task = task.astype(np.int32)
        if capacity is None:
            capacity = bucket_capacity(n)
        elif int(capacity) < n:
            raise ValueError(f"capacity must be >= n = {n}, got capacity={capacity}")
        capacity = int(capacity)
        pad = capacity - n
        self.X = jnp.asarray(np.concatenate([X, np.zeros((pad, X.shape[1]))]))
        self.y = jnp.asarray(np.concatenate([y, np.zeros(pad)]))
        self.task = jnp.asarray(np.concatenate([task, np.zeros(pad, np.int32)]))
        self.mask = jnp.asarray(np.arange(capacity) < n)

    # -- pytree -------------------------------------------------------------------
    def tree_flatten(self):
        return (self.X, self.y, self.task, self.mask), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.X, obj.y, obj.task, obj.mask = children
        return obj

    # -- views --------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of real (unpadded) observations."""
        return int(np.sum(np.asarray(self.mask)))

    @property
    def capacity(self) -> int:
        """Padded size, the leading dimension of every array."""
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        """Input dimension d."""
        return int(self.X.shape[1])

    @property
    def num_tasks(self) -> int:
        """One more than the largest task id present."""
        return int(np.max(np.asarray(self.task)[np.asarray(self.mask)])) + 1

    def unpadded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the real observations ``(X, y, task)`` as NumPy arrays."""
        # Slice on the host: slicing a device array compiles once per n.
        n = self.n
        return (
            np.asarray(self.X)[:n],
            np.asarray(self.y)[:n],
            np.asarray(self.task)[:n],
        )

    def append(self, X: Any, y: Any, task: Any = None) -> Dataset:
        """Return a new dataset with observations added (same bucket when they fit).

        Example:
            >>> import jax, numpy as np
            >>> jax.config.update("jax_enable_x64", True)
            >>> Dataset([[0.1]], [1.0]).append([[0.2]], [2.0]).n
            2
        """
        X0, y0, t0 = self.unpadded()
        X1 = _as_float64("X", X)
        if X1.ndim == 1 and X1.shape[0] == self.dim:
            X1 = X1[None]
        y1 = np.atleast_1d(_as_float64("y", y))
        t1 = np.zeros(len(y1), np.int32) if task is None else np.atleast_1d(task)
        if X1.ndim != 2 or X1.shape[1] != self.dim:
            raise ValueError(
                f"X must have shape (k, {self.dim}) to append, got shape {X1.shape}"
            )
        n = len(y0) + len(y1)
        capacity = max(self.capacity, bucket_capacity(n))
        return Dataset(
            np.concatenate([X0, X1]),
            np.concatenate([y0, y1]),
            np.concatenate([t0, np.asarray(t1)]),
            capacity=capacity,
        )

    def __repr__(self) -> str:
        return f"Dataset(n={self.n}, d={self.dim}, capacity={self.capacity})"


jax.tree_util.register_pytree_node(
    Dataset, Dataset.tree_flatten, Dataset.tree_unflatten
)
