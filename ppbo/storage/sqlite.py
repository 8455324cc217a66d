"""The embedded default storage: one SQLite file, through the standard library.

SQLite (https://sqlite.org) in write-ahead-log mode lets several processes on one
machine read while one writes; every change runs in an ``IMMEDIATE`` transaction
with bound parameters and is committed before the call returns, with
``synchronous=FULL``, so a process killed at any moment loses nothing it was told.
Asks are serialised across processes with an advisory lock on a ``.lock`` file
next to the database, so concurrent askers see each other's pending trials.

Tables: ``schema_version`` (one row), ``campaigns`` (name, JSON configuration),
``trials`` (number, state, parameters as JSON, value, timestamps, task, ...) and
``posteriors`` (each iteration's samples and sampler state as ``.npz`` bytes) and
``pairs`` (the pairwise comparisons of preference campaigns: both points as JSON
and the winner; added in schema version 2, which older databases are migrated to
when opened).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
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
    _finite_or_none,
    dumps,
    loads,
)

try:  # advisory file locks (POSIX); elsewhere asks are serialised per process
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = ["SQLiteStorage", "SCHEMA_VERSION"]

#: Version of the schema written by this release.
SCHEMA_VERSION = 2

# the pairs of preference campaigns (added in schema version 2)
_PAIRS_TABLE = """CREATE TABLE IF NOT EXISTS pairs (
    campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
    number INTEGER NOT NULL,
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    winner TEXT CHECK (winner IS NULL OR winner IN ('a', 'b', 'tie', 'skip')),
    created REAL NOT NULL,
    finished REAL,
    iteration INTEGER,
    origin TEXT NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (campaign_id, number)
)"""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS campaigns (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
    number INTEGER NOT NULL,
    state TEXT NOT NULL
        CHECK (state IN ('RUNNING', 'COMPLETE', 'FAILED', 'ABANDONED')),
    params TEXT NOT NULL,
    value REAL,
    created REAL NOT NULL,
    finished REAL,
    iteration INTEGER,
    task INTEGER,
    message TEXT,
    origin TEXT NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (campaign_id, number)
);
CREATE TABLE IF NOT EXISTS posteriors (
    campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
    iteration INTEGER NOT NULL,
    data BLOB NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (campaign_id, iteration)
);
"""
    + _PAIRS_TABLE
    + ";\n"
)

# version -> SQL that upgrades a database from that version to the next
_MIGRATIONS: dict[int, str] = {
    # 1 -> 2: the pairs of preference campaigns (a version-1 database has none)
    1: _PAIRS_TABLE,
}

_PAIR_COLUMNS = "number, a, b, winner, created, finished, iteration, origin, extra"


def _pair(row: tuple) -> Pair:
    number, a, b, winner, created, finished, iteration, origin, extra = row
    return Pair(
        int(number),
        loads(a),
        loads(b),
        winner,
        created,
        finished,
        None if iteration is None else int(iteration),
        origin,
        loads(extra),
    )


_TRIAL_COLUMNS = (
    "number, params, state, value, created, finished, iteration, task, message, "
    "origin, extra"
)


def _trial(row: tuple) -> Trial:
    names = ("number", "params", "state", "value", "created", "finished")
    names += ("iteration", "task", "message", "origin", "extra")
    fields = dict(zip(names, row, strict=True))
    fields["number"] = int(fields["number"])
    fields["params"] = loads(fields["params"])
    fields["extra"] = loads(fields["extra"])
    return Trial(**fields)


class SQLiteStorage(Storage):
    """Campaigns in one SQLite database file.

    Args:
        path: the database file (created with its folder if missing), or
            ``":memory:"`` for a private in-memory database (one process).
        timeout: seconds to wait for another process's write lock.

    Raises:
        StorageError: if ``path`` is not an SQLite database (e.g. a text file).

    Example:
        >>> storage = SQLiteStorage(":memory:")
        >>> campaign = storage.create_campaign("demo", {"seed": 0})
        >>> storage.get_campaign("demo").config
        {'seed': 0}
    """

    def __init__(self, path: str | os.PathLike = ":memory:", timeout: float = 600.0):
        self.path = str(path)
        self._memory = self.path == ":memory:"
        if not self._memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._timeout = float(timeout)
        self._lock = threading.RLock()
        self._ask_lock = threading.Lock()
        conn = None
        try:
            conn = self._conn = sqlite3.connect(
                self.path,
                timeout=self._timeout,
                isolation_level=None,  # explicit transactions below
                check_same_thread=False,
            )
            with self._lock:
                self._conn.execute("PRAGMA foreign_keys = ON")
                if not self._memory:
                    self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
                self._init_schema()
        except sqlite3.DatabaseError as error:
            if conn is not None:
                conn.close()
            raise StorageError(
                f"storage {self.path!r} is not a ppbo database ({error})"
            ) from None

    def __repr__(self) -> str:
        return f"SQLiteStorage({self.path!r})"

    # -- plumbing -----------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cursor = self._conn.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _init_schema(self) -> None:
        with self._transaction() as cur:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    cur.execute(statement)
            rows = cur.execute("SELECT version FROM schema_version").fetchall()
            if not rows:
                cur.execute(
                    "INSERT INTO schema_version (version) VALUES (?)",
                    (SCHEMA_VERSION,),
                )
                return
            version = int(rows[0][0])
            if version > SCHEMA_VERSION:
                raise StorageError(
                    f"{self.path} has schema version {version}, newer than this "
                    f"ppbo's {SCHEMA_VERSION}: upgrade ppbo to open it"
                )
            while version < SCHEMA_VERSION:
                cur.execute(_MIGRATIONS[version])
                version += 1
            cur.execute("UPDATE schema_version SET version = ?", (version,))

    # -- campaigns ----------------------------------------------------------------
    def create_campaign(self, name: str, config: Mapping[str, Any]) -> Campaign:
        created = time.time()
        text = dumps(dict(config))
        try:
            with self._transaction() as cur:
                cur.execute(
                    "INSERT INTO campaigns (name, config, created) VALUES (?, ?, ?)",
                    (name, text, created),
                )
                campaign_id = cur.lastrowid
        except sqlite3.IntegrityError:
            raise DuplicateCampaignError(
                f"a campaign named {name!r} already exists in {self.path}; load it "
                "with ppbo.Optimizer.load(storage, name) or choose another name"
            ) from None
        return Campaign(int(campaign_id), name, loads(text), created)

    def get_campaign(self, name: str) -> Campaign | None:
        rows = self._query(
            "SELECT id, name, config, created FROM campaigns WHERE name = ?", (name,)
        )
        if not rows:
            return None
        cid, name, config, created = rows[0]
        return Campaign(int(cid), name, loads(config), created)

    def list_campaigns(self) -> list[Campaign]:
        rows = self._query(
            "SELECT id, name, config, created FROM campaigns ORDER BY id"
        )
        return [Campaign(int(i), n, loads(c), t) for i, n, c, t in rows]

    def update_config(self, campaign_id: int, config: Mapping[str, Any]) -> None:
        with self._transaction() as cur:
            cur.execute(
                "UPDATE campaigns SET config = ? WHERE id = ?",
                (dumps(dict(config)), campaign_id),
            )

    # -- trials -------------------------------------------------------------------
    def add_trials(
        self,
        campaign_id: int,
        trials: list[dict[str, Any]],
        posterior: tuple[int, bytes] | None = None,
    ) -> list[Trial]:
        now = time.time()
        with self._transaction() as cur:
            (last,) = cur.execute(
                "SELECT COALESCE(MAX(number), -1) FROM trials WHERE campaign_id = ?",
                (campaign_id,),
            ).fetchone()
            numbers = []
            for offset, trial in enumerate(trials):
                state = trial.get("state", TrialState.RUNNING)
                if state not in TrialState.ALL:
                    raise StorageError(f"unknown trial state {state!r}")
                number = int(last) + 1 + offset
                cur.execute(
                    f"INSERT INTO trials (campaign_id, {_TRIAL_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        campaign_id,
                        number,
                        dumps(trial["params"]),
                        state,
                        _finite_or_none(trial.get("value")),
                        trial.get("created", now),
                        trial.get("finished"),
                        trial.get("iteration"),
                        trial.get("task"),
                        trial.get("message"),
                        trial.get("origin", "model"),
                        dumps(trial.get("extra", {})),
                    ),
                )
                numbers.append(number)
            if posterior is not None:
                iteration, blob = posterior
                cur.execute(
                    "INSERT OR REPLACE INTO posteriors "
                    "(campaign_id, iteration, data, created) VALUES (?, ?, ?, ?)",
                    (campaign_id, int(iteration), sqlite3.Binary(blob), now),
                )
            rows = cur.execute(
                f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE campaign_id = ? "
                "AND number >= ? ORDER BY number",
                (campaign_id, int(last) + 1),
            ).fetchall()
        return [_trial(row) for row in rows]

    def finish_trial(
        self,
        campaign_id: int,
        number: int,
        state: str,
        value: float | None = None,
        message: str | None = None,
    ) -> Trial:
        if state not in TrialState.FINISHED:
            raise StorageError(f"cannot finish a trial as {state!r}")
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT state FROM trials WHERE campaign_id = ? AND number = ?",
                (campaign_id, int(number)),
            ).fetchone()
            if row is None:
                raise KeyError(f"trial {number!r} does not exist in this campaign")
            if row[0] != TrialState.RUNNING:
                raise ValueError(
                    f"trial {number} is already {row[0]}; only RUNNING trials can be "
                    "told, failed or abandoned"
                )
            cur.execute(
                "UPDATE trials SET state = ?, value = ?, finished = ?, message = ? "
                "WHERE campaign_id = ? AND number = ?",
                (
                    state,
                    _finite_or_none(value),
                    time.time(),
                    message,
                    campaign_id,
                    int(number),
                ),
            )
            row = cur.execute(
                f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE campaign_id = ? "
                "AND number = ?",
                (campaign_id, int(number)),
            ).fetchone()
        return _trial(row)

    def get_trials(self, campaign_id: int) -> list[Trial]:
        rows = self._query(
            f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE campaign_id = ? "
            "ORDER BY number",
            (campaign_id,),
        )
        return [_trial(row) for row in rows]

    def get_trial(self, campaign_id: int, number: int) -> Trial | None:
        rows = self._query(
            f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE campaign_id = ? AND number = ?",
            (campaign_id, int(number)),
        )
        return _trial(rows[0]) if rows else None

    # -- posteriors ---------------------------------------------------------------
    def latest_posterior(self, campaign_id: int) -> tuple[int, bytes] | None:
        rows = self._query(
            "SELECT iteration, data FROM posteriors WHERE campaign_id = ? "
            "ORDER BY iteration DESC LIMIT 1",
            (campaign_id,),
        )
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def get_posterior(self, campaign_id: int, iteration: int) -> bytes | None:
        rows = self._query(
            "SELECT data FROM posteriors WHERE campaign_id = ? AND iteration = ?",
            (campaign_id, int(iteration)),
        )
        return bytes(rows[0][0]) if rows else None

    # -- pairs --------------------------------------------------------------------
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
        with self._transaction() as cur:
            (last,) = cur.execute(
                "SELECT COALESCE(MAX(number), -1) FROM pairs WHERE campaign_id = ?",
                (campaign_id,),
            ).fetchone()
            number = int(last) + 1
            cur.execute(
                f"INSERT INTO pairs (campaign_id, {_PAIR_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    campaign_id,
                    number,
                    dumps(dict(a)),
                    dumps(dict(b)),
                    None,
                    time.time(),
                    None,
                    int(iteration),
                    origin,
                    dumps(dict(extra or {})),
                ),
            )
            row = cur.execute(
                f"SELECT {_PAIR_COLUMNS} FROM pairs WHERE campaign_id = ? "
                "AND number = ?",
                (campaign_id, number),
            ).fetchone()
        return _pair(row)

    def finish_pair(self, campaign_id: int, number: int, winner: str) -> Pair:
        if winner not in WINNERS:
            raise ValueError(f"winner must be one of {list(WINNERS)}, got {winner!r}")
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT winner FROM pairs WHERE campaign_id = ? AND number = ?",
                (campaign_id, int(number)),
            ).fetchone()
            if row is None:
                raise KeyError(f"pair {number!r} does not exist in this campaign")
            if row[0] is not None:
                raise ValueError(
                    f"pair {number} was already told (winner={row[0]!r}); a pair "
                    "is told once"
                )
            cur.execute(
                "UPDATE pairs SET winner = ?, finished = ? "
                "WHERE campaign_id = ? AND number = ?",
                (winner, time.time(), campaign_id, int(number)),
            )
            row = cur.execute(
                f"SELECT {_PAIR_COLUMNS} FROM pairs WHERE campaign_id = ? "
                "AND number = ?",
                (campaign_id, int(number)),
            ).fetchone()
        return _pair(row)

    def get_pairs(self, campaign_id: int) -> list[Pair]:
        rows = self._query(
            f"SELECT {_PAIR_COLUMNS} FROM pairs WHERE campaign_id = ? ORDER BY number",
            (campaign_id,),
        )
        return [_pair(row) for row in rows]

    # -- concurrency --------------------------------------------------------------
    @contextlib.contextmanager
    def ask_lock(self, campaign_id: int) -> Iterator[None]:
        with self._ask_lock:
            if self._memory or fcntl is None:
                yield
                return
            lock_path = f"{self.path}.lock"
            with open(lock_path, "a+b") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __del__(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
