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
    "open_campaign",
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


def open_campaign(spec: Any, name: str) -> tuple[Storage, Campaign]:
    """The storage for ``spec`` (see :func:`open_storage`) and its campaign ``name``.

    Raises:
        ValueError: if the storage has no campaign of that name, listing the
            campaigns it has.

    Example:
        >>> storage = open_storage(None)
        >>> open_campaign(storage, "missing")
        Traceback (most recent call last):
        ...
        ValueError: no campaign named 'missing' in SQLiteStorage(':memory:'); it has []
    """
    storage = open_storage(spec)
    campaign = storage.get_campaign(name)
    if campaign is None:
        known = [c.name for c in storage.list_campaigns()]
        raise ValueError(f"no campaign named {name!r} in {storage!r}; it has {known}")
    return storage, campaign
