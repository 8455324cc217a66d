"""The SQLite storage: schema, transactions, states, arrays without pickle."""

import sqlite3
import threading

import numpy as np
import pytest

from ppbo.storage import (
    SCHEMA_VERSION,
    DuplicateCampaignError,
    SQLiteStorage,
    StorageError,
    TrialState,
    decode_arrays,
    encode_arrays,
    open_storage,
)


@pytest.fixture
def storage(tmp_path):
    return SQLiteStorage(tmp_path / "campaigns.db")


def test_schema_version_and_wal(storage):
    conn = sqlite3.connect(storage.path)
    try:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert {"campaigns", "trials", "posteriors", "schema_version"} <= tables


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    SQLiteStorage(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="newer than this ppbo"):
        SQLiteStorage(path)


def test_campaigns(storage):
    campaign = storage.create_campaign("a", {"seed": 1, "nested": {"x": [1, 2]}})
    assert storage.get_campaign("a") == campaign
    assert storage.get_campaign("missing") is None
    with pytest.raises(DuplicateCampaignError, match="'a' already exists"):
        storage.create_campaign("a", {})
    storage.create_campaign("b", {})
    assert [c.name for c in storage.list_campaigns()] == ["a", "b"]
    storage.update_config(campaign.id, {"seed": 2})
    assert storage.get_campaign("a").config == {"seed": 2}


def test_trials_are_numbered_and_finished_once(storage):
    cid = storage.create_campaign("a", {}).id
    first = storage.add_trials(cid, [{"params": {"x": 0.1}}, {"params": {"x": 0.2}}])
    assert [t.number for t in first] == [0, 1]
    assert all(t.state == TrialState.RUNNING for t in first)
    (third,) = storage.add_trials(cid, [{"params": {"x": 0.3}}])
    assert third.number == 2
    done = storage.finish_trial(cid, 0, TrialState.COMPLETE, 1.5)
    assert done.state == "COMPLETE" and done.value == 1.5 and done.finished
    with pytest.raises(ValueError, match="trial 0 is already COMPLETE"):
        storage.finish_trial(cid, 0, TrialState.COMPLETE, 2.0)
    with pytest.raises(KeyError, match="trial 7 does not exist"):
        storage.finish_trial(cid, 7, TrialState.FAILED)
    with pytest.raises(StorageError, match="cannot finish a trial as 'RUNNING'"):
        storage.finish_trial(cid, 1, TrialState.RUNNING)
    storage.finish_trial(cid, 1, TrialState.COMPLETE, float("inf"))
    assert storage.get_trial(cid, 1).value == float("inf")
    storage.finish_trial(cid, 2, TrialState.FAILED, float("nan"), "boom")
    failed = storage.get_trial(cid, 2)
    assert failed.value is None and failed.message == "boom"
    assert [t.state for t in storage.get_trials(cid)] == [
        "COMPLETE",
        "COMPLETE",
        "FAILED",
    ]


def test_failed_insert_rolls_back_everything(storage):
    cid = storage.create_campaign("a", {}).id
    bad = [{"params": {"x": 0.1}}, {"params": {"x": float("nan")}}]  # not JSON
    with pytest.raises(ValueError):
        storage.add_trials(cid, bad, posterior=(0, b"data"))
    assert storage.get_trials(cid) == []
    assert storage.latest_posterior(cid) is None


def test_posteriors_are_stored_with_their_ask(storage):
    cid = storage.create_campaign("a", {}).id
    storage.add_trials(cid, [{"params": {"x": 0.1}}], posterior=(0, b"zero"))
    storage.add_trials(cid, [{"params": {"x": 0.2}}], posterior=(1, b"one"))
    assert storage.latest_posterior(cid) == (1, b"one")
    assert storage.get_posterior(cid, 0) == b"zero"
    assert storage.get_posterior(cid, 5) is None


def test_arrays_round_trip_bit_for_bit_without_pickle():
    rng = np.random.default_rng(0)
    arrays = {
        "samples": {"lengthscale": rng.random((4, 3)), "noise": rng.random(4)},
        "meta": {"method": np.array("NUTS"), "num_chains": np.array(2)},
    }
    back = decode_arrays(encode_arrays(arrays))
    np.testing.assert_array_equal(
        back["samples"]["lengthscale"], arrays["samples"]["lengthscale"]
    )
    assert str(back["meta"]["method"]) == "NUTS"
    with pytest.raises(ValueError, match="object array"):
        encode_arrays({"bad": np.array([{"a": 1}], dtype=object)})


def test_concurrent_threads_neither_lose_nor_duplicate(storage):
    cid = storage.create_campaign("a", {}).id

    def work(k):
        for i in range(20):
            (trial,) = storage.add_trials(cid, [{"params": {"k": k, "i": i}}])
            storage.finish_trial(cid, trial.number, TrialState.COMPLETE, float(i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    trials = storage.get_trials(cid)
    assert [t.number for t in trials] == list(range(80))
    assert sorted((t.params["k"], t.params["i"]) for t in trials) == [
        (k, i) for k in range(4) for i in range(20)
    ]
    assert all(t.state == "COMPLETE" for t in trials)


def test_open_storage():
    assert isinstance(open_storage(None), SQLiteStorage)
    with pytest.raises(ValueError, match="storage must be None, a file path"):
        open_storage(3)
