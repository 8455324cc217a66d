"""A preference campaign run as a separate process by test_campaign_processes.py.

Usage: python _preference_worker.py DB NAME PAIRS [--pause-after-tell N]
It prints "told N" after each committed tell and flushes, so the parent can kill
it right after a tell.
"""

import argparse
import sys
import time

import ppbo

FAST = {"num_raw": 32, "num_restarts": 2, "max_iterations": 5}


def space():
    return ppbo.Space({"x": ppbo.Real(-2.0, 2.0)})


def utility(params):
    return -((params["x"] - 0.5) ** 2)


def optimizer(storage, name):
    return ppbo.PreferenceOptimizer(
        space(),
        storage=storage,
        name=name,
        seed=5,
        n_initial=2,
        num_samples=8,
        optimizer_options=FAST,
        load_if_exists=True,
    )


def answer(pair):
    return "a" if utility(pair.a) > utility(pair.b) else "b"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("name")
    parser.add_argument("pairs", type=int)
    parser.add_argument("--pause-after-tell", type=int, default=-1)
    args = parser.parse_args()
    opt = optimizer(args.db, args.name)
    if not opt.get_anchors():
        opt.add_anchor({"x": 0.0}, -0.25)
    while len(opt.get_pairs()) < args.pairs:
        pair = opt.ask()
        opt.tell(pair, answer(pair))
        print(f"told {pair.id}", flush=True)
        if pair.id == args.pause_after_tell:
            time.sleep(600)  # the parent kills us here
    return 0


if __name__ == "__main__":
    sys.exit(main())
