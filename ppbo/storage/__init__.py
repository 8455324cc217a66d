"""Where campaigns live: the storage interface and its SQLite backend.

``open_storage(spec)`` turns what a user passes as ``storage=`` into a
:class:`Storage`: None (a private in-memory database), a file path (SQLite; the
file is created if missing) or a :class:`Storage` instance.
"""

from __future__ import annotations

import os
from typing import Any

from ppbo.storage.base import (
    WINNERS,
    Campaign,
    DuplicateCampaignError,
    Pair,
    Storage,
    StorageError,
    Trial,
    TrialState,
    decode_arrays,
    encode_arrays,
)
from ppbo.storage.sqlite import SCHEMA_VERSION, SQLiteStorage

__all__ = [
    "Storage",
    "SQLiteStorage",
    "Campaign",
    "Trial",
    "TrialState",
    "StorageError",
    "DuplicateCampaignError",
    "SCHEMA_VERSION",
    "open_storage",
    "encode_arrays",
    "decode_arrays",
    "Pair",
    "WINNERS",
]


def open_storage(spec: Any) -> Storage:
    """A :class:`Storage` for ``spec``: None, a path, or a storage instance.

    Example:
        >>> open_storage(None)
        SQLiteStorage(':memory:')
    """
    if spec is None:
        return SQLiteStorage(":memory:")
    if isinstance(spec, Storage):
        return spec
    if isinstance(spec, str | os.PathLike):
        text = os.fspath(spec)
        if text.startswith("sqlite:///"):
            text = text[len("sqlite:///") :]
        if not text:
            raise ValueError("storage path is empty")
        return SQLiteStorage(text)
    raise ValueError(
        f"storage must be None, a file path or a ppbo.storage.Storage, got {spec!r}"
    )
