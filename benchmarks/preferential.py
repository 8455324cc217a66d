"""Preferential BO with simulated experts: anchors, noise, strategies, acquisitions.

Every run is a :class:`ppbo.PreferenceOptimizer` campaign, the code users run.
The protocol is that of qEUBO (Astudillo, Lin, Bakshy and Frazier 2023, "qEUBO: a
decision-theoretic acquisition function for preferential Bayesian optimization",
§5): ``4 d`` initial comparisons from a space-filling design, then ``150``
comparisons chosen by the acquisition (``--comparisons`` shrinks it), answered by
a simulated expert with **logistic comparison noise**,

.. math:: P(a \\succ b) = \\sigma\\big((u(a) - u(b)) / \\lambda\\big),

on the normalised utility ``u(x) = -(f(x) - f^*) / R`` (``R`` the range of ``f``
over 4096 Sobol points, so ``u`` is in about ``[-1, 0]``), at three levels
``lambda`` = 0.01 ("low"), 0.05 ("medium") and 0.1 ("high"). Problems: Forrester
(1-D), six-hump camel and Branin (2-D), Hartmann-6 and Ackley-6.

Anchors: ``2 d + 2`` Sobol points measured with **heteroscedastic noise**,
``y = f(x) + e``, ``e ~ N(0, s(x)^2)``, ``s(x) = 0.05 R (0.2 + 2 u_1)`` (``u_1``
the first unit coordinate), all given before the first comparison.

Arms (``--arms``): ``sobol`` (every pair from the space-filling design, the random
baseline), ``eubo`` and ``dueling_thompson`` without anchors; ``eubo+anchors``
(homoscedastic anchor noise), ``eubo+anchors-joint`` (the same with the joint
evidence of the tempered model as the hyperparameter criterion,
``evidence="joint"``), ``eubo+anchors-het`` (the most-likely heteroscedastic noise),
``eubo+anchors-known`` (the expert reports each anchor's variance ``s(x)^2`` with
its value, ``anchor_noise="known"``), ``eubo+anchors-sw`` / ``eubo+anchors-restart``
(the sliding-window and restart strategies with a window / horizon of half the
comparisons), ``eubo+anchors-wp`` (the weighted penalty with a half-life of half the
comparisons), ``eubo+anchors-budget`` (a budget of half the anchors, added one by
one with replacement), ``dueling_thompson+anchors`` and ``anpei+anchors-het``.

Drifting experts (``--problems branin_drift six_hump_camel_drift``): comparison
``i`` of ``T = 4 d + comparisons`` is answered on the objective translated by
``(i / T) * shift`` in unit-cube coordinates (``DRIFTS``: Branin by (0.3, 0.3),
whose middle minimum moves from (0.54, 0.15) to (0.84, 0.45); the camel by
(0.3, 0)), the anchors are measured at the start, and the recommendation is
scored against the objective at the end (``tau = 1``): the case the drift
strategies are for.

Scores: the **utility regret** ``-u(x_rec)`` of the recommendation ``x_rec``, the
maximiser of the posterior mean over the evaluated points (duel points and
anchors); the **latent-scale ratio**: the standard deviation of the posterior
mean over the evaluated points divided by that of the true utility in the
campaign's model space (the anchors' standardisation; for arms without anchors
the same transform of the same anchors), 1 when the scale is recovered; and the
same ratio over the evaluated points whose true value lies within the range of
the anchors' true values (``latent_scale_ratio_in_anchor_range``). Outside that
range nothing identifies the scale: a duel between a point far worse than the
anchors and any other says only "worse", the probit saturates, and the latent
values there stay near the prior mean (the camel's corners sit 13 anchor
standard deviations below the anchors; the whole-point ratio is dominated by
them).

Writes ``benchmarks/results/preferential.{jsonl,json,md,png}``; runs already in
the JSONL file are skipped, so a sweep resumes. The BoTorch peer
(``benchmarks/peers/botorch_preferential.py``) appends to
``results/preferential_botorch.jsonl``, merged with ``--peers`` (a peer's run is
listed only beside ppbo runs of the same problem, noise level and comparison count).

Usage: ``python benchmarks/preferential.py [--problems forrester branin]
[--arms eubo eubo+anchors] [--levels medium] [--seeds 3] [--comparisons 30]
[--peers results/preferential_botorch.jsonl] [--table] [--name preferential_drift]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import qmc

RESULTS = Path(__file__).parent / "results"
LEVELS = {"low": 0.01, "medium": 0.05, "high": 0.1}
PROBLEMS = ("forrester", "six_hump_camel", "branin", "hartmann6", "ackley6")
# Drifting experts: the objective translated linearly with the comparison index,
# by DRIFTS[name] (unit-cube coordinates) from the first comparison to the end.
DRIFTS = {"branin_drift": (0.3, 0.3), "six_hump_camel_drift": (0.3, 0.0)}
ARMS = {
    "sobol": {"acquisition": "eubo", "anchors": False, "design_only": True},
    "eubo": {"acquisition": "eubo", "anchors": False},
    "dueling_thompson": {"acquisition": "dueling_thompson", "anchors": False},
    "eubo+anchors": {"acquisition": "eubo", "anchors": True},
    "eubo+anchors-het": {
        "acquisition": "eubo",
        "anchors": True,
        "anchor_noise": "heteroscedastic",
    },
    "eubo+anchors-joint": {"acquisition": "eubo", "anchors": True, "evidence": "joint"},
    # the expert reports each anchor's measurement variance with the value
    "eubo+anchors-known": {
        "acquisition": "eubo",
        "anchors": True,
        "anchor_noise": "known",
    },
    "eubo+anchors-sw": {
        "acquisition": "eubo",
        "anchors": True,
        "anchor_strategy": "sliding_window",
    },
    "eubo+anchors-restart": {
        "acquisition": "eubo",
        "anchors": True,
        "anchor_strategy": "restart",
    },
    "eubo+anchors-wp": {
        "acquisition": "eubo",
        "anchors": True,
        "anchor_strategy": "weighted_penalty",
    },
    "eubo+anchors-budget": {"acquisition": "eubo", "anchors": True, "budget": True},
    "dueling_thompson+anchors": {"acquisition": "dueling_thompson", "anchors": True},
    "anpei+anchors-het": {
        "acquisition": "anpei",
        "anchors": True,
        "anchor_noise": "heteroscedastic",
    },
}


def _six_hump_camel(x: np.ndarray) -> np.ndarray:
    x1, x2 = x[:, 0], x[:, 1]
    return (4 - 2.1 * x1**2 + x1**4 / 3) * x1**2 + x1 * x2 + (-4 + 4 * x2**2) * x2**2


class Simulated:
    """A problem in unit-cube coordinates with its normalised utility.

    A drifting problem (a name in ``DRIFTS``) at time ``tau`` in [0, 1] is the
    base problem translated by ``tau * shift``: ``f_tau(u) = f(u - tau * shift)``,
    so its minimisers move by ``tau * shift``. Translated Branin and six-hump
    camel keep their global minimum value (Branin's minima repeat wherever
    ``cos x1 = -1`` meets its parabola, the camel grows outside its box) and a
    minimiser inside the box for the shifts used; Forrester does not (its
    continuation past ``x = 1`` reaches about -30), so it has no drifting variant.
    ``R`` (the utility's range) is that of the problem at ``tau = 0``.
    """

    def __init__(self, name: str):
        from ppbo.benchmarks import get

        self.name = name
        base = name.removesuffix("_drift") if name in DRIFTS else name
        if base == "six_hump_camel":
            self.bounds = np.array([[-3.0, 3.0], [-2.0, 2.0]])
            self.f = _six_hump_camel
            self.f_star = -1.031628453489877
        else:
            problem = get("ackley", d=6) if base == "ackley6" else get(base)
            self.bounds = np.asarray(problem.bounds)
            self.f = problem.objective
            self.f_star = problem.optimum_value
        self.d = self.bounds.shape[0]
        self.shift = np.asarray(DRIFTS.get(name, np.zeros(self.d)), dtype=np.float64)
        U = qmc.Sobol(self.d, scramble=True, seed=0).random(4096)
        self.R = float(np.max(self.value(U)) - self.f_star)

    def value(self, U: np.ndarray, tau: float = 0.0) -> np.ndarray:
        """``f`` at unit-cube points (m, d), at time ``tau`` for a drifting one."""
        lo, hi = self.bounds[:, 0], self.bounds[:, 1]
        U = np.asarray(U, dtype=np.float64) - tau * self.shift
        return np.asarray(self.f(lo + U * (hi - lo)), dtype=np.float64).reshape(-1)

    def utility(self, U: np.ndarray, tau: float = 0.0) -> np.ndarray:
        """``u = -(f - f*) / R``, about [-1, 0], 0 at the optimum."""
        return -(self.value(U, tau) - self.f_star) / self.R


def _unit(params: dict, d: int) -> np.ndarray:
    return np.array([params[f"u{i}"] for i in range(d)], dtype=np.float64)


def anchor_sd(problem: Simulated, X0: np.ndarray) -> np.ndarray:
    """The anchors' measurement noise standard deviation, ``0.05 R (0.2 + 2 u_1)``."""
    return 0.05 * problem.R * (0.2 + 2.0 * X0[:, 0])


def anchors_for(problem: Simulated, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``2 d + 2`` Sobol anchors with heteroscedastic measurement noise."""
    L = 2 * problem.d + 2
    X0 = qmc.Sobol(problem.d, scramble=True, seed=1000 + seed).random(L)
    sd = anchor_sd(problem, X0)
    rng = np.random.default_rng([seed, 99])
    return X0, problem.value(X0) + sd * rng.normal(size=L)


def run_one(problem_name: str, arm: str, level: str, seed: int, comparisons: int):
    """One campaign; returns its JSON record."""
    import ppbo

    problem = Simulated(problem_name)
    d = problem.d
    spec = ARMS[arm]
    space = ppbo.Space({f"u{i}": ppbo.Real(0.0, 1.0) for i in range(d)})
    half = max(1, comparisons // 2)
    options = {}
    if spec.get("anchor_strategy") == "sliding_window":
        options = {
            "anchor_strategy": "sliding_window",
            "strategy_options": {"window": half},
        }
    elif spec.get("anchor_strategy") == "restart":
        options = {"anchor_strategy": "restart", "strategy_options": {"horizon": half}}
    elif spec.get("anchor_strategy") == "weighted_penalty":
        # half-life of half the comparisons: the same memory as the window
        options = {
            "anchor_strategy": "weighted_penalty",
            "strategy_options": {"decay": 0.5 ** (1.0 / half)},
        }
    X0, Y0 = anchors_for(problem, seed)
    if spec.get("budget"):
        options["anchor_budget"] = max(1, len(X0) // 2)
    opt = ppbo.PreferenceOptimizer(
        space,
        seed=seed,
        acquisition=spec["acquisition"],
        anchor_noise=spec.get("anchor_noise", "homoscedastic"),
        evidence=spec.get("evidence", "separate"),
        # the space-filling baseline: every pair from the Sobol' design
        n_initial=4 * d + (comparisons if spec.get("design_only") else 0),
        direction="minimize",
        **options,
    )
    if spec["anchors"]:
        known = spec.get("anchor_noise") == "known"
        variances = anchor_sd(problem, X0) ** 2
        for x, y, v in zip(X0, Y0, variances, strict=True):
            params = {f"u{i}": float(c) for i, c in enumerate(x)}
            opt.add_anchor(params, float(y), noise=float(v) if known else None)
    lam = LEVELS[level]
    started = time.perf_counter()
    wrong = 0
    total = 4 * d + comparisons
    for i in range(total):
        pair = opt.ask()
        tau = i / total  # a drifting expert's time; the anchors are from tau = 0
        ua = problem.utility(_unit(pair.a, d)[None], tau)[0]
        ub = problem.utility(_unit(pair.b, d)[None], tau)[0]
        p_a = 1.0 / (1.0 + np.exp(-(ua - ub) / lam))
        a_wins = np.random.default_rng([seed, i, 17]).random() < p_a
        wrong += int(a_wins != (ua > ub))
        opt.tell(pair, "a" if a_wins else "b")
    seconds = time.perf_counter() - started
    posterior = opt.fit()
    data = posterior.data
    X = np.asarray(data.X)[: data.n]
    mean = np.asarray(posterior.predict_marginal(X)[0])
    x_rec = X[int(np.argmax(mean))]
    # the campaign's model space: minimise -> -y, standardised over the anchors
    v = -Y0
    center, scale = v.mean(), v.std()
    # scored against the objective at the end (tau = 1; the same for no drift)
    truth = (-problem.value(X, 1.0) - center) / scale
    ratio = float(np.std(mean) / np.std(truth))
    # the same ratio over the evaluated points whose true value lies in the range
    # of the anchors' true values: where the anchors' measurements identify it
    anchored = (-problem.value(X0, 1.0) - center) / scale
    inside = (truth >= anchored.min()) & (truth <= anchored.max())
    ratio_inside = (
        float(np.std(mean[inside]) / np.std(truth[inside]))
        if inside.sum() > 1
        else float("nan")
    )
    return {
        "problem": problem_name,
        "arm": arm,
        "level": level,
        "seed": seed,
        "comparisons": comparisons,
        "initial": 4 * d,
        "regret": float(-problem.utility(x_rec[None], 1.0)[0]),
        "f_rec": float(problem.value(x_rec[None], 1.0)[0]),
        "latent_scale_ratio": ratio,
        "latent_scale_ratio_in_anchor_range": ratio_inside,
        "points_in_anchor_range": int(inside.sum()),
        "points": int(len(X)),
        "wrong_answers": wrong,
        "seconds": seconds,
        "seconds_per_comparison": seconds / (4 * d + comparisons),
    }


def _key(r: dict) -> tuple:
    return (r["problem"], r["arm"], r["level"], r["seed"], r["comparisons"])


def _load(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _bootstrap(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = np.median(rng.choice(values, (2000, values.size)), axis=1)
    return float(np.quantile(draws, 0.05)), float(np.quantile(draws, 0.95))


def summarise(records: list[dict]) -> dict:
    """Median regret and latent-scale ratio per problem, level, budget and arm."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        key = (r["problem"], r["level"], r["comparisons"], r["arm"])
        groups.setdefault(key, []).append(r)
    rows = []
    for (problem, level, _, arm), runs in sorted(groups.items()):
        regret = np.array([r["regret"] for r in runs])
        ratio = np.array([r["latent_scale_ratio"] for r in runs])
        inside = np.array(
            [r.get("latent_scale_ratio_in_anchor_range", np.nan) for r in runs]
        )
        lo, hi = _bootstrap(regret)
        rows.append(
            {
                "problem": problem,
                "level": level,
                "arm": arm,
                "runs": len(runs),
                "comparisons": runs[0]["comparisons"],
                "median_regret": float(np.median(regret)),
                "regret_band_90": [lo, hi],
                "median_latent_scale_ratio": float(np.median(ratio)),
                # nan for runs recorded before the ratio was
                "median_latent_scale_ratio_in_anchor_range": float(np.median(inside)),
                "seconds_per_comparison": float(
                    np.median([r["seconds_per_comparison"] for r in runs])
                ),
            }
        )
    return {"protocol": "qEUBO (4d initial + comparisons)", "rows": rows}


def write_outputs(summary: dict, name: str) -> None:
    """The JSON summary, a Markdown table and a bar chart of median regret."""
    (RESULTS / f"{name}.json").write_text(json.dumps(summary, indent=2))
    lines = [
        "| problem | noise | arm | runs | comparisons | median regret "
        "(90% band) | latent-scale ratio | in the anchors' range | s / comparison |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in summary["rows"]:
        lo, hi = r["regret_band_90"]
        lines.append(
            f"| {r['problem']} | {r['level']} | {r['arm']} | {r['runs']} | "
            f"{r['comparisons']} | {r['median_regret']:.4f} ({lo:.4f}-{hi:.4f}) | "
            f"{r['median_latent_scale_ratio']:.2f} | "
            f"{r['median_latent_scale_ratio_in_anchor_range']:.2f} | "
            f"{r['seconds_per_comparison']:.2f} |"
        )
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def panel(r: dict) -> tuple:
        return r["problem"], r["level"], r["comparisons"]

    panels = sorted({panel(r) for r in summary["rows"]})
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.5))
    axes = np.atleast_1d(axes)
    for ax, (problem, level, comparisons) in zip(axes, panels, strict=True):
        rows = [r for r in summary["rows"] if panel(r) == (problem, level, comparisons)]
        medians = [r["median_regret"] for r in rows]
        lo = [m - r["regret_band_90"][0] for m, r in zip(medians, rows, strict=True)]
        hi = [r["regret_band_90"][1] - m for m, r in zip(medians, rows, strict=True)]
        ax.bar(range(len(rows)), medians, yerr=[lo, hi], color="tab:blue")
        ax.set_xticks(
            range(len(rows)),
            [r["arm"] for r in rows],
            rotation=60,
            ha="right",
            fontsize=7,
        )
        title = f"{problem} ({level} noise, {comparisons} comparisons)"
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("utility regret (normalised)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)


def main() -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from ppbo.cli import enable_compilation_cache

    enable_compilation_cache()  # compiled buckets survive a restarted sweep
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--levels", nargs="+", default=list(LEVELS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="run seeds first-seed .. seeds-1"
    )
    parser.add_argument("--comparisons", type=int, default=150)
    parser.add_argument("--peers", nargs="*", default=[])
    parser.add_argument("--name", default="preferential")
    parser.add_argument("--table", action="store_true", help="only summarise")
    args = parser.parse_args()
    for name, choices in (
        ("problems", PROBLEMS + tuple(DRIFTS)),
        ("arms", ARMS),
        ("levels", LEVELS),
    ):
        bad = [v for v in getattr(args, name) if v not in choices]
        if bad:
            parser.error(f"--{name}: unknown {bad}; choose from {list(choices)}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{args.name}.jsonl"
    records = _load(path)
    done = {_key(r) for r in records}
    if not args.table:
        # seed-major, so that a sweep cut short still covers every problem
        for seed in range(args.first_seed, args.seeds):
            for problem in args.problems:
                for level in args.levels:
                    for arm in args.arms:
                        key = (problem, arm, level, seed, args.comparisons)
                        if key in done:
                            continue
                        record = run_one(problem, arm, level, seed, args.comparisons)
                        # free the run's executables (their memory maps; a long
                        # sweep otherwise ends in "Cannot allocate memory")
                        jax.clear_caches()
                        records.append(record)
                        with path.open("a") as handle:
                            handle.write(json.dumps(record) + "\n")
                        print(json.dumps(record), flush=True)
    # a peer's run is listed beside ppbo's runs of the same protocol only
    protocols = {(r["problem"], r["level"], r["comparisons"]) for r in records}
    for peer in args.peers:
        records += [
            r
            for r in _load(
                Path(peer) if Path(peer).is_absolute() else RESULTS.parent / peer
            )
            if (r["problem"], r["level"], r["comparisons"]) in protocols
        ]
    summary = summarise(records)
    write_outputs(summary, args.name)
    print((RESULTS / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
