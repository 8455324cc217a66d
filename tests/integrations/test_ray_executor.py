"""ppbo.benchmarks.run with executor="ray": the same runs as the local executor."""

import json

import pytest

from ppbo import benchmarks

pytest.importorskip("ray", reason="the ray extra is not installed")

# Starting Ray forks helper processes from this multithreaded (JAX) process; JAX
# warns at every fork, and the warning surfaces as an unraisable exception.
pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function _at_fork"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]

_TIMES = ("suggest_seconds", "recommend_seconds")


def _comparable(run: dict) -> str:
    # NaN != NaN, so compare the JSON text; wall-clock seconds always differ
    return json.dumps({k: v for k, v in run.items() if k not in _TIMES})


def test_bad_executor_names_the_value():
    with pytest.raises(ValueError, match="'dask'"):
        benchmarks.run(
            {"r": benchmarks.random_search}, ["branin"], [0], 3, executor="dask"
        )
    with pytest.raises(ValueError, match="map_fn"):
        benchmarks.run(
            {"r": benchmarks.random_search},
            ["branin"],
            [0],
            3,
            executor="ray",
            map_fn=map,
        )


@pytest.mark.slow
def test_ray_executor_gives_the_local_runs(ray_cluster):
    methods = {
        "random": benchmarks.random_search,
        "campaign": benchmarks.Campaign(
            {
                "inference": "map",
                "n_initial": 3,
                "optimizer_options": {"num_raw": 64, "num_restarts": 2},
            },
            recommend_at=(4,),
        ),
    }
    args = (methods, ["branin"], [0], 4)
    remote = benchmarks.run(*args, executor="ray")
    local = benchmarks.run(*args)
    assert remote["config"]["executor"] == "ray"
    assert [r["method"] for r in remote["runs"]] == ["random", "campaign"]
    assert list(map(_comparable, remote["runs"])) == list(
        map(_comparable, local["runs"])
    )
    assert remote["summary"] == local["summary"]
