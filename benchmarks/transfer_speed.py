"""Seconds per ask of the transfer surrogates inside a campaign, and compilations.

Runs a :class:`ppbo.Optimizer` campaign with ``sources=[...]`` (K = 5 sources of
20-50 points, about 200 source rows) on one task family of
:mod:`ppbo.benchmarks.transfer_problems`, with each method's settings of
``benchmarks/transfer.py`` (campaign defaults: MAP, log-EI; Env-GP "bayes" by
NUTS 64 + 64), and records for every model-based ask its wall seconds and the
number of XLA backend compilations it triggered (the
``/jax/core/compile/backend_compile_duration`` event), and the process's CPU
seconds over the ask (``time.process_time``; on shared cores the wall time also
counts the other processes' share). The first model ask compiles; later asks inside
the same capacity bucket should compile nothing.

Each method runs in its own process with a time limit (``--timeout`` seconds), so
that a campaign that hangs (as Diff-GP's did, see ``benchmarks/README.md``) is
recorded as such and the others still run.

Writes ``benchmarks/results/{name}.json``.

Usage: ``python benchmarks/transfer_speed.py [--family sin1d] [--asks 3]
[--methods gp env_gp_mode ...] [--timeout 1200] [--name transfer_speed]``;
``--compare BEFORE.json AFTER.json`` (result files, several of each joined with
commas) writes ``{name}.json`` with both and ``{name}.md``, a table of the median
wall and CPU seconds of the warm asks (after the first, without compilation).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from transfer import METHODS as TRANSFER_METHODS  # noqa: E402

import ppbo  # noqa: E402
from ppbo.benchmarks.transfer_problems import make  # noqa: E402

RESULTS = Path(__file__).parent / "results"
#: Method -> Optimizer options: the settings of ``benchmarks/transfer.py`` (this
#: script's folder is on the path when it runs) for the methods timed by default.
METHODS: dict[str, dict] = {
    name: TRANSFER_METHODS[name]
    for name in (
        "gp",
        "env_gp_mode",
        "env_gp_bayes",
        "env_gp_bayes_joint",
        "bandit_env_gp",
        "diff_gp",
        "miso_gp",
        "bhgp",
        "nn_task_gp",
        "rgpe",
    )
}
_COMPILES = [0]


def _count(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


def run(family: str, method: str, asks: int, seed: int = 0) -> dict:
    """One campaign: the design, then ``asks`` timed model-based asks."""
    task = make(family, seed)
    options = dict(METHODS[method])
    names = [f"x{i}" for i in range(task.dim)]
    bounds = zip(names, task.bounds, strict=True)
    space = ppbo.Space({n: ppbo.Real(float(lo), float(hi)) for n, (lo, hi) in bounds})
    if options.pop("sources", True):
        options["sources"] = [ppbo.Source(s.name, s.X, s.y) for s in task.sources]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = ppbo.Optimizer(space, n_initial=3, seed=seed, **options)
        while len(rows) < asks:
            compiles, start = _COMPILES[0], time.perf_counter()
            cpu = time.process_time()
            trial = opt.ask()
            seconds = time.perf_counter() - start
            cpu = time.process_time() - cpu
            x = np.array([[trial.params[n] for n in names]])
            opt.tell(trial, float(task.objective(x)[0]))
            if trial.origin == "model":
                rows.append(
                    {
                        "seconds": seconds,
                        "cpu_seconds": cpu,
                        "compilations": _COMPILES[0] - compiles,
                    }
                )
                print(method, rows[-1], flush=True)
    later = [r["seconds"] for r in rows[1:]]
    later_cpu = [r["cpu_seconds"] for r in rows[1:]]
    return {
        "method": method,
        "family": family,
        "source_rows": int(sum(len(s.y) for s in task.sources)),
        "asks": rows,
        "median_seconds_after_first": float(np.median(later)) if later else None,
        "median_cpu_seconds_after_first": (
            float(np.median(later_cpu)) if later_cpu else None
        ),
        "compilations_after_first": int(sum(r["compilations"] for r in rows[1:])),
    }


def run_isolated(family: str, method: str, asks: int, timeout: float) -> dict:
    """:func:`run` in a child process; a campaign past ``timeout`` s is recorded."""
    command = [sys.executable, __file__, "--one", method, "--family", family]
    command += ["--asks", str(asks)]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as stopped:
        out = stopped.stdout or b""
        out = out.decode() if isinstance(out, bytes) else out
        return {
            "method": method,
            "family": family,
            "timed_out_after_seconds": round(time.perf_counter() - start, 1),
            "asks_done": [line for line in out.splitlines() if line.startswith(method)],
        }
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"{method} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _warm(result: dict) -> str:
    if "timed_out_after_seconds" in result:
        return f"hung (stopped after {result['timed_out_after_seconds']:.0f} s)"
    warm = [a for a in result["asks"][1:] if a["compilations"] == 0]
    if not warm:
        return "no warm ask"
    wall = float(np.median([a["seconds"] for a in warm]))
    cpu = float(np.median([a["cpu_seconds"] for a in warm]))
    return f"{wall:.1f} ({cpu:.2f} CPU)"


def compare(before: list[dict], after: list[dict]) -> str:
    """A Markdown table: seconds per warm ask of each method, before and after."""
    old = {r["method"]: r for r in before}
    lines = [
        "| method | before: s/ask (CPU s) | after: s/ask (CPU s) | "
        "after: first ask s | after: compilations after the first |",
        "|---|---|---|---|---|",
    ]
    for r in after:
        first = r["asks"][0]["seconds"] if r.get("asks") else float("nan")
        was = _warm(old[r["method"]]) if r["method"] in old else "not measured"
        compiles = r.get("compilations_after_first", "-")
        lines.append(
            f"| {r['method']} | {was} | {_warm(r)} | {first:.0f} | {compiles} |"
        )
    return "\n".join(lines) + "\n"


def _load(paths: str) -> list[dict]:
    # a method measured again in a later file replaces its earlier result
    results: dict[str, dict] = {}
    for path in paths.split(","):
        for r in json.loads(Path(path).read_text()):
            results[r["method"]] = r
    return list(results.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="sin1d")
    parser.add_argument("--asks", type=int, default=3)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--name", default="transfer_speed")
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (_load(p) for p in args.compare)
        RESULTS.mkdir(exist_ok=True)
        both = {"before": before, "after": after}
        (RESULTS / f"{args.name}.json").write_text(json.dumps(both, indent=1))
        table = compare(before, after)
        (RESULTS / f"{args.name}.md").write_text(table)
        print(table)
        return 0
    if args.one:
        # child process of run_isolated: the result as the last line of stdout
        jax.monitoring.register_event_duration_secs_listener(_count)
        print(json.dumps(run(args.family, args.one, args.asks)), flush=True)
        return 0
    results = [
        run_isolated(args.family, m, args.asks, args.timeout) for m in args.methods
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    for r in results:
        if "timed_out_after_seconds" in r:
            print(f"{r['method']}: timed out after {r['timed_out_after_seconds']} s")
            continue
        print(
            f"{r['method']}: {r['median_seconds_after_first']:.2f} s/ask "
            f"({r['median_cpu_seconds_after_first']:.2f} CPU s) after the first, "
            f"{r['compilations_after_first']} compilations after the first"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
