"""``ppbo create --preference``, ``ask`` (pairs as JSON), ``tell --pair/--winner``,
``tell --anchor-json`` and ``show``, in process through ``ppbo.cli.main``."""

import json

import pytest

from ppbo import cli

SPACE = json.dumps({"x": {"type": "real", "low": -2.0, "high": 2.0}})


@pytest.fixture
def run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "enable_compilation_cache", lambda *a, **k: None)
    db = str(tmp_path / "prefs.db")

    def call(*args, expect=0):
        code = cli.main([*args, "--storage", db])
        out, err = capsys.readouterr()
        assert code == expect, err
        return out, err

    return call


def _one_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_pairs_round_trip(run):
    out, _ = run(
        "create",
        "taste",
        "--space",
        SPACE,
        "--preference",
        "--n-initial",
        "3",
        "--samples",
        "8",
    )
    assert json.loads(out) == {"name": "taste", "storage": json.loads(out)["storage"]}
    for expected in range(3):
        pair = json.loads(run("ask", "taste")[0])
        assert pair["id"] == expected and pair["state"] == "RUNNING"
        assert set(pair["a"]) == set(pair["b"]) == {"x"}
        winner = "a" if abs(pair["a"]["x"] - 0.5) < abs(pair["b"]["x"] - 0.5) else "b"
        told = json.loads(
            run("tell", "taste", "--pair", str(pair["id"]), "--winner", winner)[0]
        )
        assert (told["id"], told["winner"], told["state"]) == (
            expected,
            winner,
            "COMPLETE",
        )
    assert pair["origin"] == "design"  # model-based asks: test_campaign.py
    anchor = json.loads(
        run("tell", "taste", "--anchor-json", '{"params": {"x": 0.5}, "value": 1.0}')[0]
    )
    assert anchor["params"] == {"x": 0.5} and anchor["active"]
    shown = json.loads(run("show", "taste", "--json")[0])
    assert [p["id"] for p in shown["pairs"]] == [0, 1, 2]
    assert shown["anchors"][0]["value"] == 1.0
    text = run("show", "taste")[0]
    assert "3 pairs, 1 anchors" in text and "pair    2" in text
    running = run("ask", "taste")[0]
    assert json.loads(run("ask", "taste", "--running")[0]) == [json.loads(running)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pair", "0", "--winner", "c"), "--winner must be a, b, tie or skip"),
        (("--pair", "7", "--winner", "a"), "--pair 7 does not exist"),
        (("--winner", "a"), "--pair is required"),
        (("--pair", "0"), "--winner is required"),
        (
            ("--anchor-json", '{"params": {"x": 0.1}, "value": "nan"}'),
            "--anchor-json: anchor value must be finite",
        ),
        (("--anchor-json", '{"params": {"x": 0.1}}'), "--anchor-json must be an"),
        (
            ("--anchor-json", '{"params": {"y": 0.1}, "value": 1}'),
            "--anchor-json: ",
        ),
        (("--trial", "0", "--value", "1.0"), "--trial is for ordinary campaigns"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(run, args, message):
    run("create", "taste", "--space", SPACE, "--preference")
    pair = json.loads(run("ask", "taste")[0])
    assert pair["id"] == 0
    _, err = run("tell", "taste", *args, expect=2)
    assert message in _one_line(err)


def test_telling_a_pair_twice_is_an_error(run):
    run("create", "taste", "--space", SPACE, "--preference")
    run("ask", "taste")
    run("tell", "taste", "--pair", "0", "--winner", "tie")
    _, err = run("tell", "taste", "--pair", "0", "--winner", "skip", expect=2)
    assert "already told" in _one_line(err)


def test_pair_options_on_an_ordinary_campaign_are_refused(run):
    run("create", "plain", "--space", SPACE)
    _, err = run("tell", "plain", "--pair", "0", "--winner", "a", expect=2)
    assert "--pair, --winner and --anchor-json are for preference" in _one_line(err)


def test_campaign_list_includes_preference_campaigns(run):
    run("create", "taste", "--space", SPACE, "--preference")
    run("create", "plain", "--space", SPACE)
    rows = json.loads(run("show", "--json")[0])
    assert [(r["name"], r["acquisition"]) for r in rows] == [
        ("taste", "eubo"),
        ("plain", "log_ei"),
    ]


@pytest.mark.parametrize(
    ("flags", "stored"),
    [
        (("--drift-strategy", "restart", "--horizon", "4"), {"horizon": 4}),
        (("--drift-strategy", "sliding_window", "--window", "3"), {"window": 3}),
        (("--drift-strategy", "weighted_penalty", "--decay", "0.9"), {"decay": 0.9}),
    ],
)
def test_drift_strategy_is_stored_with_the_campaign(run, tmp_path, flags, stored):
    import ppbo

    run("create", "taste", "--space", SPACE, "--preference", *flags)
    config = ppbo.PreferenceOptimizer.load(str(tmp_path / "prefs.db"), "taste").config
    assert (config["anchor_strategy"], config["strategy_options"]) == (
        flags[1],
        stored,
    )


def test_no_drift_strategy_by_default(run, tmp_path):
    import ppbo

    run("create", "taste", "--space", SPACE, "--preference")
    config = ppbo.PreferenceOptimizer.load(str(tmp_path / "prefs.db"), "taste").config
    assert (config["anchor_strategy"], config["strategy_options"]) == (None, {})


def test_resumed_cli_campaign_asks_with_its_drift_strategy(run):
    """Each CLI call reloads the campaign from storage; the model-based pair it
    asks is the pair of a Python campaign with the same window, and differs from
    the pair asked without one (the expert's optimum moved from 1 to -1)."""
    import ppbo

    run(
        "create",
        "taste",
        "--space",
        SPACE,
        "--preference",
        *("--n-initial", "4", "--samples", "8", "--seed", "3"),
        *("--drift-strategy", "sliding_window", "--window", "2"),
    )
    space = ppbo.Space({"x": ppbo.Real(-2.0, 2.0)})
    common = {"n_initial": 4, "num_samples": 8, "seed": 3}
    window = ppbo.PreferenceOptimizer(
        space,
        anchor_strategy="sliding_window",
        strategy_options={"window": 2},
        **common,
    )
    plain = ppbo.PreferenceOptimizer(space, **common)
    for target in (1.0, 1.0, -1.0, -1.0):
        pair = json.loads(run("ask", "taste")[0])
        near_a = abs(pair["a"]["x"] - target) < abs(pair["b"]["x"] - target)
        winner = "a" if near_a else "b"
        run("tell", "taste", "--pair", str(pair["id"]), "--winner", winner)
        for opt in (window, plain):
            same = opt.ask()
            assert (same.a, same.b) == (pair["a"], pair["b"])
            opt.tell(same, winner)
    asked = json.loads(run("ask", "taste")[0])
    assert asked["origin"] != "design"
    expected = window.ask()
    assert (asked["a"], asked["b"]) == (expected.a, expected.b)
    without = plain.ask()
    assert (asked["a"], asked["b"]) != (without.a, without.b)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--drift-strategy", "forget"),
            "--drift-strategy must be one of restart, sliding_window, "
            "weighted_penalty, got 'forget'",
        ),
        (("--drift-strategy", "restart"), "--drift-strategy restart needs --horizon"),
        (
            ("--drift-strategy", "sliding_window", "--horizon", "3"),
            "--horizon 3 is the option of --drift-strategy restart, got sliding_window",
        ),
        (
            (
                "--window",
                "3",
            ),
            "--window 3 is the option of --drift-strategy sliding_window, got no "
            "--drift-strategy",
        ),
        (
            ("--drift-strategy", "sliding_window", "--window", "0"),
            "--window must be an integer >= 1, got '0'",
        ),
        (
            ("--drift-strategy", "restart", "--horizon", "2.5"),
            "--horizon must be an integer >= 1, got '2.5'",
        ),
        (
            ("--drift-strategy", "weighted_penalty", "--decay", "1.5"),
            "--decay must be a number in (0, 1], got '1.5'",
        ),
        (
            ("--drift-strategy", "weighted_penalty", "--decay", "nan"),
            "--decay must be a number in (0, 1], got 'nan'",
        ),
        (
            ("--drift-strategy", "weighted_penalty", "--decay", "slow"),
            "--decay must be a number in (0, 1], got 'slow'",
        ),
    ],
)
def test_bad_drift_flags_exit_2_naming_the_flag_and_value(run, flags, message):
    _, err = run("create", "taste", "--space", SPACE, "--preference", *flags, expect=2)
    assert message in _one_line(err)
    _, err = run("ask", "taste", expect=2)  # nothing was created


def test_drift_flags_on_an_ordinary_campaign_are_refused(run):
    _, err = run(
        "create", "plain", "--space", SPACE, "--drift-strategy", "restart", expect=2
    )
    assert (
        "--drift-strategy is for preference campaigns (add --preference), got "
        "--drift-strategy restart" in _one_line(err)
    )


def test_anchor_evidence_is_stored_and_a_bad_one_is_refused(run, tmp_path):
    import ppbo

    run(
        "create",
        "taste",
        "--space",
        SPACE,
        "--preference",
        "--anchor-evidence",
        "joint",
    )
    config = ppbo.PreferenceOptimizer.load(str(tmp_path / "prefs.db"), "taste").config
    assert config["evidence"] == "joint"
    _, err = run(
        "create",
        "other",
        "--space",
        SPACE,
        "--preference",
        "--anchor-evidence",
        "both",
        expect=2,
    )
    assert "evidence must be one of ['separate', 'joint'], got 'both'" in _one_line(err)


def test_known_anchor_noise_from_the_command_line(run):
    run("create", "lab", "--space", SPACE, "--preference", "--anchor-noise", "known")
    anchor = '{"params": {"x": 0.5}, "value": 1.0, "noise": 0.04}'
    told = json.loads(run("tell", "lab", "--anchor-json", anchor)[0])
    assert told["params"] == {"x": 0.5} and told["active"]
    shown = json.loads(run("show", "lab", "--json")[0])
    assert shown["anchors"][0]["noise"] == 0.04
    # the variance is required by this campaign, and refused by one without it
    _, err = run(
        "tell", "lab", "--anchor-json", '{"params": {"x": 0.1}, "value": 2.0}', expect=2
    )
    assert "anchor_noise='known'" in _one_line(err)
    run("create", "plain", "--space", SPACE, "--preference")
    _, err = run("tell", "plain", "--anchor-json", anchor, expect=2)
    assert "noise=0.04 given" in _one_line(err)
