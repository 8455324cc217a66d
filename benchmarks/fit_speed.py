"""Fit-time benchmark and cost model of the fully Bayesian GP (NUTS and slice).

For each n in {20, 50, 100, 200, 500, 1000} observations of Hartmann-6 (d = 6,
outputs standardised), measures

* the cost model: the time of one value-and-gradient of the GP's log posterior
  (the unit of NUTS's work), through the LAPACK path ppbo uses on a CPU and through
  XLA's triangular solves, beside the time of one LAPACK Cholesky factorisation
  (``dpotrf`` through SciPy, the floor) of a matrix of the same size on the same
  machine and thread count, all as the minimum over repeated timings;
* for each sampler setting: the first fit (cold, compiling), then a refit after one
  new observation in the same capacity bucket, warm-started from the first
  posterior as a campaign does, and a second such refit (the one timed; the first
  compiles the warm-start program where it differs from the cold one): its
  seconds, XLA compilations (must be 0), leapfrog steps per draw (NUTS),
  log-density evaluations per draw (slice), divergences, and the effective
  sample size (ArviZ's bulk ESS, the minimum over the hyperparameters) and
  effective samples per second of the refit.

Rows go to ``results/{name}.jsonl`` as they finish ((n, setting) pairs already
there are skipped, so a sweep resumes); the summary goes to ``{name}.json`` and
``{name}.png`` (log axes). The device JAX computes on is recorded.

Usage: ``python benchmarks/fit_speed.py [--sizes 20 50 200] [--settings
nuts_default nuts_256 slice] [--name fit_speed]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from functools import partial
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from numpyro.infer.util import initialize_model  # noqa: E402

import ppbo  # noqa: E402
from ppbo import benchmarks  # noqa: E402
from ppbo.inference import _mcmc  # noqa: E402
from ppbo.models import gaussian, gp  # noqa: E402

_HARTMANN6 = benchmarks.get("hartmann6")
SIZES = [20, 50, 100, 200, 500, 1000]

#: Setting name -> the inference config it fits with. ``nuts_default`` is what
#: ``inference="nuts"`` gives a campaign (64 draws, 64 step-size warm-up
#: iterations on a refit); ``nuts_128`` the same with the 128 draws of the
#: previous default; ``nuts_256`` the defaults before that (256 warm-up iterations
#: with mass-matrix adaptation on every refit, 256 draws); ``nuts_refit32`` a
#: shorter refit warm-up; ``slice`` the slice sampler's defaults.
SETTINGS = {
    "nuts_default": lambda: ppbo.NUTS(),
    "nuts_128": lambda: ppbo.NUTS(num_samples=128),
    "nuts_256": lambda: ppbo.NUTS(num_samples=256, refit_warmup=None),
    "nuts_refit32": lambda: ppbo.NUTS(refit_warmup=32),
    "slice": lambda: ppbo.Slice(),
}


def hartmann6(X: np.ndarray) -> np.ndarray:
    """Hartmann-6 on [0, 1]^6 (minimum -3.32237), from ``ppbo.benchmarks``."""
    return np.asarray(_HARTMANN6.noise_free(np.asarray(X)), dtype=np.float64)


_COMPILES = [0]


def _count(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


def _timed(fn):
    start, compiles = time.perf_counter(), _COMPILES[0]
    posterior = fn()
    jax.block_until_ready(posterior.samples)
    return posterior, time.perf_counter() - start, _COMPILES[0] - compiles


def _best_of(fn, seconds: float = 1.0, rounds: int = 5) -> float:
    """Minimum over ``rounds`` of the mean time of ``fn`` in a ~``seconds`` loop."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    reps = max(1, int(seconds / rounds / once))
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - start) / reps)
    return float(best)


def _data(n: int, seed: int = 0):
    """``n`` observations and the two that the refits add, one at a time."""
    rng = np.random.default_rng(seed)
    X = rng.random((n + 2, 6))
    y = hartmann6(X)
    y = (y - y[:n].mean()) / y[:n].std()
    return ppbo.Dataset(X[:n], y[:n]), list(zip(X[n:], y[n:], strict=True))


def cost_model(n: int) -> dict:
    """Seconds of one log-posterior gradient (LAPACK and XLA paths) and of one
    LAPACK Cholesky of the padded size, with the fits' BLAS thread count."""
    data, _ = _data(n)
    surrogate = gp.surrogate()
    info = initialize_model(
        jax.random.key(0), surrogate.model, model_args=(data,), model_kwargs={}
    )
    z = info.param_info.z
    timings = {}
    previous = gaussian.LAPACK_MIN_SIZE
    for path, threshold in (("lapack", 0), ("xla", None)):
        gaussian.LAPACK_MIN_SIZE = threshold
        grad = jax.jit(jax.value_and_grad(info.potential_fn))
        with _mcmc.small_blas(data.capacity):
            timings[path] = _best_of(lambda g=grad: jax.block_until_ready(g(z)))
    gaussian.LAPACK_MIN_SIZE = previous
    c = data.capacity
    rng = np.random.default_rng(1)
    A = rng.standard_normal((c, c + 8))
    K = np.asfortranarray(A @ A.T / c + np.eye(c))
    with _mcmc.small_blas(c):
        chol = _best_of(lambda: scipy.linalg.lapack.dpotrf(K, lower=1, clean=0))
    used = "lapack" if previous is not None and c >= previous else "xla"
    if jax.default_backend() != "cpu":
        used = "xla"
    return {
        "grad_lapack_ms": round(1e3 * timings["lapack"], 4),
        "grad_xla_ms": round(1e3 * timings["xla"], 4),
        "grad_ms": round(1e3 * timings[used], 4),
        "grad_path": used,
        "cholesky_ms": round(1e3 * chol, 4),
        "grad_over_cholesky": round(timings[used] / chol, 2),
    }


def _ess(posterior) -> float:
    idata = posterior.to_arviz() if hasattr(posterior, "to_arviz") else None
    if idata is None:
        samples = {k: np.asarray(v)[None] for k, v in posterior.samples.items()}
        idata = az.from_dict(posterior=samples)
    ess = az.ess(idata, method="bulk")
    return float(min(float(np.min(ess[name].values)) for name in ess.data_vars))


def fit_row(n: int, setting: str, repeats: int = 5) -> dict:
    """First fit and warm-started refit of one sampler setting at ``n``."""
    data, new = _data(n)
    grown = data.append(*new[0])
    twice = grown.append(*new[1])
    assert twice.capacity == data.capacity, "the new points must stay in the bucket"
    inference = SETTINGS[setting]()
    surrogate = gp.surrogate()  # a fresh surrogate: the first fit compiles
    first, t_first, c_first = _timed(
        partial(ppbo.fit, surrogate, data, inference, jax.random.key(1))
    )
    # the first warm-started refit compiles the refit program once per bucket
    # when warm refits run a shorter warm-up; the second is the one a campaign
    # step pays
    second, t_second, c_second = _timed(
        partial(ppbo.fit, surrogate, grown, inference, jax.random.key(2), init=first)
    )
    # the timed refit, repeated from the same start with other keys: single-chain
    # ESS estimates vary a lot from run to run, so medians over the repeats
    refits = []
    for r in range(repeats):
        key = jax.random.key(3 + r)
        refits.append(
            _timed(partial(ppbo.fit, surrogate, twice, inference, key, init=second))
        )
    ess = [_ess(posterior) for posterior, _, _ in refits]
    times = [t for _, t, _ in refits]
    steps = [
        float(np.mean(p.sample_stats.get("n_steps", np.nan))) for p, _, _ in refits
    ]
    evals = [
        float(np.mean(p.sample_stats.get("num_evals", np.nan))) for p, _, _ in refits
    ]
    divergences = [
        int(np.sum(p.sample_stats.get("diverging", 0))) for p, _, _ in refits
    ]
    return {
        "n": n,
        "setting": setting,
        "inference": repr(inference),
        "capacity": data.capacity,
        "first_fit_s": round(t_first, 3),
        "first_fit_compilations": c_first,
        "first_refit_s": round(t_second, 3),
        "first_refit_compilations": c_second,
        "repeats": repeats,
        "refit_s": round(float(np.median(times)), 3),
        "refit_compilations": int(sum(c for _, _, c in refits)),
        "draws": int(refits[0][0].num_samples),
        "mean_n_steps": _median(steps),
        "mean_num_evals": _median(evals),
        "divergences": int(sum(divergences)),
        "min_bulk_ess": round(float(np.median(ess)), 1),
        "min_bulk_ess_range": [round(min(ess), 1), round(max(ess), 1)],
        "ess_per_s": round(float(np.median(np.divide(ess, times))), 2),
    }


def _median(values) -> float | None:
    middle = float(np.median(values))
    return None if np.isnan(middle) else middle


def _device() -> dict:
    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": getattr(device, "device_kind", ""),
        "cpus": os.cpu_count(),
        "host": platform.platform(),
    }


def _plot(rows, out: Path, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    costs = sorted((r for r in rows if r.get("kind") == "cost"), key=lambda r: r["n"])
    if costs:
        ns = [r["n"] for r in costs]
        left.plot(
            ns, [r["grad_lapack_ms"] for r in costs], "o-", label="gradient, LAPACK"
        )
        left.plot(ns, [r["grad_xla_ms"] for r in costs], "s--", label="gradient, XLA")
        left.plot(ns, [r["cholesky_ms"] for r in costs], "k^:", label="one Cholesky")
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("n (d = 6)")
        left.set_ylabel("milliseconds")
        left.set_title("cost of one log-posterior gradient")
        left.legend()
    fits = [r for r in rows if r.get("kind") == "fit"]
    for setting in sorted({r["setting"] for r in fits}):
        mine = sorted(
            (r for r in fits if r["setting"] == setting), key=lambda r: r["n"]
        )
        right.plot(
            [r["n"] for r in mine], [r["refit_s"] for r in mine], "o-", label=setting
        )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("n (d = 6)")
    right.set_ylabel("seconds")
    right.set_title("warm-started refit")
    right.legend()
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument(
        "--settings", nargs="*", default=["nuts_default", "nuts_256", "slice"]
    )
    parser.add_argument("--no-cost", action="store_true", help="skip the cost model")
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed refits per (n, setting)"
    )
    parser.add_argument("--name", default="fit_speed", help="result file stem")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    unknown = sorted(set(args.settings) - set(SETTINGS))
    if unknown:
        parser.error(f"unknown settings {unknown}; known: {sorted(SETTINGS)}")
    jax.monitoring.register_event_duration_secs_listener(_count)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / f"{args.name}.jsonl"
    rows = (
        [json.loads(line) for line in log.read_text().splitlines()]
        if log.exists()
        else []
    )
    done = {(r["kind"], r["n"], r.get("setting")) for r in rows}
    for n in args.sizes:
        todo = [] if args.no_cost else [("cost", None)]
        todo += [("fit", s) for s in args.settings]
        for kind, setting in todo:
            if (kind, n, setting) in done:
                continue
            if kind == "cost":
                row = cost_model(n)
            else:
                row = fit_row(n, setting, args.repeats)
            row = {"kind": kind, "n": n, **row, "device": _device()["platform"]}
            rows.append(row)
            with log.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    result = {
        "benchmark": "fit_speed",
        "problem": "hartmann6, d=6, standardised outputs",
        "lapack_min_size": gaussian.LAPACK_MIN_SIZE,
        "single_thread_blas_max": _mcmc.SINGLE_THREAD_BLAS_MAX,
        "settings": {name: repr(make()) for name, make in SETTINGS.items()},
        "device": _device(),
        "jax": jax.__version__,
        "rows": rows,
    }
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2))
    _plot(rows, out, args.name)


if __name__ == "__main__":
    main()
