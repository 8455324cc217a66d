"""The memory-map guard that ppbo.fit runs before every fit."""

import jax
import numpy as np

import ppbo
from ppbo import _memory
from ppbo.models import gp


def test_counts_are_read_from_proc_where_it_exists():
    count, limit = _memory.memory_map_count(), _memory.memory_map_limit()
    if _memory._MAPS.exists():
        with open(_memory._MAPS) as maps:
            lines = len(maps.readlines())
        # the count is this process's map count, which moves only a little
        # between two reads
        assert abs(count - lines) < 0.05 * lines
    else:
        assert count is None
    assert limit is None or limit > 0


def test_clears_only_when_crowded(monkeypatch):
    cleared = []
    monkeypatch.setattr(_memory.jax, "clear_caches", lambda: cleared.append(1))
    monkeypatch.setattr(_memory, "memory_map_limit", lambda: 1000)
    monkeypatch.setattr(_memory, "memory_map_count", lambda: 500)
    assert not _memory.release_compiled_code_if_crowded()
    monkeypatch.setattr(_memory, "memory_map_count", lambda: 501)
    assert _memory.release_compiled_code_if_crowded()
    assert _memory.release_compiled_code_if_crowded(fraction=0.4)
    assert not _memory.release_compiled_code_if_crowded(fraction=0.6)
    monkeypatch.setattr(_memory, "memory_map_limit", lambda: None)
    assert not _memory.release_compiled_code_if_crowded()
    assert len(cleared) == 2


def test_fit_clears_a_crowded_process_and_still_fits(monkeypatch):
    cleared = []
    real = _memory.jax.clear_caches

    def clear():
        cleared.append(1)
        real()

    monkeypatch.setattr(_memory.jax, "clear_caches", clear)
    monkeypatch.setattr(_memory, "memory_map_limit", lambda: 10)
    monkeypatch.setattr(_memory, "memory_map_count", lambda: 6)
    X = np.linspace(0.0, 1.0, 6)[:, None]
    data = ppbo.Dataset(X, np.sin(4 * X[:, 0]))
    posterior = ppbo.fit(gp.surrogate(), data, ppbo.MAP(), jax.random.key(0))
    assert cleared == [1]
    assert np.isfinite(np.asarray(posterior.predict_marginal(X)[0])).all()
