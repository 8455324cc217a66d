"""The ``ppbo`` command.

``ppbo demo`` fits the fully Bayesian GP to noisy observations of the Forrester
function with NUTS and slice sampling, prints ArviZ summaries and diagnostics, and
writes a plot of the predictive distribution.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _forrester(x):
    import numpy as np

    # Forrester, Sobester and Keane (2008), "Engineering design via surrogate
    # modelling", p. 83.
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def _demo(args: argparse.Namespace) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import ppbo
    from ppbo.models import gp

    rng = np.random.default_rng(args.seed)
    X = np.sort(rng.random(args.n))[:, None]
    y = _forrester(X[:, 0]) + 0.3 * rng.standard_normal(args.n)
    mean, sd = y.mean(), y.std()
    data = ppbo.Dataset(X, (y - mean) / sd)
    surrogate = gp.surrogate(kernel="matern52", mean="constant")
    grid = np.linspace(0.0, 1.0, 200)[:, None]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    methods = {
        "NUTS": ppbo.NUTS(num_warmup=args.samples, num_samples=args.samples),
        "Slice": ppbo.Slice(num_warmup=args.samples, num_samples=args.samples),
    }
    for ax, (label, inference) in zip(axes, methods.items(), strict=True):
        start = time.perf_counter()
        posterior = ppbo.fit(surrogate, data, inference, jax.random.key(args.seed))
        seconds = time.perf_counter() - start
        print(f"\n== {label}: {posterior.num_samples} samples in {seconds:.1f} s")
        summary = az.summary(posterior.to_arviz(), kind="stats")
        print(summary.to_string() if hasattr(summary, "to_string") else summary)
        report = posterior.diagnostics(warn=False)
        for message in report.warnings or ("no diagnostic warnings",):
            print(f"   {message}")
        mu, var = posterior.predict_marginal(grid)
        mu, band = mean + sd * np.asarray(mu), 2 * sd * np.sqrt(np.asarray(var))
        ax.plot(grid[:, 0], _forrester(grid[:, 0]), "k--", lw=1, label="truth")
        ax.plot(grid[:, 0], mu, label=f"{label} mean")
        ax.fill_between(grid[:, 0], mu - band, mu + band, alpha=0.3, label="±2 sd")
        ax.plot(X[:, 0], y, "k.", label="data")
        ax.set_title(f"fully Bayesian GP, {label}")
        ax.set_xlabel("x")
    axes[0].legend(loc="upper left")
    path = out / "demo_predictive.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppbo`` command.

    Example:
        >>> # $ ppbo demo --samples 200
    """
    parser = argparse.ArgumentParser(prog="ppbo", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="fit a fully Bayesian GP and plot it")
    demo.add_argument("--n", type=int, default=12, help="number of observations")
    demo.add_argument("--samples", type=int, default=256, help="MCMC warm-up/samples")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", default=os.environ.get("PPBO_OUT", "ppbo-output"))
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
