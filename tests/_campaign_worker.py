"""A campaign worker run as a separate process by tests/test_loop_processes.py.

Usage: python _campaign_worker.py DB NAME BUDGET [--pause-after N] [--trials K]
It prints one line per event ("asked N", "told N") and flushes, so the parent can
kill it at a chosen moment.
"""

import argparse
import sys
import time

import ppbo

FAST = {"num_raw": 32, "num_restarts": 2, "max_iterations": 5}


def space():
    return ppbo.Space({"x": ppbo.Real(-1.0, 2.0), "y": ppbo.Real(0.0, 1.0)})


def objective(params):
    return (params["x"] - 0.7) ** 2 + (params["y"] - 0.2) ** 2


def optimizer(storage, name):
    return ppbo.Optimizer(
        space(),
        inference=ppbo.NUTS(num_warmup=16, num_samples=16),
        n_initial=3,
        seed=11,
        storage=storage,
        name=name,
        optimizer_options=FAST,
        load_if_exists=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("name")
    parser.add_argument("budget", type=int)
    parser.add_argument("--pause-after", type=int, default=-1)
    parser.add_argument("--trials", type=int, default=None)
    args = parser.parse_args()
    opt = optimizer(args.db, args.name)
    done = 0
    while len(opt.get_trials()) < args.budget:
        if args.trials is not None and done >= args.trials:
            break
        print(f"asking {len(opt.get_trials())}", flush=True)
        trial = opt.ask()
        print(f"asked {trial.number}", flush=True)
        if trial.number == args.pause_after:
            time.sleep(600)  # the parent kills us here
        opt.tell(trial, objective(trial.params))
        print(f"told {trial.number}", flush=True)
        done += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
