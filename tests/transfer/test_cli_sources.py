"""``ppbo create --source FILE`` (CSV and JSON) and ``ppbo show`` with sources.

In-process calls of :func:`ppbo.cli.main`; references: the files' own contents.
"""

import json

import pytest

from ppbo.cli import main

SPACE = json.dumps({"x": {"type": "real", "low": 0.0, "high": 1.0}})


@pytest.fixture(autouse=True)
def _no_persistent_cache(monkeypatch):
    # in-process calls must not point this test process's JAX cache elsewhere
    monkeypatch.setattr("ppbo.cli.enable_compilation_cache", lambda *args: None)


def test_create_with_csv_and_json_sources_and_show(tmp_path, capsys):
    (tmp_path / "lab.csv").write_text("x,value\n0.1,1.0\n0.5,0.2\n0.9,0.7\n")
    (tmp_path / "old.json").write_text(
        json.dumps(
            {"name": "old", "params": [{"x": 0.3}, {"x": 0.6}], "values": [2, 1]}
        )
    )
    db = str(tmp_path / "c.db")
    args = [
        "create",
        "tl",
        "--space",
        SPACE,
        "--storage",
        db,
        "--model",
        "multitask_gp",
    ]
    sources = [
        "--source",
        str(tmp_path / "lab.csv"),
        "--source",
        str(tmp_path / "old.json"),
    ]
    assert main(args + sources) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "tl", "storage": db}
    assert main(["show", "--storage", db, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["sources"] == 2
    assert main(["show", "tl", "--storage", db]) == 0
    assert "sources: lab (3 points), old (2 points)" in capsys.readouterr().out
    # the plain GP keeps the sources but warns that it does not use them
    assert main(["create", "plain", "--space", SPACE, "--storage", db] + sources) == 0
    assert "does not use source tasks" in capsys.readouterr().err


def test_a_bad_source_file_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "bad.csv").write_text("x,value\n1.5,1.0\n")
    db = str(tmp_path / "c.db")
    code = main(
        [
            "create",
            "tl",
            "--space",
            SPACE,
            "--storage",
            db,
            "--source",
            str(tmp_path / "bad.csv"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "source 'bad': X[0]: parameter 'x' = 1.5 is outside its bounds" in err


def test_create_with_the_sources_design_asks_their_best_points(tmp_path, capsys):
    (tmp_path / "lab.csv").write_text("x,value\n0.1,1.0\n0.5,0.2\n0.9,0.7\n")
    (tmp_path / "old.json").write_text(
        json.dumps(
            {"name": "old", "params": [{"x": 0.3}, {"x": 0.6}], "values": [2, 1]}
        )
    )
    db = str(tmp_path / "c.db")
    create = ["create", "warm", "--space", SPACE, "--storage", db]
    create += ["--model", "multitask_gp", "--initial-design", "sources"]
    create += ["--n-initial", "3", "--source", str(tmp_path / "lab.csv")]
    create += ["--source", str(tmp_path / "old.json")]
    assert main(create) == 0
    capsys.readouterr()
    assert main(["ask", "warm", "--storage", db, "--n", "3"]) == 0
    asked = json.loads(capsys.readouterr().out)
    # each source's smallest value in turn (minimisation): lab 0.5, old 0.6,
    # then lab's second best 0.9
    assert [trial["params"]["x"] for trial in asked] == [0.5, 0.6, 0.9]
    # without sources the design is refused, naming it
    cold = ["create", "cold", "--space", SPACE, "--storage", db]
    assert main(cold + ["--initial-design", "sources"]) == 2
    assert "initial_design='sources'" in capsys.readouterr().err


def test_a_preference_campaign_refuses_a_design_it_would_not_use(tmp_path, capsys):
    db = str(tmp_path / "p.db")
    create = ["create", "p", "--space", SPACE, "--storage", db, "--preference"]
    assert main(create + ["--initial-design", "sobol"]) == 2
    assert "--initial-design is not for preference campaigns" in capsys.readouterr().err


@pytest.mark.parametrize("selection, stored", [([], "bandit"), (["all"], None)])
def test_create_a_diff_gp_campaign_with_or_without_the_bandit(
    tmp_path, capsys, selection, stored
):
    from ppbo import Optimizer

    for name, values in (("a", [2, 1]), ("b", [0, 3])):
        path = tmp_path / f"{name}.json"
        params = [{"x": 0.3}, {"x": 0.6}]
        path.write_text(json.dumps({"name": name, "params": params, "values": values}))
    db = str(tmp_path / "d.db")
    args = ["create", "dg", "--space", SPACE, "--storage", db, "--model", "diff_gp"]
    args += ["--source", str(tmp_path / "a.json"), "--source", str(tmp_path / "b.json")]
    args += ["--source-selection", *selection] if selection else []
    assert main(args) == 0
    capsys.readouterr()
    config = Optimizer.load(db, "dg").config
    assert config["transfer"]["source_selection"] == stored
    assert main(["show", "dg", "--storage", db]) == 0
    shown = capsys.readouterr().out
    assert "sources: a (2 points), b (2 points)" in shown
    assert ("one per ask, by the bandit (gamma 0.5)" in shown) == (stored == "bandit")
