"""Search spaces in the user's units, and their maps to the unit cube.

A :class:`Space` maps parameter names to :class:`Real`, :class:`Integer` and
:class:`Categorical` dimensions. Models and acquisitions work in the unit cube; the
campaign layer converts with :meth:`Space.to_unit` and :meth:`Space.from_unit`:

- ``Real(low, high)`` maps linearly to [0, 1]; ``Real(low, high, log=True)`` maps
  ``log(value)`` linearly (for scale parameters such as learning rates);
- ``Integer(low, high)`` maps like a real on [low, high] and is rounded back to the
  nearest integer (``log=True`` works on the log scale);
- ``Categorical(choices)`` with k choices is one-hot encoded in k unit coordinates
  and decoded by the largest coordinate, the continuous relaxation of Garrido-Merchán
  and Hernández-Lobato (2020).

A point suggested in the unit cube is decoded to the nearest valid parameters and
encoded again (:meth:`Space.snap`), so the model always conditions on the point that
was actually evaluated.

References:
    Garrido-Merchán, E. C. and Hernández-Lobato, D. (2020). Dealing with categorical
    and integer-valued variables in Bayesian optimization with Gaussian processes.
    Neurocomputing 380.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Real", "Integer", "Categorical", "Space", "Dimension"]


def _check_number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{field} must be a real number, got {value!r}")
    if isinstance(value, np.floating) and value.dtype != np.float64:
        raise ValueError(
            f"{field} must be float64, got {value.dtype.name} value {value!r}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{field} must be finite, got {value!r}")
    return value


def _scalar(name: str, value: Any) -> Any:
    """A parameter value as a Python scalar; arrays of shape () are unwrapped."""
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise ValueError(
                f"parameter {name!r} must be a scalar, got an array of shape "
                f"{value.shape}"
            )
        if value.dtype.kind == "f" and value.dtype != np.float64:
            raise ValueError(
                f"parameter {name!r} must be float64, got {value.dtype.name} "
                f"value {value!r}"
            )
        return value.item()
    if isinstance(value, list | tuple | dict | set):
        raise ValueError(f"parameter {name!r} must be a scalar, got {value!r}")
    return value


@dataclass(frozen=True)
class Real:
    """A real parameter in ``[low, high]``.

    Args:
        low: lower bound.
        high: upper bound, ``> low``.
        log: search ``log(value)`` uniformly (needs ``low > 0``).

    Example:
        >>> Real(1e-4, 1e-1, log=True).to_unit(1e-2)
        array([0.66666667])
    """

    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        low = _check_number("Real.low", self.low)
        high = _check_number("Real.high", self.high)
        if not low < high:
            raise ValueError(f"Real needs low < high, got low={low!r}, high={high!r}")
        if self.log and low <= 0:
            raise ValueError(f"Real(log=True) needs low > 0, got low={low!r}")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "log", bool(self.log))

    @property
    def size(self) -> int:
        """Number of unit-cube coordinates (1)."""
        return 1

    def _ends(self) -> tuple[float, float]:
        if self.log:
            return math.log(self.low), math.log(self.high)
        return self.low, self.high

    def validate(self, name: str, value: Any) -> float:
        """Return ``value`` as a float, or raise naming ``name`` and the value."""
        value = _check_number(f"parameter {name!r}", _scalar(name, value))
        if not self.low <= value <= self.high:
            raise ValueError(
                f"parameter {name!r} = {value!r} is outside its bounds "
                f"[{self.low!r}, {self.high!r}]"
            )
        return value

    def to_unit(self, value: float) -> np.ndarray:
        """The value's unit coordinate, shape (1,)."""
        a, b = self._ends()
        v = math.log(value) if self.log else value
        return np.array([min(max((v - a) / (b - a), 0.0), 1.0)])

    def from_unit(self, u: np.ndarray) -> float:
        """The value at unit coordinate ``u[0]`` (clipped to the bounds)."""
        a, b = self._ends()
        v = a + float(np.clip(u[0], 0.0, 1.0)) * (b - a)
        value = math.exp(v) if self.log else v
        return min(max(value, self.low), self.high)

    def to_dict(self) -> dict:
        """JSON-ready description."""
        return {"type": "real", "low": self.low, "high": self.high, "log": self.log}


@dataclass(frozen=True)
class Integer:
    """An integer parameter in ``[low, high]`` (both included).

    Args:
        low: smallest value.
        high: largest value, ``> low``.
        log: search on the log scale (needs ``low >= 1``).

    Example:
        >>> Integer(1, 5).from_unit(np.array([0.6]))
        3
    """

    low: int
    high: int
    log: bool = False

    def __post_init__(self) -> None:
        for field in ("low", "high"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"Integer.{field} must be an integer, got {value!r}")
        if not self.low < self.high:
            raise ValueError(
                f"Integer needs low < high, got low={self.low!r}, high={self.high!r}"
            )
        if self.log and self.low < 1:
            raise ValueError(f"Integer(log=True) needs low >= 1, got low={self.low!r}")
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))
        object.__setattr__(self, "log", bool(self.log))

    @property
    def size(self) -> int:
        """Number of unit-cube coordinates (1)."""
        return 1

    def _real(self) -> Real:
        return Real(float(self.low), float(self.high), self.log)

    def validate(self, name: str, value: Any) -> int:
        """Return ``value`` as an int, or raise naming ``name`` and the value."""
        value = _scalar(name, value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"parameter {name!r} must be an integer, got {value!r}")
        if not (math.isfinite(float(value)) and float(value) == int(value)):
            raise ValueError(f"parameter {name!r} must be an integer, got {value!r}")
        value = int(value)
        if not self.low <= value <= self.high:
            raise ValueError(
                f"parameter {name!r} = {value!r} is outside its bounds "
                f"[{self.low!r}, {self.high!r}]"
            )
        return value

    def to_unit(self, value: int) -> np.ndarray:
        """The value's unit coordinate, shape (1,)."""
        return self._real().to_unit(float(value))

    def from_unit(self, u: np.ndarray) -> int:
        """The nearest integer to the value at unit coordinate ``u[0]``."""
        value = round(self._real().from_unit(u))
        return min(max(int(value), self.low), self.high)

    def to_dict(self) -> dict:
        """JSON-ready description."""
        return {"type": "integer", "low": self.low, "high": self.high, "log": self.log}


@dataclass(frozen=True)
class Categorical:
    """A categorical parameter, one-hot encoded in the unit cube.

    Args:
        choices: at least two distinct JSON scalars (str, int, float, bool).

    Example:
        >>> Categorical(["relu", "tanh"]).to_unit("tanh")
        array([0., 1.])
    """

    choices: tuple

    def __post_init__(self) -> None:
        if isinstance(self.choices, str | bytes) or not hasattr(
            self.choices, "__iter__"
        ):
            raise ValueError(
                f"Categorical.choices must be a list of values, got {self.choices!r}"
            )
        choices = tuple(self.choices)
        if len(choices) < 2:
            raise ValueError(
                f"Categorical needs at least 2 choices, got {list(choices)!r}"
            )
        for choice in choices:
            if not isinstance(choice, str | int | float | bool) or (
                isinstance(choice, float) and not math.isfinite(choice)
            ):
                raise ValueError(
                    f"Categorical choices must be str, int, bool or finite float, "
                    f"got {choice!r}"
                )
        if len({(type(c), c) for c in choices}) != len(choices):
            raise ValueError(f"Categorical choices must be distinct, got {choices!r}")
        object.__setattr__(self, "choices", choices)

    @property
    def size(self) -> int:
        """Number of unit-cube coordinates (one per choice)."""
        return len(self.choices)

    def _index(self, value: Any) -> int | None:
        for i, choice in enumerate(self.choices):
            if type(choice) is type(value) and choice == value:
                return i
        return None

    def validate(self, name: str, value: Any) -> Any:
        """Return ``value`` if it is one of the choices, else raise naming it."""
        value = _scalar(name, value)
        if self._index(value) is None:
            raise ValueError(
                f"parameter {name!r} = {value!r} is not one of the choices "
                f"{list(self.choices)!r}"
            )
        return value

    def to_unit(self, value: Any) -> np.ndarray:
        """One-hot coordinates, shape (k,)."""
        u = np.zeros(len(self.choices))
        u[self._index(value)] = 1.0
        return u

    def from_unit(self, u: np.ndarray) -> Any:
        """The choice with the largest coordinate."""
        return self.choices[int(np.argmax(u))]

    def to_dict(self) -> dict:
        """JSON-ready description."""
        return {"type": "categorical", "choices": list(self.choices)}


Dimension = Real | Integer | Categorical

_TYPES = {"real": Real, "integer": Integer, "categorical": Categorical}


class Space:
    """Named parameters and the map between them and the unit cube.

    Args:
        dimensions: name -> :class:`Real`, :class:`Integer` or
            :class:`Categorical`, in the order of the unit-cube coordinates.

    Raises:
        ValueError: for an empty space, a non-string name or an unknown dimension.

    Example:
        >>> space = Space({"lr": Real(1e-4, 1e-1, log=True), "layers": Integer(1, 5),
        ...                "act": Categorical(["relu", "tanh"])})
        >>> space.dim  # unit-cube coordinates: 1 + 1 + 2
        4
        >>> u = space.to_unit({"lr": 1e-3, "layers": 5, "act": "relu"})
        >>> u
        array([0.33333333, 1.        , 1.        , 0.        ])
        >>> space.from_unit(u)  # the log scale round-trips to rounding error
        {'lr': 0.0010000000000000002, 'layers': 5, 'act': 'relu'}
    """

    def __init__(self, dimensions: Mapping[str, Dimension]) -> None:
        if not isinstance(dimensions, Mapping) or not dimensions:
            raise ValueError(
                f"Space needs a non-empty mapping of name -> dimension, got "
                f"{dimensions!r}"
            )
        for name, dimension in dimensions.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"parameter names must be non-empty str, got {name!r}")
            if not isinstance(dimension, Real | Integer | Categorical):
                raise ValueError(
                    f"dimension {name!r} must be Real, Integer or Categorical, got "
                    f"{dimension!r}"
                )
        self._dimensions = dict(dimensions)

    @property
    def dimensions(self) -> dict[str, Dimension]:
        """name -> dimension (a copy)."""
        return dict(self._dimensions)

    @property
    def names(self) -> list[str]:
        """Parameter names, in order."""
        return list(self._dimensions)

    @property
    def dim(self) -> int:
        """Number of unit-cube coordinates."""
        return sum(d.size for d in self._dimensions.values())

    def __len__(self) -> int:
        return len(self._dimensions)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self._dimensions == other._dimensions

    def __hash__(self) -> int:
        return hash(tuple(self._dimensions.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v!r}" for k, v in self._dimensions.items())
        return f"Space({{{inner}}})"

    def validate(self, params: Any) -> dict[str, Any]:
        """Check a parameter dict: every name present, no unknown names, in bounds.

        Returns:
            The parameters with canonical Python types (float, int, choice).

        Raises:
            ValueError: naming the first offending parameter and its value.

        Example:
            >>> Space({"x": Real(0, 1)}).validate({"x": 2.0})
            Traceback (most recent call last):
            ...
            ValueError: parameter 'x' = 2.0 is outside its bounds [0.0, 1.0]
        """
        if not isinstance(params, Mapping):
            raise ValueError(f"params must be a dict of name -> value, got {params!r}")
        unknown = [k for k in params if k not in self._dimensions]
        if unknown:
            raise ValueError(
                f"unknown parameter {unknown[0]!r}; the space has {self.names}"
            )
        missing = [k for k in self._dimensions if k not in params]
        if missing:
            raise ValueError(
                f"missing parameter {missing[0]!r}; the space needs {self.names}"
            )
        return {
            name: dimension.validate(name, params[name])
            for name, dimension in self._dimensions.items()
        }

    def to_unit(self, params: Mapping[str, Any]) -> np.ndarray:
        """Validated parameters as a unit-cube point, shape (dim,)."""
        params = self.validate(params)
        return np.concatenate(
            [d.to_unit(params[name]) for name, d in self._dimensions.items()]
        )

    def from_unit(self, u: Any) -> dict[str, Any]:
        """The parameters nearest to the unit-cube point ``u`` (dim,)."""
        u = np.asarray(u, dtype=np.float64)
        if u.shape != (self.dim,):
            raise ValueError(
                f"unit-cube point must have shape ({self.dim},), got {u.shape}"
            )
        params, start = {}, 0
        for name, dimension in self._dimensions.items():
            params[name] = dimension.from_unit(u[start : start + dimension.size])
            start += dimension.size
        return params

    def snap(self, u: Any) -> np.ndarray:
        """Encode the decoded point: the unit-cube image of a valid point.

        Example:
            >>> Space({"n": Integer(0, 4)}).snap([0.3])
            array([0.25])
        """
        return self.to_unit(self.from_unit(u))

    def to_json(self) -> list[dict]:
        """JSON-ready description, a list in coordinate order (JSON objects do not
        keep their key order everywhere); :meth:`from_json` rebuilds the space.

        Example:
            >>> space = Space({"x": Real(0.0, 1.0), "a": Categorical([1, 2])})
            >>> space.to_json()[0]
            {'name': 'x', 'type': 'real', 'low': 0.0, 'high': 1.0, 'log': False}
            >>> Space.from_json(space.to_json()) == space
            True
        """
        return [{"name": name} | d.to_dict() for name, d in self._dimensions.items()]

    @classmethod
    def from_json(cls, description: list[Mapping[str, Any]]) -> Space:
        """Rebuild a space from :meth:`to_json` output."""
        if not isinstance(description, list):
            raise ValueError(f"a space description must be a list, got {description!r}")
        dimensions = {}
        for spec in description:
            spec = dict(spec)
            name = spec.pop("name", None)
            kind = spec.pop("type", None)
            if kind not in _TYPES:
                raise ValueError(
                    f"dimension {name!r} has unknown type {kind!r}; known: "
                    f"{sorted(_TYPES)}"
                )
            dimensions[name] = _TYPES[kind](**spec)
        return cls(dimensions)
