"""Peer benchmark: BoTorch's default BO loop under ppbo's immediate-regret protocol.

Runs one method, ``botorch_qlognei``, through ``ppbo.benchmarks.run_one`` (the same
3-point Latin-hypercube design, observation noise of variance 1e-3 and noise-free
regret scoring as ``benchmarks/regret.py``), so its results can be set beside
ppbo's. Each step is BoTorch's out-of-the-box loop: a ``SingleTaskGP`` with
BoTorch's own defaults (kernel, priors, outcome standardisation) fitted by
``fit_gpytorch_mll`` on the exact marginal likelihood, then
``qLogNoisyExpectedImprovement`` with the evaluated points as baseline, maximised
by ``optimize_acqf`` over the unit cube (q=1, 8 restarts, 256 raw samples), all in
float64 on one thread. BoTorch maximises, so minimisation problems are negated.
The recommendation is the runner's default, the best observed point.

Every finished run is appended at once as one JSON line (the dict ``run_one``
returns) to ``{out}/{name}.jsonl``; (problem, seed) pairs already in that file are
skipped, so an interrupted sweep resumes where it stopped. Runs go seed by seed
(every problem for seed 0, then seed 1, ...), so partial results cover every
problem.

This is an optional peer, not part of ppbo or its test suite. Install it in a
separate virtual environment next to ppbo, e.g.::

    python3 -m venv .venv-botorch
    .venv-botorch/bin/pip install torch==2.13.0 botorch
    .venv-botorch/bin/pip install -e .

Usage: ``.venv-botorch/bin/python benchmarks/peers/botorch_regret.py
[--problems branin hartmann6] [--seeds 20] [--first-seed 0] [--budget 60]
[--out DIR] [--name regret_botorch] [--design lhs|sobol] [--noise-var 1e-3]``
"""

from __future__ import annotations

import argparse
import json
import traceback
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from botorch.acquisition.logei import qLogNoisyExpectedImprovement  # noqa: E402
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.optim import optimize_acqf  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402

from ppbo import benchmarks  # noqa: E402

METHOD_NAME = "botorch_qlognei"
DEFAULT_PROBLEMS = [
    "branin",
    "hartmann3",
    "hartmann6",
    "levy:d=4",
    "ackley:d=5",
    "gp_sample",
]
NUM_RESTARTS = 8
RAW_SAMPLES = 256
DTYPE = torch.float64


def botorch_suggest(
    key: jax.Array, problem: benchmarks.Problem, X: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """Pick the next point with BoTorch's default GP + qLogNEI loop.

    Args:
        key: JAX PRNG key; seeds torch for this call.
        problem: the problem; its ``direction`` decides the sign of ``y``.
        X: (n, d) evaluated points in the unit cube.
        y: (n,) observed values in the problem's units.

    Returns:
        The (d,) maximiser of qLogNEI in the unit cube, as float64.
    """
    torch.manual_seed(int(jax.random.randint(key, (), 0, 2**31 - 1)))
    sign = -1.0 if problem.direction == "minimize" else 1.0
    train_X = torch.as_tensor(np.asarray(X, dtype=np.float64), dtype=DTYPE)
    train_Y = torch.as_tensor(sign * np.asarray(y, dtype=np.float64), dtype=DTYPE)
    train_Y = train_Y.unsqueeze(-1)
    # SingleTaskGP standardises the outcome by default (BoTorch >= 0.12); the
    # inputs are already in the unit cube.
    model = SingleTaskGP(train_X, train_Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    acquisition = qLogNoisyExpectedImprovement(model, X_baseline=train_X)
    bounds = torch.stack([torch.zeros(problem.dim), torch.ones(problem.dim)])
    candidate, _ = optimize_acqf(
        acquisition,
        bounds=bounds.to(DTYPE),
        q=1,
        num_restarts=NUM_RESTARTS,
        raw_samples=RAW_SAMPLES,
    )
    return candidate.detach().reshape(-1).numpy().astype(np.float64)


def sobol_then_botorch(seed: int, n_design: int = 3):
    """BoTorch's loop after ``n_design`` scrambled Sobol points (seeded by ``seed``),
    the design of BoTorch's tutorials, instead of the runner's Latin hypercube.

    Returns:
        A suggest function for :func:`ppbo.benchmarks.run_one` with
        ``n_initial=0``: the Sobol point ``len(X)`` while the design is
        incomplete, :func:`botorch_suggest` afterwards.
    """
    from scipy.stats import qmc

    def suggest(key, problem, X, y):
        if len(X) < n_design:
            design = qmc.Sobol(problem.dim, scramble=True, seed=seed).random(n_design)
            return design[len(X)]
        return botorch_suggest(key, problem, X, y)

    return suggest


def _done(path: Path, method_name: str = METHOD_NAME) -> dict[tuple[str, int], int]:
    """(problem, seed) -> budget of the runs already in ``path``."""
    done: dict[tuple[str, int], int] = {}
    if not path.exists():
        return done
    for line in path.read_text().splitlines():
        try:
            run = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by an interrupted write
        if run.get("method") == method_name:
            done[(run["problem"], int(run["seed"]))] = int(run["budget"])
    return done


def _append(path: Path, run: dict) -> None:
    text = json.dumps(run) + "\n"
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as handle:
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":
                text = "\n" + text  # start clean after a cut-short line
    with path.open("a") as handle:
        handle.write(text)
        handle.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=DEFAULT_PROBLEMS)
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=60, help="evaluations per run")
    parser.add_argument(
        "--out", default=str(Path(__file__).resolve().parent.parent / "results")
    )
    parser.add_argument("--name", default="regret_botorch", help="result file stem")
    parser.add_argument(
        "--noise-var",
        type=float,
        default=1e-3,
        help="observation noise variance (0: noise-free observations)",
    )
    parser.add_argument(
        "--design",
        choices=["lhs", "sobol"],
        default="lhs",
        help="lhs: the runner's 3-point Latin hypercube (method botorch_qlognei); "
        "sobol: 3 scrambled Sobol points (method botorch_qlognei_sobol)",
    )
    args = parser.parse_args(argv)
    method_name = METHOD_NAME + ("_sobol" if args.design == "sobol" else "")

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.name}.jsonl"
    done = _done(path, method_name)
    failed = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for problem in args.problems:
            if (problem, seed) in done:
                if done[(problem, seed)] != args.budget:
                    print(
                        f"warning: {problem} seed {seed} in {path} has budget "
                        f"{done[(problem, seed)]}, not {args.budget}; skipped",
                        flush=True,
                    )
                continue
            suggest, n_initial = botorch_suggest, 3
            if args.design == "sobol":
                suggest, n_initial = sobol_then_botorch(seed), 0
            try:
                run = benchmarks.run_one(
                    method_name,
                    benchmarks.Method(suggest=suggest),
                    problem,
                    seed,
                    args.budget,
                    n_initial=n_initial,
                    noise_var=args.noise_var,
                )
            except Exception:  # keep sweeping; a rerun retries the pair
                traceback.print_exc()
                failed.append((problem, seed))
                continue
            _append(path, run)
            seconds = run["suggest_seconds"]
            print(
                json.dumps(
                    {
                        "problem": run["problem"],
                        "seed": seed,
                        "final_regret_best_observed": run["regret_best_observed"][-1],
                        "seconds": round(sum(seconds), 2),
                        "last_step_seconds": round(seconds[-1], 3),
                    }
                ),
                flush=True,
            )
    if failed:
        print(f"failed (rerun to retry): {failed}", flush=True)
    print(f"results in {path}", flush=True)


if __name__ == "__main__":
    main()
