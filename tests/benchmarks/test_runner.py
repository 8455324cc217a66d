"""Immediate-regret runner: protocol, JSON results, summary statistics and the plot."""

import concurrent.futures
import dataclasses
import importlib.util
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

import ppbo
from ppbo import benchmarks

BUDGET, N_INITIAL, NOISE_VAR = 8, 3, 1e-3
PER_EVALUATION = [
    "x",
    "y",
    "f",
    "recommendation",
    "f_recommendation",
    "regret_recommendation",
    "regret_best_observed",
    "suggest_seconds",
    "recommend_seconds",
]


# a campaign small enough for a unit test: MAP, few raw candidates
TINY = {
    "inference": "map",
    "acquisition": "log_ei",
    "n_initial": 3,
    "optimizer_options": {"num_raw": 32, "num_restarts": 2},
}


def _strip_seconds(run):
    return {k: v for k, v in run.items() if not k.endswith("_seconds")}


def _recommend_optimum(key, problem, X, y):
    return problem.to_unit(problem.optimizers[0])


oracle = benchmarks.Method(benchmarks.random_search.suggest, _recommend_optimum)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("regret")
    result = benchmarks.run(
        {"random_search": benchmarks.random_search, "oracle": oracle},
        ["branin"],
        seeds=[0, 1],
        budget=BUDGET,
        n_initial=N_INITIAL,
        noise_var=NOISE_VAR,
        out_dir=out,
        name="sweep",
    )
    return out, result


def test_json_has_runs_summary_and_config(sweep):
    out, result = sweep
    written = json.loads((out / "sweep.json").read_text())
    assert written == result  # everything is plain JSON
    assert set(written) == {"config", "runs", "summary"}
    config = written["config"]
    assert config["methods"] == ["random_search", "oracle"]
    assert config["problems"] == ["branin"]
    assert config["seeds"] == [0, 1]
    assert (config["budget"], config["n_initial"]) == (BUDGET, N_INITIAL)
    assert config["noise_var"] == NOISE_VAR
    runs = written["runs"]
    assert sorted((r["method"], r["seed"]) for r in runs) == [
        ("oracle", 0),
        ("oracle", 1),
        ("random_search", 0),
        ("random_search", 1),
    ]
    for run in runs:
        assert run["problem"] == run["instance"] == "branin"
        assert run["direction"] == "minimize" and run["dim"] == 2
        assert run["optimum_value"] == pytest.approx(0.397887, abs=1e-6)
        assert run["noise_var"] == NOISE_VAR
        for field in PER_EVALUATION:
            assert len(run[field]) == BUDGET, field
        assert np.array(run["x"]).shape == (BUDGET, 2)
    entry = written["summary"]["branin"]["random_search"]
    assert entry["num_runs"] == 2 and entry["n_initial"] == N_INITIAL
    assert entry["evaluations"] == list(range(1, BUDGET + 1))
    for kind in ("log10_regret_recommendation", "log10_regret_best_observed"):
        band = {k: np.array(v) for k, v in entry[kind].items()}
        assert set(band) == {"median", "low", "high"}
        assert all(v.shape == (BUDGET,) for v in band.values())
        assert np.all(band["low"] <= band["median"] + 1e-12)
        assert np.all(band["median"] <= band["high"] + 1e-12)


def test_regrets_are_noise_free_gaps_to_the_optimum(sweep):
    _, result = sweep
    problem = benchmarks.get("branin")
    for run in result["runs"]:
        X = np.array(run["x"])
        f = problem.noise_free(X)
        np.testing.assert_allclose(run["f"], f, rtol=1e-14)
        regret_best = np.array(run["regret_best_observed"])
        regret_rec = np.array(run["regret_recommendation"])
        assert np.all(regret_best >= 0) and np.all(regret_rec >= 0)
        assert np.all(np.diff(regret_best) <= 0)
        np.testing.assert_allclose(
            regret_best, np.minimum.accumulate(f) - problem.optimum_value, atol=1e-12
        )
        R = np.array(run["recommendation"])
        np.testing.assert_allclose(
            regret_rec, problem.noise_free(R) - problem.optimum_value, atol=1e-12
        )
        # Observations carry noise; recommendations are scored without it.
        assert not np.allclose(run["y"], f)
        assert np.max(np.abs(np.array(run["y"]) - f)) < 6 * math.sqrt(NOISE_VAR)


def test_recommendations_follow_the_protocol(sweep):
    _, result = sweep
    for run in result["runs"]:
        X, y = np.array(run["x"]), np.array(run["y"])
        R = np.array(run["recommendation"])
        for t in range(BUDGET):
            best = X[np.argmin(y[: t + 1])]  # best noisy observation so far
            if run["method"] == "random_search" or t + 1 < N_INITIAL:
                np.testing.assert_array_equal(R[t], best)
            else:  # the method's own recommendation once the design is complete
                assert run["regret_recommendation"][t] < 1e-12
        suggested = np.array(run["suggest_seconds"])
        recommended = np.array(run["recommend_seconds"])
        assert np.all(suggested[:N_INITIAL] == 0) and np.all(suggested[N_INITIAL:] > 0)
        assert np.all(recommended[: N_INITIAL - 1] == 0)
        assert np.all(recommended[N_INITIAL - 1 :] > 0)


def test_design_noise_and_keys_are_shared_by_methods_for_a_seed(sweep):
    _, result = sweep
    runs = {(r["method"], r["seed"]): r for r in result["runs"]}
    problem = benchmarks.get("branin")
    for seed in (0, 1):
        a, b = runs["random_search", seed], runs["oracle", seed]
        # Same suggest function and the same keys: identical runs apart from the
        # recommendations.
        np.testing.assert_array_equal(a["x"], b["x"])
        np.testing.assert_array_equal(a["y"], b["y"])
        design = problem.to_unit(np.array(a["x"][:N_INITIAL]))
        np.testing.assert_allclose(
            design, benchmarks.initial_design(2, N_INITIAL, seed), atol=1e-14
        )
        # A Latin hypercube: one point in each third of every input.
        np.testing.assert_array_equal(
            np.sort(np.floor(N_INITIAL * design), axis=0), [[0, 0], [1, 1], [2, 2]]
        )
    assert not np.allclose(runs["oracle", 0]["x"], runs["oracle", 1]["x"])


def test_noise_is_common_to_methods_for_a_seed():
    def corner(key, problem, X, y):
        return np.full(problem.dim, 0.5)

    kwargs = dict(problem="hartmann3", seed=4, budget=6, noise_var=0.1)
    a = benchmarks.run_one("random", benchmarks.random_search, **kwargs)
    b = benchmarks.run_one("corner", corner, **kwargs)
    np.testing.assert_array_equal(
        np.subtract(a["y"], a["f"]), np.subtract(b["y"], b["f"])
    )
    assert np.array(b["x"])[N_INITIAL:] == pytest.approx(0.5)


def test_runs_are_deterministic_and_any_map_gives_the_same_runs():
    kwargs = dict(seeds=[3, 5], budget=5, noise_var=1e-3)
    methods = {"random_search": benchmarks.random_search}
    seen = []
    serial = benchmarks.run(methods, ["forrester"], on_run=seen.append, **kwargs)
    assert len(seen) == 2
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        threaded = benchmarks.run(methods, ["forrester"], map_fn=pool.map, **kwargs)
    assert [_strip_seconds(r) for r in serial["runs"]] == [
        _strip_seconds(r) for r in threaded["runs"]
    ]
    assert serial["summary"] == threaded["summary"]
    assert pickle.loads(pickle.dumps(benchmarks.random_search)) == (
        benchmarks.random_search
    )


def test_seeded_problem_families_draw_one_function_per_seed():
    family = "gp_sample:d=1,num_features=100"
    run = benchmarks.run_one("random", benchmarks.random_search, family, 5, 4)
    assert run["problem"] == family
    assert run["instance"] == "gp_sample:d=1,num_features=100,seed=5"
    assert run["direction"] == "maximize" and run["noise_var"] == 0.0
    assert run["y"] == run["f"]
    assert np.all(np.diff(run["regret_best_observed"]) <= 0)
    fixed = benchmarks.run_one(
        "random", benchmarks.random_search, f"{family},seed=2", seed=5, budget=4
    )
    assert fixed["instance"] == "gp_sample:d=1,num_features=100,seed=2"


def test_a_given_problem_keeps_its_noise_unless_overridden():
    problem = benchmarks.get("cosines", noise_var=0.05)
    kept = benchmarks.run_one("r", benchmarks.random_search, problem, 0, 4)
    assert kept["noise_var"] == 0.05 and kept["direction"] == "maximize"
    quiet = benchmarks.run_one("r", benchmarks.random_search, problem, 0, 4, 3, 0.0)
    assert quiet["noise_var"] == 0.0 and quiet["y"] == quiet["f"]


def test_bootstrap_median_on_hand_made_examples():
    # Three runs: the median is the middle run, and a resampled median equals the
    # smallest value with probability 7/27 > 5% (two or three draws of it), and
    # likewise the largest, so the 90% band is exactly [min, max].
    values = np.log10([[1e-1, 1e-2], [1e-2, 1e-4], [1e-3, 1e-3]])
    median, low, high = benchmarks.bootstrap_median(values)
    np.testing.assert_allclose(median, [-2, -3])
    np.testing.assert_allclose(low, [-3, -4])
    np.testing.assert_allclose(high, [-1, -2])
    # Two runs {0, 1}: resampled medians are 0, 0.5, 1 with probabilities 1/4, 1/2,
    # 1/4, so the 30% and 70% quantiles (level 0.4) are both 0.5; the empirical
    # mass below 0.3 is 0.25 +- 0.014 (one standard error at B = 1000).
    median, low, high = benchmarks.bootstrap_median([[0.0], [1.0]], level=0.4)
    assert (median[0], low[0], high[0]) == (0.5, 0.5, 0.5)
    median, low, high = benchmarks.bootstrap_median([[0.0], [1.0]])
    assert (low[0], high[0]) == (0.0, 1.0)
    # One run: no spread.
    median, low, high = benchmarks.bootstrap_median([[2.0, 1.0]])
    np.testing.assert_array_equal([median, low, high], [[2.0, 1.0]] * 3)


def test_bootstrap_band_matches_the_asymptotic_median_error():
    # For r normal draws, the median's standard error is sqrt(pi / 2) / sqrt(r), so
    # a 90% band is about 2 * 1.645 times that wide. The bootstrap's estimate of a
    # median's spread has relative error of order r^(-1/4) (Hall and Martin 1988),
    # 0.15 at r = 2001: allow twice that.
    r = 2001
    values = np.random.default_rng(0).standard_normal((r, 1))
    median, low, high = benchmarks.bootstrap_median(values)
    expected = 2 * 1.6449 * math.sqrt(math.pi / 2 / r)
    assert high[0] - low[0] == pytest.approx(expected, rel=2 * r**-0.25)
    assert low[0] < median[0] < high[0]
    assert median[0] == np.median(values)


def test_summarize_hand_made_runs():
    def fake(method, regrets):
        return {
            "problem": "toy",
            "method": method,
            "budget": 2,
            "n_initial": 1,
            "regret_recommendation": regrets,
            "regret_best_observed": regrets,
        }

    runs = [
        fake("a", [1.0, 0.1]),
        fake("a", [10.0, 0.0]),
        fake("a", [100.0, 1e-3]),
        fake("b", [1.0, 1.0]),
    ]
    summary = benchmarks.summarize(runs, floor=1e-12)
    a = summary["toy"]["a"]
    assert a["num_runs"] == 3 and a["evaluations"] == [1, 2]
    band = a["log10_regret_best_observed"]
    # Zero regret counts as the floor, 1e-12.
    np.testing.assert_allclose(band["median"], [1.0, -3.0])
    np.testing.assert_allclose(band["low"], [0.0, -12.0])
    np.testing.assert_allclose(band["high"], [2.0, -1.0])
    assert a["final"] == {"regret_recommendation": 1e-3, "regret_best_observed": 1e-3}
    assert summary["toy"]["b"]["log10_regret_recommendation"]["median"] == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"differ in \(budget, n_initial\)"):
        benchmarks.summarize([*runs, {**fake("a", [1.0, 1.0, 1.0]), "budget": 3}])


def test_png_is_written(sweep):
    out, _ = sweep
    png = out / "sweep.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(png).shape
    assert width > 200 and height > 200


@pytest.mark.parametrize(
    ("suggest", "message"),
    [
        (lambda key, problem, X, y: np.zeros(3), r"'bad'.*shape \(2,\).*\(3,\)"),
        (lambda key, problem, X, y: np.array([0.5, 1.5]), r"'bad'.*\[0.5, 1.5\]"),
        (lambda key, problem, X, y: np.array([0.5, np.nan]), r"'bad'.*nan"),
    ],
)
def test_bad_suggestions_name_the_method(suggest, message):
    with pytest.raises(ValueError, match=message):
        benchmarks.run_one("bad", suggest, "branin", seed=0, budget=5)


def test_bad_arguments_are_named():
    rs = benchmarks.random_search
    with pytest.raises(ValueError, match="budget must be >= 1, got 0"):
        benchmarks.run_one("r", rs, "branin", seed=0, budget=0)
    with pytest.raises(ValueError, match="n_initial .* budget = 4, got 5"):
        benchmarks.run_one("r", rs, "branin", seed=0, budget=4, n_initial=5)
    with pytest.raises(ValueError, match="'nope'"):
        benchmarks.run_one("r", rs, "nope", seed=0, budget=4)
    with pytest.raises(ValueError, match=r"problems .* \['branin', 'branin'\]"):
        benchmarks.run({"r": rs}, ["branin", "branin"], seeds=[0], budget=4)
    with pytest.raises(ValueError, match=r"seeds .* \[1, 1\]"):
        benchmarks.run({"r": rs}, ["branin"], seeds=[1, 1], budget=4)


def test_a_campaign_method_runs_the_users_optimizer():
    method = benchmarks.Campaign(TINY, recommend_at=(4,))
    run = benchmarks.run_one(
        "tiny", method, "branin", seed=3, budget=6, n_initial=0, noise_var=NOISE_VAR
    )
    assert run["n_initial"] == 3 and run["options"]["inference"] == "map"
    assert all(len(run[k]) == 6 for k in PER_EVALUATION)
    # the same points as a user's campaign with this seed and these values
    problem = benchmarks.get("branin", noise_var=NOISE_VAR)
    opt = ppbo.Optimizer(
        benchmarks.problem_space(problem), direction="minimize", seed=3, **TINY
    )
    for x, y in zip(run["x"], run["y"], strict=True):
        trial = opt.ask()
        np.testing.assert_allclose(list(trial.params.values()), x, rtol=1e-12)
        opt.tell(trial, y)
    # observed = noise-free + the runner's noise stream for (seed, evaluation)
    assert run["y"] == [
        problem(np.array(x), key=np.random.default_rng([1, 3, t]))
        for t, x in enumerate(run["x"])
    ]
    # recommendations are scored at the checkpoints only
    scored = [not math.isnan(r) for r in run["regret_recommendation"]]
    assert scored == [False, False, False, True, False, True]
    assert run["recommend_seconds"][3] > 0 and run["recommendation"][0] is None
    best = np.minimum.accumulate(np.array(run["f"]) - problem.optimum_value)
    np.testing.assert_allclose(run["regret_best_observed"], best, rtol=1e-12)
    summary = benchmarks.summarize([run])["branin"]["tiny"]
    median = summary["log10_regret_recommendation"]["median"]
    assert median[:3] == [None] * 3 and median[3] is not None


def test_a_campaign_can_start_from_the_runners_shared_design():
    method = benchmarks.Campaign(TINY | {"n_initial": 0}, shared_design=3)
    run = benchmarks.run_one("tiny", method, "branin", seed=2, budget=5)
    peer = benchmarks.run_one("peer", benchmarks.random_search, "branin", 2, 5, 3)
    assert run["x"][:3] == peer["x"][:3] and run["y"][:3] == peer["y"][:3]
    assert run["suggest_seconds"][:3] == [0.0] * 3 and run["n_initial"] == 3
    assert run["x"][3] != peer["x"][3]


def test_a_wrong_stated_optimum_is_an_error():
    wrong = dataclasses.replace(benchmarks.get("branin"), optimum_value=5.0)
    with pytest.raises(ValueError, match="beats the stated optimum 5.0"):
        benchmarks.run_one("oracle", oracle, wrong, seed=0, budget=4)


def test_regret_script_runs_campaigns_and_merges_peers(tmp_path):
    path = Path(__file__).parents[2] / "benchmarks" / "regret.py"
    spec = importlib.util.spec_from_file_location("regret_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.METHODS["ppbo"] == {}  # the user's defaults
    peer = benchmarks.run_one("peer", benchmarks.random_search, "branin", 0, 5, 3)
    (tmp_path / "peer.jsonl").write_text(json.dumps(peer) + "\n")
    argv = ["--problems", "branin", "--seeds", "1", "--budget", "5"]
    argv += ["--methods", "random_search", "--campaign", f"tiny={json.dumps(TINY)}"]
    argv += ["--checkpoints", "4", "5", "--out", str(tmp_path), "--name", "cli"]
    result = script.main([*argv, "--peers", str(tmp_path / "peer.jsonl")])
    assert set(result["summary"]["branin"]) == {"random_search", "tiny", "peer"}
    assert "| branin | tiny | 1 |" in result["table"]
    assert (tmp_path / "cli.png").exists() and (tmp_path / "cli.md").exists()
    lines = (tmp_path / "cli.jsonl").read_text().splitlines()
    assert len(lines) == 2
    # a second call finds the runs and only summarises
    again = script.main(argv)
    assert len((tmp_path / "cli.jsonl").read_text().splitlines()) == 2
    assert set(again["summary"]["branin"]) == {"random_search", "tiny"}
