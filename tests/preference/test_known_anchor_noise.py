"""Anchors with a measured noise variance (``anchor_noise="known"``).

References: the anchors' standardised values computed by hand (an anchor measured
almost without noise is interpolated by the latent posterior, one measured with
a huge variance is not), the stored records, and clear errors.
"""

import numpy as np
import pytest

import ppbo
from tests.preference._preference_helpers import FAST, SPACE

ANCHORS = [({"x": -1.5}, 4.0), ({"x": 0.0}, 1.0), ({"x": 1.2}, 2.5)]


def _campaign(noise, storage=None, name=None):
    opt = ppbo.PreferenceOptimizer(
        SPACE,
        seed=1,
        n_initial=2,
        num_samples=8,
        optimizer_options=FAST,
        anchor_noise="known",
        direction="minimize",
        storage=storage,
        name=name,
    )
    for (params, value), v in zip(ANCHORS, noise, strict=True):
        opt.add_anchor(params, value, noise=v)
    return opt


def _standardised():
    # minimisation: the model sees -value, standardised over the anchors
    values = -np.array([value for _, value in ANCHORS])
    return (values - values.mean()) / values.std(), values.std()


def _mean_at_anchors(opt):
    posterior = opt.fit()
    X = np.array([[(p["x"] + 2.0) / 4.0] for p, _ in ANCHORS])
    return np.asarray(posterior.predict_marginal(X)[0])


def test_a_nearly_exact_anchor_is_interpolated_and_a_vague_one_is_not():
    target, scale = _standardised()
    # the middle anchor measured with a variance of 1e-8 (objective units)
    mean = _mean_at_anchors(_campaign([1.0, 1e-8, 1.0]))
    assert abs(mean[1] - target[1]) < 1e-3
    # measured with a variance 1e6 times the values' spread: the latent mean
    # there is far from the measured value, pulled to the other anchors' GP
    vague = _mean_at_anchors(_campaign([1e-8, 1e6 * scale**2, 1e-8]))
    assert abs(vague[0] - target[0]) < 1e-3 and abs(vague[2] - target[2]) < 1e-3
    assert abs(vague[1] - target[1]) > 0.1


def test_the_variance_is_stored_and_shown_after_a_reload(tmp_path):
    path = str(tmp_path / "p.db")
    _campaign([0.5, 0.25, 2.0], storage=path, name="known")
    opt = ppbo.PreferenceOptimizer.load(path, "known")
    assert [a.noise for a in opt.get_anchors()] == [0.5, 0.25, 2.0]
    assert opt.config["anchor_noise"] == "known"


def test_noise_is_required_exactly_where_the_campaign_uses_it():
    known = ppbo.PreferenceOptimizer(SPACE, anchor_noise="known")
    with pytest.raises(ValueError, match="anchor_noise='known'.*noise=..."):
        known.add_anchor({"x": 0.0}, 1.0)
    for bad in (float("nan"), -1.0, 0.0, True, "big", [1.0]):
        with pytest.raises(ValueError, match="noise must be a finite number > 0"):
            known.add_anchor({"x": 0.0}, 1.0, noise=bad)
    plain = ppbo.PreferenceOptimizer(SPACE)
    with pytest.raises(ValueError, match="noise=0.1 given.*'homoscedastic'"):
        plain.add_anchor({"x": 0.0}, 1.0, noise=0.1)
    assert known.get_anchors() == [] and plain.get_anchors() == []
