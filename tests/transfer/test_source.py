"""Sources: validation against the target's space, JSON and files, model space.

References: hand-written expected messages (each names the source and the field)
and the per-task standardisation computed with numpy.
"""

import json

import numpy as np
import pytest

import ppbo
from ppbo.transfer import (
    Source,
    read_source,
    source_arrays,
    sources_from_json,
    sources_to_json,
    validate_sources,
)

SPACE = ppbo.Space({"x": ppbo.Real(0.0, 2.0), "n": ppbo.Integer(1, 5)})


def test_bad_sources_are_refused_naming_the_source_and_the_field():
    cases = [
        (
            Source("wide", np.zeros((2, 3)), [1.0, 2.0]),
            r"source 'wide': X has shape \(2, 3\); the space has 2 parameters",
        ),
        (
            Source("names", [{"x": 1.0, "m": 2}], [1.0]),
            r"source 'names': X\[0\]: unknown parameter 'm'",
        ),
        (
            Source("missing", [{"x": 1.0}], [1.0]),
            r"source 'missing': X\[0\]: missing parameter 'n'",
        ),
        (
            Source("bounds", [{"x": 1.0, "n": 2}, {"x": 2.5, "n": 2}], [1.0, 2.0]),
            r"source 'bounds': X\[1\]: parameter 'x' = 2.5 is outside its bounds",
        ),
        (
            Source("infx", np.array([[1.0, 2.0], [np.inf, 2.0]]), [1.0, 2.0]),
            r"source 'infx': X\[1, 0\] \(parameter 'x'\) = .*inf.* is not finite",
        ),
    ]
    for source, message in cases:
        with pytest.raises(ValueError, match=message):
            validate_sources([source], SPACE)
    with pytest.raises(ValueError, match=r"source 'nan': y\[1\] = .*nan.* not finite"):
        Source("nan", [{"x": 1.0, "n": 1}] * 2, [1.0, np.nan])
    with pytest.raises(ValueError, match=r"source 'inf': y\[0\] = .*inf.* not finite"):
        Source("inf", [{"x": 1.0, "n": 1}], [np.inf])
    with pytest.raises(ValueError, match="source 'empty': y is empty"):
        Source("empty", [], [])
    with pytest.raises(ValueError, match="source 'short': X has 1 points but y has 2"):
        Source("short", [{"x": 1.0, "n": 1}], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"source 'm': meta_features\[0\]"):
        Source("m", [{"x": 1.0, "n": 1}], [1.0], meta_features=[np.nan])
    with pytest.raises(ValueError, match="source name must be a non-empty str"):
        Source("", [{"x": 1.0, "n": 1}], [1.0])
    a = Source("a", [{"x": 1.0, "n": 1}], [1.0])
    with pytest.raises(ValueError, match="duplicate source name 'a'"):
        validate_sources([a, a], SPACE)
    b = Source("b", [{"x": 1.0, "n": 1}], [1.0], meta_features=[1.0])
    with pytest.raises(ValueError, match="source 'a': meta_features missing"):
        validate_sources([b, a], SPACE)
    with pytest.raises(ValueError, match=r"sources\[0\] must be a ppbo.Source"):
        validate_sources([(1, 2)], SPACE)


def test_arrays_and_dicts_give_the_same_source_and_json_round_trips():
    X = np.array([[0.5, 1.0], [1.5, 5.0]])
    as_array = validate_sources([Source("a", X, [3.0, 1.0])], SPACE)[0]
    as_dicts = Source("a", [{"x": 0.5, "n": 1}, {"x": 1.5, "n": 5}], [3.0, 1.0])
    assert as_array.X == as_dicts.params(SPACE)
    stored = json.loads(json.dumps(sources_to_json([as_array], SPACE)))
    (back,) = sources_from_json(stored)
    assert back.X == as_array.X and back.y.tolist() == [3.0, 1.0]


def test_model_space_rows_are_standardised_per_source_and_signed():
    s0 = Source(
        "a",
        [{"x": 0.0, "n": 1}, {"x": 2.0, "n": 5}, {"x": 1.0, "n": 3}],
        [1.0, 3.0, 8.0],
    )
    s1 = Source("b", [{"x": 1.0, "n": 1}, {"x": 0.5, "n": 2}], [100.0, 300.0])
    sources = validate_sources([s0, s1], SPACE)
    for maximize in (False, True):
        X, y, ids = source_arrays(sources, SPACE, maximize)
        assert ids.tolist() == [0, 0, 0, 1, 1]
        np.testing.assert_allclose(X[:3], [[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]])
        sign = 1.0 if maximize else -1.0
        for k, source in enumerate(sources):
            v = sign * source.y
            np.testing.assert_allclose(y[ids == k], (v - v.mean()) / v.std())


def test_csv_and_json_files(tmp_path):
    (tmp_path / "lab.csv").write_text("n,x,value\n1,0.5,2.0\n3,1.5,-1.0\n")
    (source,) = read_source(tmp_path / "lab.csv", SPACE)
    assert source.name == "lab" and source.X == [{"x": 0.5, "n": 1}, {"x": 1.5, "n": 3}]
    assert source.y.tolist() == [2.0, -1.0]
    payload = [
        {"name": "one", "params": [{"x": 0.1, "n": 2}], "values": [1.0]},
        {"params": [{"x": 0.2, "n": 2}], "values": [2.0], "meta_features": [1.0]},
    ]
    (tmp_path / "two.json").write_text(json.dumps(payload[0]))
    assert read_source(tmp_path / "two.json", SPACE)[0].name == "one"
    (tmp_path / "many.json").write_text(json.dumps(payload[1:]))
    assert read_source(tmp_path / "many.json", SPACE)[0].name == "many"
    (tmp_path / "bad.csv").write_text("x,value\n0.5,1.0\n")
    with pytest.raises(
        ValueError, match=r"source 'bad' \(bad.csv\): missing column 'n'"
    ):
        read_source(tmp_path / "bad.csv", SPACE)
    (tmp_path / "nan.csv").write_text("x,n,value\n0.5,1,abc\n")
    with pytest.raises(
        ValueError, match="row 0, column 'value': 'abc' is not a number"
    ):
        read_source(tmp_path / "nan.csv", SPACE)
    (tmp_path / "out.csv").write_text("x,n,value\n9.0,1,1.0\n")
    with pytest.raises(ValueError, match=r"source 'out': X\[0\]: parameter 'x' = 9.0"):
        read_source(tmp_path / "out.csv", SPACE)
    with pytest.raises(ValueError, match="must end in .csv or .json"):
        (tmp_path / "a.txt").write_text("")
        read_source(tmp_path / "a.txt", SPACE)
