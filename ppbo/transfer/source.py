"""Source tasks: evaluations of related objectives, given beside the target's.

Transfer learning in Bayesian optimisation uses data of earlier, related tasks
("sources") to optimise a new one (the "target"); see the survey of Bai et al.
(2023, "Transfer learning for Bayesian optimization: a survey"). A
:class:`Source` holds one source task's evaluations in the TARGET's search space
and in the user's units, exactly like trials: ``X`` a list of parameter dicts
(or an ``(n, d)`` array of parameter values in the space's order) and ``y`` the
objective values. A campaign (``ppbo.Optimizer(..., sources=[...])``) validates
the sources against its space (:func:`validate_sources`), stores them as JSON
(:func:`sources_to_json`) and builds the model-space data of the transfer
contract: unit-cube inputs, each task's outputs standardised on their own
(:func:`source_arrays`).

Files (the ``ppbo create --source FILE`` option, :func:`read_source`):

- CSV: a header with the parameter names and ``value``, one row per evaluation;
  the source's name is the file's stem.
- JSON: ``{"name": "lab-2019", "params": [{"x": 0.1, ...}, ...],
  "values": [1.3, ...], "meta_features": [0.5, ...]}`` (``name`` defaults to the
  file's stem, ``meta_features`` is optional); or a list of such objects for
  several sources in one file.

References:
    Bai, T., Li, Y., Shen, Y., Zhang, X., Zhang, W. and Cui, B. (2023). Transfer
    learning for Bayesian optimization: a survey. arXiv:2302.05927.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppbo.space import Space

__all__ = [
    "Source",
    "validate_sources",
    "sources_to_json",
    "sources_from_json",
    "source_arrays",
    "read_source",
]


def _finite_vector(where: str, field: str, value: Any) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: {field} must be real numbers, got {value!r}"
        ) from None
    if array.ndim != 1:
        raise ValueError(
            f"{where}: {field} must be one-dimensional, got shape {array.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{where}: {field}[{i}] = {array[i]!r} is not finite")
    return array


@dataclass(frozen=True, eq=False)
class Source:
    """One source task's evaluations, in the target's space and the user's units.

    Args:
        name: the source's unique, non-empty name.
        X: the evaluated points: a list of parameter dicts (as
            ``trial.params``), or an array (n, d) of parameter values in the
            order of the space's names (categorical values need dicts).
        y: the objective values (n,), finite, in the same direction as the
            target's (a minimised target's sources are minimised too).
        meta_features: optional finite meta-features of the task (f,), for
            surrogates that compare tasks by them.

    Raises:
        ValueError: for an empty or non-string name, empty ``y``, non-finite
            values or meta-features, or ``X`` and ``y`` of different lengths;
            the message names the source and the field. Checks against a space
            are done by :func:`validate_sources`.

    Example:
        >>> source = Source("old", [{"x": 0.1}, {"x": 0.7}], [1.0, 0.5])
        >>> source.n
        2
        >>> Source("bad", [{"x": 0.1}], [float("nan")])
        Traceback (most recent call last):
        ...
        ValueError: source 'bad': y[0] = np.float64(nan) is not finite
    """

    name: str
    X: Any
    y: Any
    meta_features: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(
                f"source name must be a non-empty str, got name={self.name!r}"
            )
        where = f"source {self.name!r}"
        y = _finite_vector(where, "y", self.y)
        if y.size == 0:
            raise ValueError(f"{where}: y is empty; a source needs evaluations")
        if isinstance(self.X, np.ndarray | Sequence) and not isinstance(self.X, str):
            n = len(self.X)
        else:
            raise ValueError(
                f"{where}: X must be a list of parameter dicts or an (n, d) array, "
                f"got {type(self.X).__name__}"
            )
        if n != y.size:
            raise ValueError(f"{where}: X has {n} points but y has {y.size} values")
        object.__setattr__(self, "y", y)
        if self.meta_features is not None:
            meta = _finite_vector(where, "meta_features", self.meta_features)
            if meta.size == 0:
                raise ValueError(f"{where}: meta_features is empty")
            object.__setattr__(self, "meta_features", meta)

    @property
    def n(self) -> int:
        """The number of evaluations."""
        return int(self.y.size)

    def params(self, space: Space) -> list[dict[str, Any]]:
        """The points as validated parameter dicts of ``space``.

        Raises:
            ValueError: for a dimension, a parameter name or a value out of the
                space's bounds, naming the source, the point and the parameter.

        Example:
            >>> space = Space({"x": ppbo.Real(0.0, 1.0)})
            >>> Source("old", np.array([[0.25]]), [1.0]).params(space)
            [{'x': 0.25}]
        """
        where = f"source {self.name!r}"
        if isinstance(self.X, np.ndarray) or (
            len(self.X) and not isinstance(self.X[0], Mapping)
        ):
            try:
                array = np.asarray(self.X, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{where}: X must be a list of parameter dicts or a real (n, d) "
                    "array"
                ) from None
            if array.ndim != 2 or array.shape[1] != len(space):
                raise ValueError(
                    f"{where}: X has shape {array.shape}; the space has "
                    f"{len(space)} parameters {space.names}, so X needs shape "
                    f"({self.n}, {len(space)})"
                )
            bad = np.argwhere(~np.isfinite(array))
            if bad.size:
                i, j = (int(v) for v in bad[0])
                raise ValueError(
                    f"{where}: X[{i}, {j}] (parameter {space.names[j]!r}) = "
                    f"{array[i, j]!r} is not finite"
                )
            points = [
                dict(zip(space.names, row.tolist(), strict=True)) for row in array
            ]
        else:
            points = list(self.X)
        validated = []
        for i, point in enumerate(points):
            try:
                validated.append(space.validate(point))
            except ValueError as error:
                raise ValueError(f"{where}: X[{i}]: {error}") from None
        return validated

    def to_json(self, space: Space) -> dict:
        """The source as JSON (validated parameter dicts).

        Example:
            >>> space = Space({"x": ppbo.Real(0.0, 1.0)})
            >>> Source("old", [{"x": 0.5}], [2.0]).to_json(space)
            {'name': 'old', 'params': [{'x': 0.5}], 'values': [2.0]}
        """
        out = {
            "name": self.name,
            "params": self.params(space),
            "values": self.y.tolist(),
        }
        if self.meta_features is not None:
            out["meta_features"] = self.meta_features.tolist()
        return out

    def __repr__(self) -> str:
        return f"Source(name={self.name!r}, n={self.n})"


def validate_sources(sources: Any, space: Space) -> tuple[Source, ...]:
    """Check sources against the target's space; return them with dict points.

    Args:
        sources: a list of :class:`Source` (or their JSON, see
            :func:`sources_from_json`), or None.
        space: the target's space.

    Returns:
        The sources, each with ``X`` the validated parameter dicts.

    Raises:
        ValueError: for something that is not a source, duplicate names,
            meta-features given for some sources only or of different lengths,
            or points that do not fit the space (see :meth:`Source.params`).

    Example:
        >>> space = Space({"x": ppbo.Real(0.0, 1.0)})
        >>> a = Source("a", [{"x": 0.5}], [2.0])
        >>> validate_sources([a, a], space)
        Traceback (most recent call last):
        ...
        ValueError: sources[1]: duplicate source name 'a'; names must be unique
    """
    if sources is None:
        return ()
    if isinstance(sources, Source | Mapping | str):
        raise ValueError(
            f"sources must be a list of ppbo.Source, got {type(sources).__name__}"
        )
    out, names = [], set()
    for i, source in enumerate(sources):
        if isinstance(source, Mapping):
            source = _from_json_one(source)
        if not isinstance(source, Source):
            raise ValueError(
                f"sources[{i}] must be a ppbo.Source, got {type(source).__name__}"
            )
        if source.name in names:
            raise ValueError(
                f"sources[{i}]: duplicate source name {source.name!r}; names must "
                "be unique"
            )
        names.add(source.name)
        out.append(
            Source(source.name, source.params(space), source.y, source.meta_features)
        )
    given = [s.meta_features is not None for s in out]
    if any(given) and not all(given):
        missing = out[given.index(False)].name
        raise ValueError(
            f"source {missing!r}: meta_features missing; give them for every "
            "source or for none"
        )
    if all(given) and out and len({s.meta_features.size for s in out}) > 1:
        sizes = {s.name: s.meta_features.size for s in out}
        raise ValueError(f"sources: meta_features differ in length: {sizes}")
    return tuple(out)


def _from_json_one(description: Mapping[str, Any], default_name: str = "") -> Source:
    unknown = set(description) - {"name", "params", "values", "meta_features"}
    name = description.get("name", default_name)
    if unknown:
        raise ValueError(
            f"source {name!r}: unknown field {sorted(unknown)[0]!r}; a source has "
            "'name', 'params', 'values' and optionally 'meta_features'"
        )
    for field in ("params", "values"):
        if field not in description:
            raise ValueError(f"source {name!r}: missing field {field!r}")
    return Source(
        name,
        list(description["params"]),
        description["values"],
        description.get("meta_features"),
    )


def sources_to_json(sources: Sequence[Source], space: Space) -> list[dict]:
    """The sources as a JSON-ready list (as stored with a campaign).

    Example:
        >>> space = Space({"x": ppbo.Real(0.0, 1.0)})
        >>> sources_to_json([Source("a", [{"x": 0.5}], [2.0])], space)[0]["values"]
        [2.0]
    """
    return [source.to_json(space) for source in sources]


def sources_from_json(description: Any) -> tuple[Source, ...]:
    """Sources from :func:`sources_to_json` output (or the JSON file format).

    Example:
        >>> sources_from_json([{"name": "a", "params": [{"x": 0.5}],
        ...                     "values": [2.0]}])
        (Source(name='a', n=1),)
    """
    if isinstance(description, Mapping):
        description = [description]
    if not isinstance(description, list):
        raise ValueError(
            f"sources must be a JSON list of sources, got {type(description).__name__}"
        )
    return tuple(_from_json_one(d) for d in description)


def source_arrays(
    sources: Sequence[Source], space: Space, maximize: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sources' rows in model space, source by source.

    Inputs go to the unit cube like trials; each source's values are signed
    (minimisation flipped, as the target's) and standardised by that source's own
    mean and standard deviation (:func:`ppbo.campaign.transforms.standardize_outputs`),
    as the transfer data contract of ppbo asks.

    Args:
        sources: validated sources (:func:`validate_sources`).
        space: the target's space.
        maximize: the campaign's direction.

    Returns:
        ``(X, y, source)``: unit points (n, d), standardised outputs (n,) and
        source ids (n,), ``k`` for the rows of ``sources[k]``.

    Example:
        >>> space = Space({"x": ppbo.Real(0.0, 2.0)})
        >>> X, y, ids = source_arrays(
        ...     [Source("a", [{"x": 0.0}, {"x": 2.0}], [1.0, 3.0])], space, False)
        >>> X.ravel().tolist(), y.round(12).tolist(), ids.tolist()
        ([0.0, 1.0], [1.0, -1.0], [0, 0])
    """
    from ppbo.campaign.transforms import standardize_outputs

    Xs, ys, ids = [np.zeros((0, space.dim))], [np.zeros(0)], [np.zeros(0, np.int64)]
    for k, source in enumerate(sources):
        Xs.append(np.stack([space.to_unit(p) for p in source.params(space)]))
        ys.append(standardize_outputs(source.y, maximize).y)
        ids.append(np.full(source.n, k, np.int64))
    return np.concatenate(Xs), np.concatenate(ys), np.concatenate(ids)


def read_source(path: str | Path, space: Space) -> list[Source]:
    """Read sources from a CSV or JSON file (the formats of the module docstring).

    Args:
        path: a ``.csv`` file (columns: the parameter names and ``value``) or a
            ``.json`` file.
        space: the target's space (for the CSV's value types and checks).

    Returns:
        The file's sources, validated against ``space``.

    Raises:
        ValueError: for an unreadable file, a missing or unknown column, a value
            that is not a number, or a source that does not fit the space.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "old.csv").write_text("x,value\\n0.1,1.5\\n0.9,0.5\\n")
        >>> read_source(folder / "old.csv", Space({"x": ppbo.Real(0.0, 1.0)}))
        [Source(name='old', n=2)]
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"source file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            description = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(
                f"source file {path.name!r} is not JSON: {error}"
            ) from None
        items = description if isinstance(description, list) else [description]
        sources = []
        for item in items:
            if not isinstance(item, Mapping):
                raise ValueError(
                    f"source file {path.name!r}: each source must be a JSON object"
                )
            sources.append(_from_json_one(item, default_name=path.stem))
        return list(validate_sources(sources, space))
    if suffix != ".csv":
        raise ValueError(
            f"source file {path.name!r} must end in .csv or .json, got {suffix!r}"
        )
    return [_read_csv(path, space)]


def _read_csv(path: Path, space: Space) -> Source:
    where = f"source {path.stem!r} ({path.name})"
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns = list(reader.fieldnames or [])
        rows = list(reader)
    expected = set(space.names) | {"value"}
    for column in columns:
        if column not in expected:
            raise ValueError(
                f"{where}: unknown column {column!r}; the columns must be "
                f"{space.names + ['value']}"
            )
    for column in space.names + ["value"]:
        if column not in columns:
            raise ValueError(f"{where}: missing column {column!r}")
    points, values = [], []
    for i, row in enumerate(rows):
        point = {}
        for name, dimension in space.dimensions.items():
            point[name] = _csv_value(where, i, name, row[name], dimension)
        points.append(point)
        values.append(_csv_value(where, i, "value", row["value"], None))
    source = Source(path.stem, points, values)
    return validate_sources([source], space)[0]


def _csv_value(where: str, row: int, column: str, text: str, dimension) -> Any:
    from ppbo.space import Categorical

    if isinstance(dimension, Categorical):
        for choice in dimension.choices:
            if str(choice) == text:
                return choice
        raise ValueError(
            f"{where}: row {row}, column {column!r}: {text!r} is not one of "
            f"{list(dimension.choices)}"
        )
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: row {row}, column {column!r}: {text!r} is not a number"
        ) from None
    if not math.isfinite(value):
        raise ValueError(
            f"{where}: row {row}, column {column!r}: {text!r} is not finite"
        )
    return value
