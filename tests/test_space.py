"""Search spaces: validation errors, unit-cube round trips, JSON round trips."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppbo import Categorical, Integer, Real, Space


def _space():
    return Space(
        {
            "lr": Real(1e-4, 1e-1, log=True),
            "layers": Integer(1, 5),
            "act": Categorical(["relu", "tanh", "gelu"]),
            "x": Real(-2.0, 3.0),
        }
    )


def test_dimensions_and_unit_coordinates():
    space = _space()
    assert space.names == ["lr", "layers", "act", "x"]
    assert space.dim == 1 + 1 + 3 + 1
    u = space.to_unit({"lr": 1e-4, "layers": 5, "act": "tanh", "x": 0.5})
    np.testing.assert_allclose(u, [0.0, 1.0, 0.0, 1.0, 0.0, 0.5])


def test_log_scale_is_linear_in_the_logarithm():
    real = Real(1e-4, 1e-1, log=True)
    # the geometric midpoint of the decades sits at the unit midpoint
    assert real.to_unit(math.sqrt(1e-4 * 1e-1))[0] == pytest.approx(0.5)
    assert real.from_unit(np.array([0.5])) == pytest.approx(math.sqrt(1e-5))


@given(st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
def test_decoded_points_are_valid_and_snap_is_idempotent(u):
    space = _space()
    params = space.from_unit(np.array(u))
    assert space.validate(params) == params
    snapped = space.snap(np.array(u))
    np.testing.assert_allclose(space.snap(snapped), snapped, atol=1e-12)
    assert space.from_unit(snapped)["layers"] == params["layers"]
    assert space.from_unit(snapped)["act"] == params["act"]


@given(st.integers(1, 5), st.sampled_from(["relu", "tanh", "gelu"]))
def test_discrete_values_round_trip_exactly(layers, act):
    space = _space()
    params = {"lr": 1e-2, "layers": layers, "act": act, "x": 0.0}
    back = space.from_unit(space.to_unit(params))
    assert back["layers"] == layers and back["act"] == act
    assert back["lr"] == pytest.approx(1e-2, rel=1e-12)


def test_json_round_trip():
    space = _space()
    assert Space.from_json(space.to_json()) == space
    # the order of the coordinates survives JSON with sorted keys
    reordered = Space({"z": Real(0, 1), "a": Integer(0, 2)})
    text = json.dumps(reordered.to_json(), sort_keys=True)
    assert Space.from_json(json.loads(text)).names == ["z", "a"]


@pytest.mark.parametrize(
    "params, match",
    [
        ({"lr": 1e-2, "layers": 2, "act": "relu"}, "missing parameter 'x'"),
        (
            {"lr": 1e-2, "layers": 2, "act": "relu", "x": 0.0, "y": 1},
            "unknown parameter 'y'",
        ),
        (
            {"lr": 1.0, "layers": 2, "act": "relu", "x": 0.0},
            r"parameter 'lr' = 1.0 is outside its bounds",
        ),
        (
            {"lr": 1e-2, "layers": 2.5, "act": "relu", "x": 0.0},
            "parameter 'layers' must be an integer, got 2.5",
        ),
        (
            {"lr": 1e-2, "layers": 9, "act": "relu", "x": 0.0},
            r"parameter 'layers' = 9 is outside its bounds \[1, 5\]",
        ),
        (
            {"lr": 1e-2, "layers": 2, "act": "elu", "x": 0.0},
            "parameter 'act' = 'elu' is not one of the choices",
        ),
        (
            {"lr": 1e-2, "layers": 2, "act": "relu", "x": float("nan")},
            "parameter 'x' must be finite, got nan",
        ),
        (
            {"lr": 1e-2, "layers": 2, "act": "relu", "x": float("inf")},
            "parameter 'x' must be finite",
        ),
        (
            {"lr": 1e-2, "layers": 2, "act": "relu", "x": "0.5"},
            "parameter 'x' must be a real number",
        ),
        (
            {"lr": 1e-2, "layers": 2, "act": "relu", "x": np.float32(0.5)},
            "parameter 'x' must be float64, got float32",
        ),
        (
            {"lr": 1e-2, "layers": 2, "act": "relu", "x": np.array([0.5, 0.1])},
            r"parameter 'x' must be a scalar, got an array of shape \(2,\)",
        ),
        ([0.1, 2], "params must be a dict"),
    ],
)
def test_bad_parameters_are_named(params, match):
    with pytest.raises(ValueError, match=match):
        _space().validate(params)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Real(1.0, 1.0), "low < high"),
        (lambda: Real(0.0, 1.0, log=True), "log=True.*low > 0"),
        (lambda: Real(0.0, float("inf")), "Real.high must be finite"),
        (lambda: Integer(0.5, 3), "Integer.low must be an integer"),
        (lambda: Categorical(["a"]), "at least 2 choices"),
        (lambda: Categorical(["a", "a"]), "distinct"),
        (lambda: Categorical("ab"), "list of values"),
        (lambda: Space({}), "non-empty mapping"),
        (lambda: Space({"x": (0, 1)}), "dimension 'x' must be Real"),
    ],
)
def test_bad_dimensions_are_named(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_scalar_arrays_are_accepted_as_values():
    space = Space({"x": Real(0.0, 1.0), "n": Integer(0, 3)})
    assert space.validate({"x": np.array(0.25), "n": np.int64(2)}) == {
        "x": 0.25,
        "n": 2,
    }
