"""Env-GP's learned source noise over a campaign: σ_s² of every source per iteration.

Runs the Env-GP (``variant="mode"``, Joy et al. 2019) campaign of
``benchmarks/transfer.py`` on task families of
:mod:`ppbo.benchmarks.transfer_problems` and, after every model-based ask, reads
the campaign's posterior and evaluates the posterior-mode source noise
``σ_{s,k}² = υ_t / (τ_t + 1)`` of each source (the surrogate's
``extras["source_noise"]`` at the fitted hyperparameters). Related sources should
keep a small σ_s², unrelated ones (the ``negative`` family) a growing one.

Writes ``benchmarks/results/{name}.json`` and ``{name}.png`` (one panel per family,
σ_s² of each source against the target evaluation, log scale).

Usage: ``python benchmarks/transfer_source_noise.py [--families sin1d negative]
[--seed 0] [--name transfer_source_noise]``.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import ppbo  # noqa: E402
from ppbo.benchmarks.transfer_problems import make  # noqa: E402

RESULTS = Path(__file__).parent / "results"
N_INITIAL, BUDGET = 3, 20


def run(family: str, seed: int) -> dict:
    """One Env-GP (mode) campaign; σ_s² (K,) after every model-based ask."""
    task = make(family, seed)
    names = [f"x{i}" for i in range(task.dim)]
    bounds = zip(names, task.bounds, strict=True)
    space = ppbo.Space({n: ppbo.Real(float(lo), float(hi)) for n, (lo, hi) in bounds})
    sources = [ppbo.Source(s.name, s.X, s.y) for s in task.sources]
    iterations, noise = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = ppbo.Optimizer(
            space,
            surrogate={"name": "env_gp", "variant": "mode"},
            n_initial=N_INITIAL,
            seed=seed,
            sources=sources,
        )
        for i in range(N_INITIAL + BUDGET):
            trial = opt.ask()
            if trial.origin == "model":
                posterior = opt.posterior
                source_noise = posterior.surrogate.extras["source_noise"]
                params = {k: v[0] for k, v in posterior.samples.items()}
                values = source_noise(params, posterior.data)
                iterations.append(i + 1)
                noise.append(np.asarray(values).tolist())
            x = np.array([[trial.params[n] for n in names]])
            opt.tell(trial, float(task.objective(x)[0]))
    return {
        "family": family,
        "seed": seed,
        "sources": [s.name for s in task.sources],
        "evaluation": iterations,
        "source_noise": noise,
    }


def plot(results: list[dict], path: Path) -> None:
    """σ_s² of each source against the target evaluation, one panel per family."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4.5 * len(results), 3.4))
    FigureCanvasAgg(figure)
    for i, result in enumerate(results):
        ax = figure.add_subplot(1, len(results), i + 1)
        noise = np.asarray(result["source_noise"])
        for k, name in enumerate(result["sources"]):
            ax.plot(result["evaluation"], noise[:, k], marker=".", label=name)
        ax.set_yscale("log")
        ax.set_title(f"{result['family']} (seed {result['seed']})")
        ax.set_xlabel("target evaluation (asked)")
        if i == 0:
            ax.set_ylabel("σ_s² (standardised units)")
        ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["sin1d", "negative"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="transfer_source_noise")
    args = parser.parse_args(argv)
    results = [run(family, args.seed) for family in args.families]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    plot(results, RESULTS / f"{args.name}.png")
    for result in results:
        final = np.asarray(result["source_noise"][-1])
        print(result["family"], "final σ_s²:", np.round(final, 4).tolist())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
