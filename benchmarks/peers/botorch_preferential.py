"""Peer: BoTorch's PairwiseGP + qEUBO under the protocol of benchmarks/preferential.py.

The same simulated experts (problems, normalised utility, logistic comparison
noise, seeds and answer streams) as ``benchmarks/preferential.py``; the model is
BoTorch's ``PairwiseGP`` (the probit preference GP of Chu and Ghahramani 2005,
fitted by ``PairwiseLaplaceMarginalLogLikelihood``), the acquisition
``qExpectedUtilityOfBestOption`` with ``q = 2`` (Astudillo et al. 2023), maximised
by ``optimize_acqf``. ``4 d`` initial pairs, then ``--comparisons``; no anchors
(BoTorch has no anchor model). The recommendation is the maximiser of the
posterior mean over the evaluated points, as in the ppbo script.

``--initial sobol`` (the default, arm ``botorch_qeubo``) starts from the very
pairs a ppbo campaign of the same seed starts from (pair ``i`` is point ``i`` of
the scrambled Sobol' design in ``2 d`` dimensions that
:class:`ppbo.PreferenceOptimizer` uses), so with the same answer stream the two
differ only after the design; ``--initial random`` (arm ``botorch_qeubo-random``)
draws them uniformly, as Astudillo et al. (2023, §5) do.

Optional and outside CI: run it in its own environment, e.g.
``python -m venv /tmp/botorch-venv && /tmp/botorch-venv/bin/pip install botorch -e .``
then ``/tmp/botorch-venv/bin/python benchmarks/peers/botorch_preferential.py
--problems forrester branin --seeds 3 --comparisons 30``; it appends to
``benchmarks/results/preferential_botorch.jsonl``, which ``benchmarks/preferential.py
--peers results/preferential_botorch.jsonl`` merges (arm ``botorch_qeubo``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from preferential import LEVELS, PROBLEMS, Simulated, anchors_for  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"


ARMS = {"sobol": "botorch_qeubo", "random": "botorch_qeubo-random"}


def initial_pairs(d: int, seed: int, initial: str) -> np.ndarray:
    """The ``4 d`` initial pairs, shape (4 d, 2 d): ``a`` then ``b`` per row."""
    if initial == "random":
        return np.random.default_rng([seed, 5]).random((4 * d, 2 * d))
    from ppbo.campaign.designs import initial_design

    # as PreferenceOptimizer._propose: a power-of-two Sobol' sequence, balanced
    size = 2 ** int(np.ceil(np.log2(4 * d)))
    return initial_design("sobol", size, 2 * d, seed)[: 4 * d]


def run_one(
    problem_name: str, level: str, seed: int, comparisons: int, initial: str = "sobol"
) -> dict:
    """One BoTorch campaign; returns its JSON record."""
    import torch
    from botorch.acquisition.preference import qExpectedUtilityOfBestOption
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import (
        PairwiseGP,
        PairwiseLaplaceMarginalLogLikelihood,
    )
    from botorch.optim import optimize_acqf

    torch.manual_seed(seed)
    problem = Simulated(problem_name)
    d = problem.d
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    points: list[np.ndarray] = []
    duels: list[tuple[int, int]] = []
    lam = LEVELS[level]
    started = time.perf_counter()

    def compare(a: np.ndarray, b: np.ndarray, i: int) -> None:
        ua, ub = problem.utility(np.stack([a, b]))
        p_a = 1.0 / (1.0 + np.exp(-(ua - ub) / lam))
        a_wins = np.random.default_rng([seed, i, 17]).random() < p_a
        ia, ib = len(points), len(points) + 1
        points.extend([a, b])
        duels.append((ia, ib) if a_wins else (ib, ia))

    def fit():
        X = torch.tensor(np.array(points), dtype=torch.float64)
        C = torch.tensor(duels, dtype=torch.long)
        model = PairwiseGP(X, C)
        fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model))
        return model, X

    for i, u in enumerate(initial_pairs(d, seed, initial)):
        compare(u[:d], u[d:], i)
    for i in range(4 * d, 4 * d + comparisons):
        model, _ = fit()
        acq = qExpectedUtilityOfBestOption(pref_model=model)
        pair, _ = optimize_acqf(acq, bounds, q=2, num_restarts=4, raw_samples=256)
        pair = pair.detach().numpy()
        compare(pair[0], pair[1], i)
    seconds = time.perf_counter() - started
    model, X = fit()
    with torch.no_grad():
        mean = model.posterior(X).mean.reshape(-1).numpy()
    X = X.numpy()
    x_rec = X[int(np.argmax(mean))]
    _, Y0 = anchors_for(problem, seed)
    v = -Y0
    truth = (-problem.value(X) - v.mean()) / v.std()
    return {
        "problem": problem_name,
        "arm": ARMS[initial],
        "level": level,
        "seed": seed,
        "comparisons": comparisons,
        "initial": 4 * d,
        "regret": float(-problem.utility(x_rec[None])[0]),
        "f_rec": float(problem.value(x_rec[None])[0]),
        "latent_scale_ratio": float(np.std(mean) / np.std(truth)),
        "seconds": seconds,
        "seconds_per_comparison": seconds / (4 * d + comparisons),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    parser.add_argument("--levels", nargs="+", default=list(LEVELS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--comparisons", type=int, default=150)
    parser.add_argument("--initial", choices=list(ARMS), default="sobol")
    args = parser.parse_args()
    arm = ARMS[args.initial]
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "preferential_botorch.jsonl"
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["problem"], r["arm"], r["level"], r["seed"], r["comparisons"]))
    for seed in range(args.seeds):
        for problem in args.problems:
            for level in args.levels:
                if (problem, arm, level, seed, args.comparisons) in done:
                    continue
                record = run_one(problem, level, seed, args.comparisons, args.initial)
                with path.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
                print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
