"""The transfer GPs call LAPACK on one matrix at a time (no batched factorisations).

jaxlib's CPU Cholesky and triangular-solve kernels split a BATCH of matrices over
the intra-op thread pool and block the calling pool thread until the pieces have
run; two batched calls executing at once on a two-thread pool wait on each other
forever. A Diff-GP campaign with K = 5 sources hung that way when its model
vmapped the K difference GPs. Whether the hang shows depends on the machine's core
count and on XLA's scheduling, so the test checks the cause instead, on the traced
programs of a campaign step with MAP (the starting points and the BFGS on the log
density's value and gradient; ``prepare`` and ``predict`` of one sample) must
contain no ``cholesky`` or ``triangular_solve`` whose operands carry a batch axis.
"""

from functools import partial

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numpyro import handlers  # noqa: E402

import ppbo  # noqa: E402
from ppbo.inference.map import _optimise  # noqa: E402
from ppbo.models import bhgp, diff_gp, env_gp, metabo, miso_gp, nn_task_gp, rgpe  # noqa: E402,E501

LAPACK = ("cholesky", "triangular_solve")


def _subjaxprs(value):
    if isinstance(value, jax.extend.core.ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, jax.extend.core.Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _subjaxprs(item)


def lapack_shapes(jaxpr) -> list[tuple[str, tuple[int, ...]]]:
    """(primitive, first operand's shape) of every LAPACK call, sub-jaxprs too."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in LAPACK:
            found.append((eqn.primitive.name, tuple(eqn.invars[0].aval.shape)))
        for value in eqn.params.values():
            for sub in _subjaxprs(value):
                found.extend(lapack_shapes(sub))
    return found


def _data(num_sources: int):
    rng = np.random.default_rng(0)
    n_source, n_target = 6, 4
    X = rng.random((num_sources * n_source + n_target, 2))
    source = np.repeat(np.arange(num_sources), n_source).tolist() + [-1] * n_target
    return ppbo.Dataset(X, np.sin(5 * X[:, 0]) + X[:, 1], source=source)


def _programs(surrogate, data):
    inference = ppbo.MAP(num_restarts=2, max_iterations=3)
    trace = handlers.trace(handlers.seed(surrogate.model, 0)).get_trace(data)
    params = {k: v["value"] for k, v in trace.items() if v["type"] == "sample"}
    params.pop("y", None)
    cache = jax.eval_shape(surrogate.prepare, params, data)
    X = np.random.default_rng(1).random((7, data.dim))
    return {
        # the programs of a MAP fit: starting points, BFGS on value and gradient
        "MAP": jax.make_jaxpr(
            partial(_optimise, surrogate=surrogate, config=inference)
        )(jax.random.key(0), data),
        "prepare": jax.make_jaxpr(surrogate.prepare)(params, data),
        "predict": jax.make_jaxpr(surrogate.predict)(params, data, X, cache),
    }


@pytest.mark.parametrize(
    "surrogate",
    [
        diff_gp.surrogate(num_sources=3),
        diff_gp.surrogate(1, prediction="sum"),
        metabo.surrogate(num_sources=2),
        env_gp.surrogate(num_sources=2),
        miso_gp.surrogate(num_sources=2),
        bhgp.surrogate(num_sources=2),
        nn_task_gp.surrogate(num_sources=2),
    ],
    ids=["diff_gp-augmented", "diff_gp-sum", "metabo", "env_gp", "miso", "bhgp", "nn"],
)
def test_no_batched_lapack_calls(surrogate):
    num_sources = surrogate.extras["num_sources"]
    data = _data(num_sources)
    for what, closed in _programs(surrogate, data).items():
        shapes = lapack_shapes(closed.jaxpr)
        if what == "predict" and not shapes:
            continue  # predictions from a cached inverse factor need no LAPACK
        assert shapes, f"{what}: no LAPACK call found; the walk is broken"
        batched = [(name, shape) for name, shape in shapes if len(shape) != 2]
        assert not batched, f"{what}: batched LAPACK calls {batched}"


def test_rgpe_fits_and_factors_its_tasks_one_at_a_time():
    surrogate = rgpe.surrogate(num_sources=2, num_bootstrap=8, num_steps=3)
    data = _data(2)
    programs = {
        "trainer": jax.make_jaxpr(partial(surrogate.trainer, jax.random.key(0)))(data)
    }
    samples = jax.eval_shape(surrogate.trainer, jax.random.key(0), data)
    params = jax.tree.map(lambda a: np.zeros(a.shape[1:], a.dtype), samples)
    programs["prepare"] = jax.make_jaxpr(surrogate.prepare)(params, data)
    for what, closed in programs.items():
        shapes = lapack_shapes(closed.jaxpr)
        assert shapes, f"{what}: no LAPACK call found; the walk is broken"
        batched = [(name, shape) for name, shape in shapes if len(shape) != 2]
        assert not batched, f"{what}: batched LAPACK calls {batched}"


def test_the_walk_finds_a_vmapped_factorisation():
    # the check above can fail: a vmapped Cholesky is reported with its batch axis
    def factor(A):
        return jax.vmap(jax.numpy.linalg.cholesky)(A)

    eye = np.broadcast_to(np.eye(3), (4, 3, 3))
    shapes = lapack_shapes(jax.make_jaxpr(factor)(eye).jaxpr)
    assert ("cholesky", (4, 3, 3)) in shapes
