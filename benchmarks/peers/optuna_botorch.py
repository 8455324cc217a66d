"""Peer benchmark: Optuna's BoTorch sampler on Branin, beside ``PPBOSampler``.

The ``optuna`` part of ``benchmarks/integrations.py`` runs an Optuna study with
:class:`ppbo.integrations.optuna.PPBOSampler` (and Optuna's TPE and random
samplers) on the noise-free Branin function, ``--budget`` trials per seed. This
script runs the same study with Optuna's ``BoTorchSampler`` (from the
``optuna-integration`` package, ``optuna_integration.BoTorchSampler``) with all of
its defaults (its own number of start-up trials, candidates function and
independent sampler), seeded with the same seeds: ``BoTorchSampler(seed=seed)``.

The objective is Branin on ``[-5, 10] x [0, 15]`` (Dixon and Szegö 1978, as in
Jones, Schonlau and Welch 1998), written out here so that this environment needs
neither ppbo nor JAX; the regret of a study is its best value minus the optimum
0.397887. Every finished seed is appended at once as one JSON line
(``{"sampler", "seed", "budget", "regret", "seconds", ...}``) to
``{out}/{name}.jsonl``; seeds already in that file (with the same budget) are
skipped, so an interrupted run resumes. ``benchmarks/integrations.py --parts
optuna`` merges the file into ``results/integrations.json``.

This is an optional peer, not part of ppbo or its test suite. Install it in a
separate virtual environment, e.g.::

    python3 -m venv .venv-optuna-botorch
    .venv-optuna-botorch/bin/pip install torch==2.13.0 botorch optuna \\
        optuna-integration

Usage: ``.venv-optuna-botorch/bin/python benchmarks/peers/optuna_botorch.py
[--seeds 10] [--first-seed 0] [--budget 30] [--out DIR]
[--name integrations_optuna_botorch]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import optuna
import torch

try:  # optuna-integration >= 3.6 (Optuna 4)
    from optuna_integration import BoTorchSampler
except ImportError:  # older Optuna, where the integration lived in optuna itself
    from optuna.integration import BoTorchSampler

RESULTS = Path(__file__).resolve().parents[1] / "results"
#: Branin's global minimum value (three minimisers, e.g. (pi, 2.275)).
OPTIMUM = 0.397887


def branin(x1: float, x2: float) -> float:
    """The noise-free Branin function at one point."""
    b = 5.1 / (4.0 * math.pi**2)
    c = 5.0 / math.pi
    t = 1.0 / (8.0 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6.0) ** 2 + 10.0 * (1.0 - t) * math.cos(x1) + 10.0


def objective(trial: optuna.Trial) -> float:
    """Branin over its usual box, the same parameters as the PPBOSampler arm."""
    return branin(
        trial.suggest_float("x1", -5.0, 10.0), trial.suggest_float("x2", 0.0, 15.0)
    )


def run_seed(seed: int, budget: int) -> dict:
    """One study of ``budget`` trials with ``BoTorchSampler(seed=seed)``."""
    start = time.perf_counter()
    study = optuna.create_study(sampler=BoTorchSampler(seed=seed))
    study.optimize(objective, n_trials=budget)
    states = sorted({t.state.name for t in study.trials})
    return {
        "sampler": "botorch",
        "seed": seed,
        "budget": budget,
        "regret": study.best_value - OPTIMUM,
        "seconds": time.perf_counter() - start,
        "states": states,
        "trials": len(study.trials),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="integrations_optuna_botorch")
    args = parser.parse_args(argv)
    if args.seeds < 0 or args.first_seed < 0 or args.budget < 1:
        parser.error(
            f"need --seeds >= 0, --first-seed >= 0, --budget >= 1; got "
            f"{args.seeds}, {args.first_seed}, {args.budget}"
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # the sampler and its candidates function are marked experimental (a warning
    # on every trial); it says nothing about a run
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    # one thread: the machine's other processes keep their cores, and the
    # per-trial times compare with the single-threaded ppbo arm
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.jsonl"
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                if record["budget"] == args.budget:
                    done.add(record["seed"])
    versions = {
        "optuna": optuna.__version__,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        import botorch

        versions["botorch"] = botorch.__version__
    except ImportError:  # pragma: no cover - BoTorchSampler needs it
        pass
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        if seed in done:
            continue
        record = run_seed(seed, args.budget)
        record["versions"] = versions
        record["load_average"] = list(os.getloadavg())
        with path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(
            f"botorch seed {seed}: regret {record['regret']:.3g} "
            f"({record['seconds']:.1f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
