"""A preference campaign killed by SIGKILL right after a tell resumes exactly."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import ppbo

WORKER = Path(__file__).parent / "_preference_worker.py"
sys.path.insert(0, str(Path(__file__).parent))
import _preference_worker as worker  # noqa: E402


@pytest.mark.slow
def test_sigkill_after_tell_then_resume_asks_the_same_pair(tmp_path):
    db = tmp_path / "prefs.db"
    log = tmp_path / "worker.err"
    command = [sys.executable, str(WORKER), str(db), "taste", "6"]
    with (
        log.open("w") as err,
        subprocess.Popen(
            [*command, "--pause-after-tell", "2"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as process,
    ):
        try:
            for line in process.stdout:
                if line.strip() == "told 2":
                    break
            else:
                raise AssertionError(f"worker ended early: {log.read_text()}")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == -signal.SIGKILL

    # the uninterrupted twin, in this process
    twin = worker.optimizer(None, "twin")
    twin.add_anchor({"x": 0.0}, -0.25)
    for _ in range(3):
        pair = twin.ask()
        twin.tell(pair, worker.answer(pair))
    expected = twin.ask()

    resumed = ppbo.PreferenceOptimizer.load(str(db), "taste")
    told = resumed.get_pairs()
    assert [p.winner is not None for p in told] == [True, True, True]
    assert [(p.a, p.b, p.winner) for p in told] == [
        (p.a, p.b, p.winner) for p in twin.get_pairs()[:3]
    ]
    nxt = resumed.ask()
    assert (nxt.id, nxt.a, nxt.b, nxt.origin) == (
        expected.id,
        expected.a,
        expected.b,
        expected.origin,
    )
