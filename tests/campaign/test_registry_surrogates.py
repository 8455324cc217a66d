"""The network and forest surrogates of the registry run campaigns that resume.

Each named surrogate (``"dngo"`` with evidence-set or slice-sampled precisions,
``"ablr"``, ``"forest"``; small settings) runs a
short ``ppbo.Optimizer`` campaign on SQLite storage; a second campaign is
"killed" after an ask, reloaded from storage by name alone (its spec comes back
from the registry) and continued. Reference: the uninterrupted campaign, whose
trials the resumed one must reproduce exactly.
"""

import numpy as np
import pytest

import ppbo
from ppbo.campaign.registry import SURROGATES, resolve_components, resolve_surrogate
from ppbo.storage import SQLiteStorage

FAST = {"num_raw": 64, "num_restarts": 2, "max_iterations": 20}
SPECS = {
    "dngo": {"name": "dngo", "width": 16, "depth": 2, "num_steps": 200},
    "ablr": {"name": "ablr", "width": 16, "depth": 2, "num_steps": 200},
    "forest": {"name": "forest", "num_trees": 8},
    "dngo_slice": {
        "name": "dngo",
        "width": 16,
        "depth": 2,
        "num_steps": 200,
        "precisions": "slice",
    },
}


def objective(params):
    x, y = params["x"], params["y"]
    return float((x - 0.3) ** 2 + (y - 0.6) ** 2 + 0.1 * np.sin(9.0 * x))


def _campaign(
    run, storage, name, spec, acquisition, steps, stop_at=None, inference=None
):
    def make():
        return ppbo.Optimizer(
            {"x": ppbo.Real(0.0, 1.0), "y": ppbo.Real(0.0, 1.0)},
            surrogate=spec,
            inference=inference,
            acquisition=acquisition,
            n_initial=3,
            seed=11,
            storage=storage,
            name=name,
            optimizer_options=FAST,
        )

    def load():
        return ppbo.Optimizer.load(storage, name)

    return run(make, load, lambda trial: objective(trial.params), steps, stop_at)


def test_registry_entries_build_the_model_files_surrogates():
    for name in ("dngo", "ablr", "forest"):
        assert name in SURROGATES
        surrogate, spec = resolve_surrogate(name)
        assert spec["name"] == name and surrogate.trainer is not None
    assert resolve_surrogate("dngo")[0] is resolve_surrogate({"name": "dngo"})[0]
    with pytest.raises(ValueError, match="no option 'hidden'"):
        resolve_surrogate({"name": "dngo", "hidden": [50, 50]})


@pytest.mark.parametrize(
    "name, acquisition",
    [
        ("dngo", "log_ei"),
        ("ablr", "ei"),
        ("forest", "log_ei"),
        ("forest", "thompson"),
        pytest.param("dngo_slice", "log_ei", marks=pytest.mark.slow),
    ],
)
def test_campaign_resumes_with_the_uninterrupted_suggestions(
    tmp_path, name, acquisition, interrupted_campaign
):
    spec, run = SPECS[name], interrupted_campaign
    whole = _campaign(run, SQLiteStorage(tmp_path / "a.db"), "a", spec, acquisition, 7)
    resumed = _campaign(
        run, SQLiteStorage(tmp_path / "b.db"), "b", spec, acquisition, 8, stop_at=5
    )
    assert [t.params for t in whole] == [t.params for t in resumed]
    assert [t.value for t in whole] == [t.value for t in resumed]
    assert [t.origin for t in resumed].count("model") == 4
    assert [t.state for t in resumed] == ["COMPLETE"] * 7
    # the model's suggestions are not the design's: they differ from each other
    model = [tuple(t.params.values()) for t in resumed if t.origin == "model"]
    assert len(set(model)) > 1


def test_a_conditioning_network_surrogate_asks_batches():
    opt = ppbo.Optimizer(
        {"x": ppbo.Real(0.0, 1.0), "y": ppbo.Real(0.0, 1.0)},
        surrogate=SPECS["dngo"],
        n_initial=3,
        seed=2,
        optimizer_options=FAST,
    )
    for trial in opt.ask(3):
        opt.tell(trial, objective(trial.params))
    # a greedy batch conditions the Bayesian last layer on its first point (the
    # forest, without conditioning, refuses: tests/test_trainer.py's message)
    batch = opt.ask(2)
    assert [t.origin for t in batch] == ["model", "model"]
    assert [t.state for t in opt.get_trials()][-2:] == ["RUNNING", "RUNNING"]


def test_list_options_resolve_to_one_cached_surrogate():
    # meta-features arrive as JSON lists (from a spec, or read back from storage)
    spec = {
        "name": "nn_task_gp",
        "num_sources": 2,
        "meta_features": [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]],
    }
    built, stored = resolve_surrogate(spec)
    again, _ = resolve_surrogate(stored)
    assert again is built
    assert stored["meta_features"] == spec["meta_features"]


def test_bnn_is_a_registry_entry_sampled_by_nuts_by_default():
    components, specs = resolve_components("bnn")
    assert specs["surrogate"] == {"name": "bnn", "width": 10, "depth": 1}
    assert type(components["inference"]) is ppbo.NUTS
    assert components["surrogate"].name == "bnn(hidden=[10])"
    assert resolve_surrogate({"name": "bnn", "width": 4, "depth": 2})[0].name == (
        "bnn(hidden=[4, 4])"
    )
    # an explicit inference still wins; the campaign that resumes by the name
    # alone is in tests/models/test_bnn.py
    assert resolve_components("bnn", "slice")[1]["inference"]["name"] == "Slice"
