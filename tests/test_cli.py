"""The ppbo command end to end (subprocesses): run, show, resume, create, ask, tell."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

SPACE = json.dumps(
    {
        "x": {"type": "real", "low": 0.0, "high": 1.0},
        "k": {"type": "categorical", "choices": ["a", "b"]},
    }
)


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    cache = tmp_path_factory.mktemp("jax-cache")
    env = dict(os.environ, PPBO_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")

    def call(*args, stdin=None, expect=0):
        result = subprocess.run(
            [sys.executable, "-m", "ppbo.cli", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert result.returncode == expect, result.stderr[-3000:]
        return result

    return call


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("runs") / "campaigns.db")


def test_run_show_resume(cli, db, tmp_path_factory):
    small = ["--samples", "16", "--n-initial", "3", "--storage", db, "--quiet"]
    result = cli("run", "branin", "--budget", "5", "--name", "b", *small)
    out = result.stdout
    assert "campaign 'b': 5 trials" in out and "regret of the best point" in out
    assert "Warning" not in result.stderr, result.stderr  # no third-party chatter
    folder = os.path.dirname(db)
    assert os.path.exists(os.path.join(folder, "b-convergence.png"))
    assert os.path.exists(os.path.join(folder, "b-posterior.nc"))
    shown = json.loads(cli("show", "b", "--storage", db, "--json").stdout)
    assert [t["state"] for t in shown] == ["COMPLETE"] * 5
    table = cli("show", "b", "--storage", db).stdout
    assert "params_x1" in table and "best: trial" in table
    listing = cli("show", "--storage", db).stdout
    assert "b" in listing.split()
    cli("resume", "b", "--budget", "7", "--storage", db, "--quiet")
    shown = json.loads(cli("show", "b", "--storage", db, "--json").stdout)
    assert len(shown) == 7 and shown[5]["origin"] == "model"
    # a name that exists is not overwritten
    error = cli("run", "branin", "--name", "b", "--storage", db, expect=2).stderr
    assert "already exists" in error and "ppbo resume b" in error


def test_ask_tell_with_json(cli, db):
    cli(
        "create",
        "ext",
        "--space",
        SPACE,
        "--inference",
        "map",
        "--n-initial",
        "2",
        "--storage",
        db,
    )
    first = json.loads(cli("ask", "ext", "--storage", db).stdout)
    assert first["trial"] == 0 and set(first["params"]) == {"x", "k"}
    told = json.loads(
        cli("tell", "ext", "--trial", "0", "--value", "1.5", "--storage", db).stdout
    )
    assert told["state"] == "COMPLETE" and told["value"] == 1.5
    batch = json.loads(cli("ask", "ext", "--n", "2", "--storage", db).stdout)
    assert [t["trial"] for t in batch] == [1, 2]
    message = json.dumps(
        [
            {"trial": 1, "value": 0.5},
            {"trial": 2, "failed": True, "message": "instrument fault"},
            {"params": {"x": 0.25, "k": "b"}, "value": 0.75},
        ]
    )
    told = json.loads(
        cli("tell", "ext", "--json", "-", "--storage", db, stdin=message).stdout
    )
    assert [t["state"] for t in told] == ["COMPLETE", "FAILED", "COMPLETE"]
    model = json.loads(cli("ask", "ext", "--storage", db).stdout)
    assert model["trial"] == 4
    # re-ask: a RUNNING trial can be fetched again (e.g. by a restarted worker)
    again = json.loads(cli("ask", "ext", "--running", "--storage", db).stdout)
    assert again == [model]
    abandoned = cli("tell", "ext", "--trial", "4", "--abandon", "--storage", db)
    assert json.loads(abandoned.stdout)["state"] == "ABANDONED"
    shown = json.loads(cli("show", "ext", "--storage", db, "--json").stdout)
    assert [t["state"] for t in shown] == [
        "COMPLETE",
        "COMPLETE",
        "FAILED",
        "COMPLETE",
        "ABANDONED",
    ]


@pytest.mark.parametrize(
    "args, stdin, message",
    [
        (["tell", "ext", "--trial", "99", "--value", "1"], None, "trial 99 does not"),
        (["tell", "ext", "--trial", "0", "--value", "2"], None, "already COMPLETE"),
        (
            ["tell", "ext", "--json", "-"],
            '{"params": {"x": 5.0, "k": "a"}, "value": 1}',
            "parameter 'x' = 5.0 is outside its bounds",
        ),
        (
            ["tell", "ext", "--json", "-"],
            '{"params": {"x": 0.5}, "value": 1}',
            "missing parameter 'k'",
        ),
        (["tell", "ext", "--json", "-"], "{not json", "not valid JSON"),
        (["tell", "ext", "--json", "-"], '{"trial": 0, "colour": 1}', "'colour'"),
        (["show", "nothing"], None, "no campaign named 'nothing'"),
        (["run", "nosuch"], None, "PROBLEM must be one of"),
        (["run", "branin", "--budget", "0"], None, "--budget must be >= 1"),
        (["run", "branin", "--inference", "hmc"], None, "--inference must be"),
        (
            [
                "create",
                "bad",
                "--space",
                '{"x": {"type": "real", "low": 1, "high": 0}}',
            ],
            None,
            "low < high",
        ),
    ],
)
def test_bad_input_is_named(cli, db, args, stdin, message):
    error = cli(*args, "--storage", db, stdin=stdin, expect=2).stderr
    assert message in error


def _one_line(stderr):
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_creating_an_existing_campaign_is_a_one_line_error(cli, tmp_path):
    db = str(tmp_path / "c.db")
    cli("create", "twice", "--space", SPACE, "--storage", db)
    error = cli("create", "twice", "--space", SPACE, "--storage", db, expect=2)
    line = _one_line(error.stderr)
    assert line.startswith("ppbo create: error: NAME 'twice' already exists")
    assert db in line


@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["show", "any"],
        ["ask", "any"],
        ["tell", "any", "--trial", "0", "--value", "1"],
        ["resume", "any"],
        ["create", "any", "--space", SPACE],
        ["run", "branin", "--budget", "3"],
    ],
)
def test_a_file_that_is_not_a_ppbo_database_is_named(cli, tmp_path, args):
    text = tmp_path / "notes.txt"
    text.write_text("these are my lab notes, not a database\n" * 200)
    error = cli(*args, "--storage", str(text), expect=2)
    line = _one_line(error.stderr)
    assert f"storage {str(text)!r} is not a ppbo database" in line
    assert line.startswith(f"ppbo {args[0]}: error:")
    assert "notes" in text.read_text()  # left as it was


@pytest.mark.parametrize(
    "args, message",
    [
        (["ask"], "the following arguments are required: name"),
        (["ask", "any", "--n", "two"], "argument --n: invalid int value: 'two'"),
        (["create", "m", "--space", SPACE, "--model", "{bad"], "not valid JSON"),
    ],
)
def test_command_line_syntax_errors_are_one_line(cli, tmp_path, args, message):
    error = cli(*args, "--storage", str(tmp_path / "x.db"), expect=2)
    assert message in _one_line(error.stderr)


def test_multi_task_ask_and_tell(cli, tmp_path):
    db = str(tmp_path / "mt.db")
    model = '{"name": "multitask_gp", "num_tasks": 2}'
    cli(
        "create",
        "mt",
        "--space",
        '{"x": {"type": "real", "low": 0, "high": 1}}',
        "--model",
        model,
        "--n-initial",
        "0",
        "--storage",
        db,
    )
    points = [(0.1, 0, 0.5), (0.6, 0, 0.1), (0.9, 0, 0.7), (0.3, 1, 0.2), (0.8, 1, 0.4)]
    for x, task, value in points:
        record = json.dumps({"params": {"x": x}, "value": value, "task": task})
        told = json.loads(cli("tell", "mt", "--json", record, "--storage", db).stdout)
        assert told["task"] == task
    asked = json.loads(cli("ask", "mt", "--task", "1", "--storage", db).stdout)
    assert asked["task"] == 1
    error = cli(
        "tell",
        "mt",
        "--trial",
        str(asked["trial"]),
        "--value",
        "0.3",
        "--task",
        "0",
        "--storage",
        db,
        expect=2,
    ).stderr
    # (after the warning about the RUNNING trial)
    assert "Traceback" not in error
    assert error.splitlines()[-1] == (
        "ppbo tell: error: trial 5 was asked for task 1, told task=0"
    )
    told = cli(
        "tell",
        "mt",
        "--trial",
        str(asked["trial"]),
        "--value",
        "0.3",
        "--task",
        "1",
        "--storage",
        db,
    ).stdout
    assert json.loads(told)["state"] == "COMPLETE"
    error = cli("ask", "mt", "--task", "5", "--storage", db, expect=2).stderr
    assert "--task: task must be an integer in [0, 2), got 5" in _one_line(error)
