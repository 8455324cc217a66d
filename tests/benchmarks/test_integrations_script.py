"""benchmarks/integrations.py: resumable results and the BoTorch-sampler merge.

No study or Tune run is started here: every requested seed is already in the
results file, so the script only reads, merges and writes.
"""

import importlib.util
import json
import os
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "integrations.py"


@pytest.fixture
def script(monkeypatch):
    # the script points JAX's persistent cache at a folder on import; keep the
    # test process's environment as it was
    for name in (
        "JAX_COMPILATION_CACHE_DIR",
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    ):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    spec = importlib.util.spec_from_file_location("integrations_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tune_entry() -> dict:
    return {
        "budget": 30,
        "concurrency": 2,
        "sequential": [{"seed": 0, "regret": 0.5}, {"seed": 1, "regret": 0.25}],
        "ray_tune": [{"seed": 0, "regret": 0.125}, {"seed": 1, "regret": 0.0625}],
        "seeds": 2,
    }


def test_done_seeds_are_skipped_and_the_peer_lines_merged(script, tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"tune": _tune_entry()}))
    peer = [
        {"sampler": "botorch", "seed": 1, "budget": 30, "regret": 0.5},
        {"sampler": "botorch", "seed": 0, "budget": 30, "regret": 0.1},
        {"sampler": "botorch", "seed": 1, "budget": 30, "regret": 0.2},  # rerun
        {"sampler": "botorch", "seed": 2, "budget": 10, "regret": 9.0},  # other
    ]
    lines = "".join(json.dumps(record) + "\n" for record in peer)
    (tmp_path / "x_optuna_botorch.jsonl").write_text(lines)
    argv = ["--parts", "tune", "optuna", "--seeds", "2", "--optuna-seeds", "0"]
    out = script.main([*argv, "--out", str(tmp_path), "--name", "x"])
    assert out["tune"] == _tune_entry()  # both seeds held: nothing ran
    botorch = out["optuna"]["runs"]["botorch"]
    assert [(r["seed"], r["regret"]) for r in botorch] == [(0, 0.1), (1, 0.2)]
    assert out["optuna"]["median_regret_botorch"] == pytest.approx(0.15)
    assert out["optuna"]["runs"]["ppbo"] == []
    assert "median_regret_ppbo" not in out["optuna"]
    assert len(out["resumed"]) == 1
    assert out["resumed"][0]["config"]["parts"] == ["tune", "optuna"]
    assert json.loads((tmp_path / "x.json").read_text()) == out


def test_a_different_budget_is_refused_and_fresh_starts_over(script, tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"tune": _tune_entry()}))
    argv = ["--parts", "tune", "--out", str(tmp_path), "--name", "x"]
    with pytest.raises(ValueError, match="budget=30.*got budget=20"):
        script.main([*argv, "--budget", "20"])
    fresh = script.main(
        ["--parts", "optuna", "--optuna-seeds", "0", "--fresh", *argv[2:]]
    )
    assert "tune" not in fresh and "resumed" not in fresh
    assert "tune" not in json.loads((tmp_path / "x.json").read_text())


def test_negative_seed_counts_are_refused(script, tmp_path, capsys):
    with pytest.raises(SystemExit):
        script.main(["--first-seed", "-1", "--out", str(tmp_path)])
    assert "--first-seed" in capsys.readouterr().err
