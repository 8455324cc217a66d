"""The storage interface a campaign talks to, and the records it exchanges.

A campaign keeps everything it was told in a :class:`Storage`: its configuration
(JSON), its trials and each iteration's posterior (arrays, never pickle). The
interface is small so that a server database can be added next to the embedded
SQLite backend (:class:`~ppbo.storage.sqlite.SQLiteStorage`). Every method that
changes state commits before it returns.
"""

from __future__ import annotations

import abc
import contextlib
import io
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Storage",
    "Campaign",
    "Trial",
    "TrialState",
    "StorageError",
    "DuplicateCampaignError",
    "encode_arrays",
    "decode_arrays",
    "Pair",
    "WINNERS",
]

#: Outcomes of a pair: ``"a"`` or ``"b"`` preferred, ``"tie"`` (equally good) or
#: ``"skip"`` (the expert cannot say).
WINNERS = ("a", "b", "tie", "skip")


class TrialState:
    """The states of a trial (strings, as stored).

    ``RUNNING``: asked, not yet told (a pending point for later asks);
    ``COMPLETE``: told a value; ``FAILED``: the objective raised or returned NaN
    (kept, excluded from the model); ``ABANDONED``: given up without a value.
    """

    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    ABANDONED = "ABANDONED"
    ALL = (RUNNING, COMPLETE, FAILED, ABANDONED)
    FINISHED = (COMPLETE, FAILED, ABANDONED)


class StorageError(RuntimeError):
    """A storage operation that cannot be done (unknown campaign, schema, ...)."""


class DuplicateCampaignError(StorageError):
    """A campaign of that name already exists in the storage."""


@dataclass(frozen=True)
class Campaign:
    """A campaign's record: its id, unique name and JSON configuration."""

    id: int
    name: str
    config: dict
    created: float


@dataclass(frozen=True)
class Trial:
    """One evaluation of the objective, as stored.

    Attributes:
        number: the trial's id within its campaign (0, 1, 2, ... in ask order).
        params: parameter name -> value, in the user's units.
        state: one of :class:`TrialState`.
        value: the told objective value (COMPLETE only; may be +-inf).
        created: Unix time of the ask.
        finished: Unix time of the tell, fail or abandon (None while RUNNING).
        iteration: the ask's iteration (the number of trials before it), whose
            key ``fold_in(seed, iteration)`` made the suggestion.
        task: task id for multi-task campaigns (None otherwise).
        message: why it failed or was abandoned, or a note on its value.
        origin: ``"design"``, ``"random"``, ``"model"`` or ``"user"``.
    """

    number: int
    params: dict
    state: str
    value: float | None = None
    created: float | None = None
    finished: float | None = None
    iteration: int | None = None
    task: int | None = None
    message: str | None = None
    origin: str = "model"
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> int:
        """Alias of :attr:`number` (the id that ``tell`` accepts)."""
        return self.number


@dataclass(frozen=True)
class Pair:
    """One pairwise comparison of a preference campaign, as stored.

    Attributes:
        number: the pair's id within its campaign (0, 1, 2, ... in ask order).
        a: the first point, parameter name -> value in the user's units.
        b: the second point.
        winner: None while RUNNING, else one of :data:`WINNERS`.
        state: ``"RUNNING"`` (asked, not told) or ``"COMPLETE"``.
        created: Unix time of the ask.
        finished: Unix time of the tell (None while RUNNING).
        iteration: the ask's iteration (the number of pairs asked before it).
        origin: ``"design"``, ``"random"`` or the acquisition's name.
        extra: JSON notes (e.g. the acquisition value).
    """

    number: int
    a: dict
    b: dict
    winner: str | None = None
    created: float | None = None
    finished: float | None = None
    iteration: int | None = None
    origin: str = "model"
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> int:
        """Alias of :attr:`number` (the id that ``tell`` accepts)."""
        return self.number

    @property
    def state(self) -> str:
        """``"RUNNING"`` before the tell, ``"COMPLETE"`` after."""
        return TrialState.RUNNING if self.winner is None else TrialState.COMPLETE

    def to_json(self) -> dict:
        """The pair as a JSON-ready dict (``id``, ``a``, ``b``, ``winner``, ...).

        Example:
            >>> Pair(0, {"x": 0.1}, {"x": 0.9}).to_json()["id"]
            0
        """
        return {
            "id": self.number,
            "a": self.a,
            "b": self.b,
            "winner": self.winner,
            "state": self.state,
            "iteration": self.iteration,
            "origin": self.origin,
        }


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store {value!r} of type {type(value).__name__} as JSON")


def dumps(value: Any) -> str:
    """JSON text; non-finite floats are refused (they are not JSON)."""
    return json.dumps(value, default=_json_default, allow_nan=False, sort_keys=True)


def loads(text: str) -> Any:
    return json.loads(text)


def encode_arrays(arrays: Mapping[str, Any]) -> bytes:
    """Arrays as ``.npz`` bytes (``numpy.savez``; no pickled objects).

    Nested mappings are flattened with ``/`` in the keys.

    Example:
        >>> blob = encode_arrays({"a": np.arange(3.0), "b": {"c": np.ones(2)}})
        >>> sorted(decode_arrays(blob)["b"])
        ['c']
    """
    flat: dict[str, np.ndarray] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                if "/" in str(key):
                    raise ValueError(f"array names may not contain '/', got {key!r}")
                walk(f"{prefix}/{key}" if prefix else str(key), inner)
        else:
            array = np.asarray(value)
            if array.dtype == object:
                raise ValueError(f"cannot store object array {prefix!r}")
            flat[prefix] = array

    walk("", arrays)
    buffer = io.BytesIO()
    np.savez(buffer, **flat)
    return buffer.getvalue()


def decode_arrays(blob: bytes) -> dict[str, Any]:
    """Inverse of :func:`encode_arrays` (``allow_pickle=False``)."""
    out: dict[str, Any] = {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
        for key in archive.files:
            *path, leaf = key.split("/")
            node = out
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = archive[key]
    return out


def _finite_or_none(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    return float(value)


class Storage(abc.ABC):
    """Where campaigns, trials and posteriors live.

    Implementations must make every mutating call atomic and durable before it
    returns, allocate trial numbers without gaps or duplicates under concurrent
    use, and refuse to finish a trial that is not RUNNING.
    """

    # -- campaigns ------------------------------------------------------------
    @abc.abstractmethod
    def create_campaign(self, name: str, config: Mapping[str, Any]) -> Campaign:
        """Create a campaign; raise :class:`DuplicateCampaignError` if it exists."""

    @abc.abstractmethod
    def get_campaign(self, name: str) -> Campaign | None:
        """The campaign called ``name``, or None."""

    @abc.abstractmethod
    def list_campaigns(self) -> list[Campaign]:
        """All campaigns, oldest first."""

    @abc.abstractmethod
    def update_config(self, campaign_id: int, config: Mapping[str, Any]) -> None:
        """Replace a campaign's configuration."""

    # -- trials -----------------------------------------------------------------
    @abc.abstractmethod
    def add_trials(
        self,
        campaign_id: int,
        trials: list[dict[str, Any]],
        posterior: tuple[int, bytes] | None = None,
    ) -> list[Trial]:
        """Insert trials (dicts of :class:`Trial` fields except ``number``).

        Numbers are allocated consecutively after the campaign's last trial. The
        optional ``(iteration, npz bytes)`` posterior is stored in the same
        transaction, so an ask is recorded entirely or not at all.
        """

    @abc.abstractmethod
    def finish_trial(
        self,
        campaign_id: int,
        number: int,
        state: str,
        value: float | None = None,
        message: str | None = None,
    ) -> Trial:
        """Move a RUNNING trial to a finished state; raise if it is not RUNNING."""

    @abc.abstractmethod
    def get_trials(self, campaign_id: int) -> list[Trial]:
        """All trials of a campaign, by number."""

    @abc.abstractmethod
    def get_trial(self, campaign_id: int, number: int) -> Trial | None:
        """One trial, or None."""

    # -- posteriors -------------------------------------------------------------
    @abc.abstractmethod
    def latest_posterior(self, campaign_id: int) -> tuple[int, bytes] | None:
        """The ``(iteration, npz bytes)`` of the newest stored posterior, or None."""

    @abc.abstractmethod
    def get_posterior(self, campaign_id: int, iteration: int) -> bytes | None:
        """The npz bytes stored for ``iteration``, or None."""

    # -- pairs (preference campaigns) -----------------------------------------------
    def add_pair(
        self,
        campaign_id: int,
        a: Mapping[str, Any],
        b: Mapping[str, Any],
        *,
        iteration: int,
        origin: str,
        extra: Mapping[str, Any] | None = None,
    ) -> Pair:
        """Insert a RUNNING pair numbered after the campaign's last pair."""
        raise StorageError(f"{type(self).__name__} does not store pairs")

    def finish_pair(self, campaign_id: int, number: int, winner: str) -> Pair:
        """Record a RUNNING pair's winner; raise if unknown or already told."""
        raise StorageError(f"{type(self).__name__} does not store pairs")

    def get_pairs(self, campaign_id: int) -> list[Pair]:
        """All pairs of a campaign, by number."""
        raise StorageError(f"{type(self).__name__} does not store pairs")

    # -- concurrency ------------------------------------------------------------
    @contextlib.contextmanager
    def ask_lock(self, campaign_id: int) -> Iterator[None]:
        """Serialise asks across threads and processes (default: no lock)."""
        yield

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
