"""Observations as a validated, padded pytree.

A :class:`Dataset` holds the inputs ``X`` (n, d), outputs ``y`` (n,) and integer task
ids of a campaign, padded to a capacity bucket with a boolean ``mask``, and optional
structured fields: duels (pairs of row indices, padded to a bucket of their own with
``duel_mask``), per-row anchor flags, per-row source ids and per-observation
likelihood weights (per row and per duel). Every array
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


def _target_capacity(t: int, capacity: int) -> int:
    # rows of Dataset.target_rows: a power of two >= max(32, t), at most capacity
    return min(capacity, max(32, 1 << max(int(t) - 1, 0).bit_length()))


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


def _per_row(name: str, value: Any, n: int) -> np.ndarray:
    array = np.asarray(value)
    if array.shape != (n,):
        raise ValueError(
            f"{name} must have shape ({n},), one value per row, got shape {array.shape}"
        )
    return array


def _integers(name: str, array: np.ndarray) -> np.ndarray:
    if not np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int32)


def _padded_weights(name: str, value: Any, n: int, capacity: int) -> jax.Array:
    array = _as_float64(name, value)
    if array.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got shape {array.shape}")
    _check_finite(name, array)
    if np.any(array < 0):
        i = int(np.argmin(array))
        raise ValueError(f"{name} must be >= 0, got {name}[{i}] = {array[i]}")
    return jnp.asarray(np.concatenate([array, np.zeros(capacity - n)]))


def _padded_duels(
    duels: Any, n: int, duel_capacity: int | None
) -> tuple[jax.Array, jax.Array]:
    duels = np.asarray(duels)
    if duels.size == 0:
        duels = duels.reshape(0, 2)
    if duels.ndim != 2 or duels.shape[1] != 2:
        raise ValueError(
            f"duels must have shape (m, 2), pairs of row indices, got shape "
            f"{duels.shape}"
        )
    duels = _integers("duels", duels)
    bad = (duels < 0) | (duels >= n)
    if bad.any():
        k, j = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"duels must index rows in [0, {n}), got duels[{k}, {j}] = {duels[k, j]}"
        )
    same = duels[:, 0] == duels[:, 1]
    if same.any():
        k = int(np.argmax(same))
        raise ValueError(
            f"a duel compares two different rows, got duels[{k}] = {duels[k].tolist()}"
        )
    m = duels.shape[0]
    if duel_capacity is None:
        duel_capacity = bucket_capacity(m)
    elif int(duel_capacity) < m:
        raise ValueError(
            f"duel_capacity must be >= m = {m} duels, got duel_capacity={duel_capacity}"
        )
    pad = int(duel_capacity) - m
    padded = np.concatenate([duels, np.zeros((pad, 2), np.int32)])
    mask = np.arange(int(duel_capacity)) < m
    return jnp.asarray(padded), jnp.asarray(mask)


class Dataset:
    """Observations ``(X, y, task)`` padded to a capacity bucket with a mask.

    ``Dataset`` is a JAX pytree whose leaves keep their shapes for every ``n`` inside
    a bucket (see :func:`bucket_capacity`). Padded rows have ``mask == False``; models
    must ignore them (the GP models give them unit, independent variance and zero
    residual, which leaves the likelihood unchanged).

    The optional fields are None when not given (and then no pytree leaves, so
    code that ignores them compiles as before); when given they are padded like
    the rest: ``anchor`` with False, ``source`` with -1, ``weight`` with 0 and
    ``duels`` with rows ``[0, 0]`` whose ``duel_mask`` is False (``duel_weight``
    with 0), to ``duel_capacity`` (by default ``bucket_capacity(m)``).

    Args:
        X: inputs, shape (n, d), float64 (Python lists of numbers are accepted).
        y: outputs, shape (n,), float64.
        task: integer task id per observation, shape (n,); ``None`` means task 0.
        capacity: padded size; defaults to ``bucket_capacity(n)``.
        duels: optional pairs of row indices, shape (m, 2): row ``duels[k, 0]``
            was preferred to row ``duels[k, 1]``; indices in ``[0, n)``, distinct.
        anchor: optional per-row anchor flags, bool, shape (n,).
        source: optional per-row source ids, integer, shape (n,); -1 marks the
            target task, ``0, 1, ...`` the source tasks.
        duel_capacity: padded number of duels; defaults to ``bucket_capacity(m)``.
        weight: optional per-row likelihood weights, finite and >= 0, shape (n,)
            (a tempered likelihood: each row's log-likelihood term times its
            weight; models that support it say so).
        duel_weight: optional per-duel likelihood weights, finite and >= 0,
            shape (m,); needs ``duels``.

    Raises:
        ValueError: for empty data, wrong shapes, non-float64 arrays, NaN or inf
            values, negative or non-integer task ids, or a capacity below ``n``;
            for optional fields of the wrong shape or dtype, duel indices out of
            range or equal, source ids below -1 and a duel capacity below ``m``,
            naming the field and the value.
        RuntimeError: if JAX is not in 64-bit mode.

    Example:
        >>> import jax, numpy as np
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset(np.random.rand(5, 2), np.random.rand(5))
        >>> data.n, data.capacity, data.dim
        (5, 8, 2)
        >>> data.append([[0.5, 0.5]], [1.0]).capacity
        8
        >>> duels = Dataset(np.random.rand(3, 1), np.zeros(3), duels=[[0, 1], [2, 1]])
        >>> duels.duels.shape, duels.duel_mask.tolist()[:3], duels.anchor is None
        ((8, 2), [True, True, False], True)
    """

    _LEAVES = (
        "X",
        "y",
        "task",
        "mask",
        "duels",
        "duel_mask",
        "anchor",
        "source",
        "weight",
        "duel_weight",
    )
    # the leaves, and the static target capacity (the pytree's auxiliary data)
    __slots__ = (*_LEAVES, "_target_capacity")

    X: jax.Array
    y: jax.Array
    task: jax.Array
    mask: jax.Array
    duels: jax.Array | None
    duel_mask: jax.Array | None
    anchor: jax.Array | None
    source: jax.Array | None
    weight: jax.Array | None
    duel_weight: jax.Array | None

    def __init__(
        self,
        X: Any,
        y: Any,
        task: Any = None,
        *,
        capacity: int | None = None,
        duels: Any = None,
        anchor: Any = None,
        source: Any = None,
        duel_capacity: int | None = None,
        weight: Any = None,
        duel_weight: Any = None,
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
        self.anchor = self.source = self.duels = self.duel_mask = None
        if anchor is not None:
            anchor = _per_row("anchor", anchor, n)
            if anchor.dtype != np.bool_:
                raise ValueError(
                    f"anchor must hold bool flags, got dtype {anchor.dtype}"
                )
            self.anchor = jnp.asarray(np.concatenate([anchor, np.zeros(pad, bool)]))
        if source is not None:
            source = _integers("source", _per_row("source", source, n))
            if np.any(source < -1):
                index = int(np.argmin(source))
                raise ValueError(
                    f"source ids must be >= -1 (-1: the target), got "
                    f"source[{index}] = {source[index]}"
                )
            self.source = jnp.asarray(
                np.concatenate([source, np.full(pad, -1, np.int32)])
            )
        self._target_capacity = (
            capacity
            if source is None
            else _target_capacity(int(np.sum(source < 0)), capacity)
        )
        if duels is not None:
            self.duels, self.duel_mask = _padded_duels(duels, n, duel_capacity)
        elif duel_capacity is not None:
            raise ValueError(f"duel_capacity={duel_capacity} was given without duels")
        self.weight = self.duel_weight = None
        if weight is not None:
            self.weight = _padded_weights("weight", weight, n, capacity)
        if duel_weight is not None:
            if duels is None:
                raise ValueError("duel_weight was given without duels")
            m = int(np.sum(np.asarray(self.duel_mask)))
            self.duel_weight = _padded_weights(
                "duel_weight", duel_weight, m, int(self.duels.shape[0])
            )

    # -- pytree -------------------------------------------------------------------
    def tree_flatten(self):
        leaves = tuple(getattr(self, name) for name in self._LEAVES)
        return leaves, self._target_capacity

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        for name, child in zip(cls._LEAVES, children, strict=True):
            object.__setattr__(obj, name, child)
        object.__setattr__(obj, "_target_capacity", aux)
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
    def target_mask(self) -> jax.Array:
        """Rows that are real observations of the target task, shape (capacity,).

        ``mask`` without the source rows (``source >= 0``): the rows an incumbent
        and a regret are taken over. Equal to ``mask`` when ``source`` is None.

        Example:
            >>> import jax
            >>> jax.config.update("jax_enable_x64", True)
            >>> data = Dataset([[0.1], [0.2], [0.3]], [1.0, 2.0, 3.0],
            ...                source=[0, -1, 1])
            >>> data.target_mask.tolist()[:4]
            [False, True, False, False]
        """
        if self.source is None:
            return self.mask
        return self.mask & (self.source < 0)

    @property
    def target_capacity(self) -> int:
        """Static number of rows of :meth:`target_rows` (>= the target rows).

        ``capacity`` without sources; with sources the smallest power of two
        ``>= max(32, t)`` for ``t`` target rows, capped at ``capacity``, so that
        a campaign with many source rows compiles a new target-rows program only
        when ``t`` passes 32, 64, 128, ...

        Example:
            >>> import jax
            >>> jax.config.update("jax_enable_x64", True)
            >>> data = Dataset([[0.1]] * 40, [0.0] * 40, source=[0] * 37 + [-1] * 3)
            >>> data.capacity, data.target_capacity
            (40, 32)
        """
        return self._target_capacity

    def target_rows(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The target's rows first, cut to :attr:`target_capacity`: ``(X, y, mask)``.

        A stable sort moves the rows of :attr:`target_mask` to the front (in their
        order) and keeps the first ``target_capacity`` rows, so that a likelihood
        of the target rows alone costs ``O(target_capacity^3)`` instead of
        ``O(capacity^3)`` when many source rows share the buffer; ``mask`` marks
        the real target rows. Traceable (the sizes are static).

        Example:
            >>> import jax
            >>> jax.config.update("jax_enable_x64", True)
            >>> data = Dataset([[0.1], [0.2], [0.3]], [1.0, 2.0, 3.0],
            ...                source=[0, -1, 1])
            >>> X, y, mask = data.target_rows()
            >>> y.shape, y[0].item(), mask.tolist()[:2]
            ((8,), 2.0, [True, False])
        """
        keep = self.target_mask
        order = jnp.argsort(~keep, stable=True)[: self._target_capacity]
        return self.X[order], self.y[order], keep[order]

    @property
    def num_tasks(self) -> int:
        """One more than the largest task id present."""
        return int(np.max(np.asarray(self.task)[np.asarray(self.mask)])) + 1

    @property
    def num_duels(self) -> int:
        """Number of real (unpadded) duels m; 0 without duels."""
        if self.duel_mask is None:
            return 0
        return int(np.sum(np.asarray(self.duel_mask)))

    @property
    def duel_capacity(self) -> int:
        """Padded number of duels; 0 without duels."""
        return 0 if self.duels is None else int(self.duels.shape[0])

    def unpadded_fields(self) -> dict[str, np.ndarray]:
        """Return the optional fields that are present, unpadded, as NumPy arrays.

        Example:
            >>> import jax, numpy as np
            >>> jax.config.update("jax_enable_x64", True)
            >>> data = Dataset([[0.1], [0.2]], [1.0, 2.0], source=[-1, 0])
            >>> data.unpadded_fields()
            {'source': array([-1,  0], dtype=int32)}
        """
        n, m = self.n, self.num_duels
        fields = {
            "duels": None if self.duels is None else np.asarray(self.duels)[:m],
            "anchor": None if self.anchor is None else np.asarray(self.anchor)[:n],
            "source": None if self.source is None else np.asarray(self.source)[:n],
            "weight": None if self.weight is None else np.asarray(self.weight)[:n],
            "duel_weight": (
                None if self.duel_weight is None else np.asarray(self.duel_weight)[:m]
            ),
        }
        return {k: v for k, v in fields.items() if v is not None}

    def unpadded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the real observations ``(X, y, task)`` as NumPy arrays."""
        # Slice on the host: slicing a device array compiles once per n.
        n = self.n
        return (
            np.asarray(self.X)[:n],
            np.asarray(self.y)[:n],
            np.asarray(self.task)[:n],
        )

    def append(
        self,
        X: Any,
        y: Any,
        task: Any = None,
        *,
        duels: Any = None,
        anchor: Any = None,
        source: Any = None,
        weight: Any = None,
        duel_weight: Any = None,
    ) -> Dataset:
        """Return a new dataset with observations added (same bucket when they fit).

        Optional fields follow the rows: new rows get ``anchor`` False,
        ``source`` -1 (the target) and ``weight`` 1 unless given, and existing
        rows get the same defaults when a field first appears (new duels get
        ``duel_weight`` 1 likewise). New ``duels`` index rows of the
        combined dataset and are added after the existing ones (same duel bucket
        when they fit).

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
        old = self.unpadded_fields()
        fields: dict[str, Any] = {}
        for name, given, default in (
            ("anchor", anchor, False),
            ("source", source, -1),
            ("weight", weight, 1.0),
        ):
            if name not in old and given is None:
                continue
            before = old.get(name, np.full(len(y0), default))
            after = np.full(len(y1), default) if given is None else given
            fields[name] = np.concatenate([before, np.atleast_1d(after)])
        if "duels" in old or duels is not None:
            new = np.zeros((0, 2), np.int32) if duels is None else np.asarray(duels)
            before = old.get("duels", np.zeros((0, 2), np.int32))
            if new.ndim != 2 or new.shape[1:] != (2,):
                raise ValueError(
                    f"duels must have shape (m, 2) to append, got shape {new.shape}"
                )
            fields["duels"] = np.concatenate([before, new.astype(before.dtype)])
            fields["duel_capacity"] = max(
                self.duel_capacity, bucket_capacity(len(fields["duels"]))
            )
            if "duel_weight" in old or duel_weight is not None:
                before = old.get("duel_weight", np.ones(len(before)))
                after = np.ones(len(new)) if duel_weight is None else duel_weight
                fields["duel_weight"] = np.concatenate([before, np.atleast_1d(after)])
        elif duel_weight is not None:
            raise ValueError("duel_weight was given without duels")
        return Dataset(
            np.concatenate([X0, X1]),
            np.concatenate([y0, y1]),
            np.concatenate([t0, np.asarray(t1)]),
            capacity=capacity,
            **fields,
        )

    def equals(self, other: Any) -> bool:
        """Whether ``other`` holds the same observations in the same buckets.

        Compares values, not identity: the capacities, the real rows ``(X, y,
        task)`` and every optional field that either dataset has (padding is not
        compared, it is always the same). ``==`` keeps comparing identity, as for
        any pytree, so datasets can still be used where JAX hashes its inputs.

        Example:
            >>> import jax, numpy as np
            >>> jax.config.update("jax_enable_x64", True)
            >>> a = Dataset([[0.1], [0.2]], [1.0, 2.0])
            >>> a.equals(Dataset([[0.1], [0.2]], [1.0, 2.0]))
            True
            >>> a.equals(a.append([[0.3]], [3.0])), a.equals(Dataset([[0.1]], [1.0]))
            (False, False)
        """
        if not isinstance(other, Dataset):
            return False
        if (self.capacity, self.duel_capacity) != (other.capacity, other.duel_capacity):
            return False
        mine, theirs = self.unpadded_fields(), other.unpadded_fields()
        if mine.keys() != theirs.keys():
            return False
        pairs = zip(
            (*self.unpadded(), *mine.values()),
            (*other.unpadded(), *theirs.values()),
            strict=True,
        )
        return all(np.array_equal(a, b) for a, b in pairs)

    def __repr__(self) -> str:
        return f"Dataset(n={self.n}, d={self.dim}, capacity={self.capacity})"


jax.tree_util.register_pytree_node(
    Dataset, Dataset.tree_flatten, Dataset.tree_unflatten
)
