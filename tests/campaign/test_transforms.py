"""The one output standardisation and the model-space dataset."""

import numpy as np
import pytest

from ppbo.campaign.transforms import model_data, standardize, standardize_outputs


def test_standardisation_matches_the_textbook_formula_and_maps_back():
    y = np.array([3.0, -1.0, 2.5, 7.0])
    for maximize, sign in ((True, 1.0), (False, -1.0)):
        out = standardize_outputs(y, maximize)
        expected = (sign * y - np.mean(sign * y)) / np.std(sign * y)
        np.testing.assert_allclose(out.y, expected, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(sign * (out.shift + out.scale * out.y), y)
        np.testing.assert_array_equal(standardize(y, maximize), out.y)


def test_infinite_huge_and_constant_values():
    out = standardize_outputs([1.0, np.inf, 3.0, -np.inf], maximize=True)
    np.testing.assert_allclose(out.y, standardize_outputs([1.0, 3.0, 3.0, 1.0]).y)
    huge = standardize_outputs([1e308, -1e308], maximize=True)
    np.testing.assert_allclose(huge.y, [1.0, -1.0])
    assert np.isfinite(huge.scale)
    const = standardize_outputs([2.0, 2.0, 2.0])
    np.testing.assert_array_equal(const.y, 0.0)
    with pytest.raises(ValueError, match="finite value"):
        standardize_outputs([np.nan, np.inf])


def test_unscaled_outputs_are_only_signed():
    out = standardize_outputs([1.0, 4.0], maximize=False, scale=False)
    np.testing.assert_array_equal(out.y, [-1.0, -4.0])
    assert (out.shift, out.scale) == (0.0, 1.0)


def test_model_data_is_padded_to_a_campaign_bucket():
    X = np.random.default_rng(0).random((40, 3))
    data, out = model_data(X, X[:, 0], maximize=True)
    assert data.n == 40 and data.capacity == 40
    small, _ = model_data(X[:3], X[:3, 0])
    assert small.capacity == 32
    np.testing.assert_array_equal(np.asarray(data.unpadded()[1]), out.y)
