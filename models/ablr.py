"""ABLR: shared neural features, one Bayesian linear head per task.

Perrone et al. (2018), §3: tasks ``t = 1..T`` share a feature map ``phi_z(x)`` (a
tanh network with weights ``z`` on standardised inputs, plus a constant feature:
:func:`ppbo.models.dngo.features`); task ``t`` has its own
Bayesian linear regression (:mod:`ppbo.models.blr`) with weight precision
``alpha_t`` and noise precision ``beta_t``:

.. math::
    y_t = \\Phi_t w_t + \\varepsilon_t, \\quad
    w_t \\sim \\mathcal N(0, \\alpha_t^{-1} I), \\quad
    \\varepsilon_t \\sim \\mathcal N(0, \\beta_t^{-1} I)

The network and all precisions are learned jointly by minimising the sum of the
per-task negative log marginal likelihoods (Perrone et al. 2018, eq. (3); the
per-task term is Bishop 2006, eq. 3.86), here with a fixed number of full-batch
Adam steps (optax) under ``lax.scan`` where the paper uses L-BFGS. Each task's
predictive is the Gaussian of its head (Bishop 2006, eq. 3.59). With
``num_tasks=1`` this is single-task ABLR: DNGO with the network trained on the
evidence instead of least squares. Task ids come from ``data.task``; they must
lie in ``[0, num_tasks)`` (checked on the host before fitting).

Transfer learning from source tasks (Perrone et al. 2018, §4: the heads of the
related tasks train the shared features that the target's head then uses): with
``num_sources = K`` the heads are ``K + 1`` and a row's head comes from
``data.source`` instead: head 0 for the target (``source == -1``), head ``k + 1``
for source ``k``. Predictions are the target head's unless ``task=`` says otherwise.

Samples (leading axis ``s = 1``): ``w0, b0, ...`` the network (see
:func:`ppbo.models.dngo.features`), ``alpha`` (t,) and ``beta`` (t,). ``prepare``
computes every head's weight posterior from the data, so fantasised observations
condition it. ``predict``, ``predict_joint`` and ``noise`` take ``task=`` (default
0), as the multi-task GP's do.

References:
    Perrone, V., Jenatton, R., Seeger, M. and Archambeau, C. (2018). Scalable
    Hyperparameter Transfer Learning. NeurIPS.
    Bishop, C. M. (2006). Pattern Recognition and Machine Learning, §3.3, §3.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp

from ppbo.data import Dataset
from ppbo.models import blr, dngo
from ppbo.models.multitask_gp import check_tasks
from ppbo.models.sources import check_sources
from ppbo.surrogate import PathSampler, Surrogate

__all__ = ["surrogate", "negative_log_evidence", "precisions"]


def precisions(raw: jax.Array, bounds: tuple[float, float]) -> jax.Array:
    """Map unconstrained values into ``exp(bounds)``: ``exp(lo + (hi - lo) sigmoid)``.

    Keeps the learned precisions inside the boxes of :mod:`ppbo.models.blr`
    (features that interpolate the data would otherwise send ``beta`` to
    infinity).

    Example:
        >>> import jax.numpy as jnp
        >>> precisions(jnp.zeros(1), (-2.0, 2.0)).tolist()
        [1.0]
    """
    lo, hi = bounds
    return jnp.exp(lo + (hi - lo) * jax.nn.sigmoid(raw))


def _heads(data: Dataset, num_tasks: int) -> jax.Array:
    # with source rows the head is the source id + 1 (the target's head is 0)
    if data.source is not None:
        return data.source + 1
    return data.task


def _task_masks(data: Dataset, num_tasks: int) -> jax.Array:
    tasks = jnp.arange(num_tasks)[:, None]
    return data.mask[None, :] & (_heads(data, num_tasks)[None, :] == tasks)


def negative_log_evidence(
    params: dict[str, jax.Array], data: Dataset, num_tasks: int
) -> jax.Array:
    """``-sum_t log p(y_t | Phi_t, alpha_t, beta_t)`` (Perrone et al. 2018, eq. 3).

    Args:
        params: the network ``w0, b0, ...`` and precisions ``alpha``, ``beta``
            of shape (t,).
        data: padded data; row ``i`` belongs to task ``data.task[i]``.
        num_tasks: t.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, ppbo
        >>> net = dngo.init_network(jax.random.key(0), (1, 4))
        >>> params = dict(net, alpha=jnp.ones(2), beta=jnp.ones(2))
        >>> data = ppbo.Dataset(np.zeros((3, 1)), np.ones(3), task=[0, 1, 1])
        >>> bool(negative_log_evidence(params, data, 2) > 0)
        True
    """
    Phi = dngo.features(params, data.X)
    per_task = jax.vmap(blr.log_marginal_likelihood, in_axes=(None, None, 0, 0, 0))
    masks = _task_masks(data, num_tasks)
    return -jnp.sum(per_task(Phi, data.y, masks, params["alpha"], params["beta"]))


def _trainer(key, data: Dataset, *, num_tasks, hidden, num_steps, learning_rate):
    net = dngo.init_network(key, (data.X.shape[1], *hidden))
    # start at alpha = 1 and beta = 100 (noise variance 0.01 of standardised y)
    raw = {
        "raw_alpha": jnp.full(num_tasks, _inverse(0.0, blr.LOG_ALPHA_BOUNDS)),
        "raw_beta": jnp.full(num_tasks, _inverse(jnp.log(100.0), blr.LOG_BETA_BOUNDS)),
    }
    n = jnp.sum(data.mask)

    def loss(state, data):
        params = _constrain(state)
        return negative_log_evidence(params, data, num_tasks) / n

    state = dngo.train_network(
        key,
        data,
        loss,
        dict(net, **raw),
        num_steps=num_steps,
        learning_rate=learning_rate,
    )
    return {k: jnp.asarray(v, jnp.float64)[None] for k, v in _constrain(state).items()}


def _inverse(log_value, bounds):
    lo, hi = bounds
    p = (log_value - lo) / (hi - lo)
    return jnp.log(p) - jnp.log1p(-p)


def _constrain(state):
    params = {k: v for k, v in state.items() if not k.startswith("raw_")}
    params["alpha"] = precisions(state["raw_alpha"], blr.LOG_ALPHA_BOUNDS)
    params["beta"] = precisions(state["raw_beta"], blr.LOG_BETA_BOUNDS)
    return params


def _prepare(params, data: Dataset, *, num_tasks: int) -> dict[str, jax.Array]:
    Phi = dngo.features(params, data.X)
    heads = jax.vmap(blr.weight_posterior, in_axes=(None, None, 0, 0, 0))
    post = heads(
        Phi, data.y, _task_masks(data, num_tasks), params["alpha"], params["beta"]
    )
    return post._asdict()


def _head(cache, task: int) -> blr.WeightPosterior:
    return blr.WeightPosterior(cache["mean"][task], cache["chol_inv"][task])


def _predict(params, data: Dataset, X, cache, task: int = 0):
    mean, var = blr.predict(_head(cache, task), dngo.features(params, X))
    return mean, jnp.maximum(var, 0.0)


def _predict_joint(params, data: Dataset, X, cache, task: int = 0):
    head = _head(cache, task)
    Phi = dngo.features(params, X)
    V = Phi @ head.chol_inv.T
    return Phi @ head.mean, V @ V.T


def _noise(params, X, task: int = 0):
    return jnp.full(X.shape[0], 1.0 / params["beta"][task], dtype=X.dtype)


def _draw_paths(key, params, data, cache, num_paths):
    # head 0 (single-task ABLR's one head, or the target's beside source heads),
    # drawn as DNGO draws its last layer
    head = jax.tree.map(lambda a: a[0], cache)
    return dngo.PATHS.draw(key, params, data, head, num_paths)


_SINGLE_TASK_PATHS = PathSampler(draw=_draw_paths, evaluate=dngo.PATHS.evaluate)


def surrogate(
    num_tasks: int = 1,
    hidden: Sequence[int] = (50, 50, 50),
    *,
    num_steps: int = 1000,
    learning_rate: float = 1e-2,
    num_sources: int = 0,
) -> Surrogate:
    """Build the (multi-task) ABLR surrogate, fitted by :class:`ppbo.Train`.

    Args:
        num_tasks: number of tasks t (task ids ``0 .. t - 1`` in ``data.task``).
            Must be 1 when ``num_sources > 0``.
        hidden: widths of the shared tanh layers (Perrone et al. use three of 50).
        num_steps: full-batch Adam steps on the summed negative evidence.
        learning_rate: Adam's step size.
        num_sources: number of source tasks K whose rows (``data.source >= 0``)
            train heads ``1 .. K`` beside the target's head 0; 0 for none.

    Returns:
        A :class:`ppbo.Surrogate` with a ``trainer``, per-task ``predict``,
        ``predict_joint`` and ``noise`` (``task=``), conditioning and, for
        ``num_tasks=1`` (with or without sources), exact sample paths of the
        target's head.

    Raises:
        ValueError: for ``num_tasks < 1``, an empty ``hidden``, ``num_steps < 1``,
            ``num_sources < 0``, or both ``num_tasks > 1`` and ``num_sources > 0``.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> small = surrogate(num_tasks=2, hidden=(8,), num_steps=50)
        >>> X = np.linspace(0, 1, 6)[:, None]
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), task=[0, 1] * 3)
        >>> posterior = ppbo.fit(small, data, ppbo.Train(), jax.random.key(0))
        >>> posterior.samples["beta"].shape, posterior.predict(X, task=1)[0].shape
        ((1, 2), (1, 6))

        Two source tasks beside the target (heads 1 and 2 for the sources):

        >>> transfer = surrogate(hidden=(8,), num_steps=50, num_sources=2)
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), source=[0, 0, 1, 1, -1, -1])
        >>> ppbo.fit(transfer, data, ppbo.Train(), jax.random.key(0)).samples[
        ...     "beta"].shape
        (1, 3)
    """
    num_sources = int(num_sources)
    if num_sources < 0:
        raise ValueError(f"num_sources must be >= 0, got {num_sources}")
    if num_sources > 0 and int(num_tasks) != 1:
        raise ValueError(
            "give either task ids (num_tasks > 1) or source tasks (num_sources > 0), "
            f"not both: got num_tasks={num_tasks}, num_sources={num_sources}"
        )
    num_tasks = int(num_tasks) + num_sources
    hidden = tuple(int(h) for h in hidden)
    if num_tasks < 1:
        raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
    if not hidden or min(hidden) < 1:
        raise ValueError(f"hidden must be a non-empty tuple of widths, got {hidden}")
    if int(num_steps) < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    trainer = partial(
        _trainer,
        num_tasks=num_tasks,
        hidden=hidden,
        num_steps=int(num_steps),
        learning_rate=float(learning_rate),
    )
    return Surrogate(
        trainer=trainer,
        predict=_predict,
        prepare=partial(_prepare, num_tasks=num_tasks),
        predict_joint=_predict_joint,
        noise=_noise,
        paths=_SINGLE_TASK_PATHS if num_tasks == 1 or num_sources else None,
        check_data=(
            partial(check_sources, num_sources=num_sources)
            if num_sources
            else partial(check_tasks, num_tasks=num_tasks)
        ),
        name=(
            f"ablr(tasks={num_tasks}, hidden={list(hidden)}, steps={int(num_steps)}"
            + (f", sources={num_sources})" if num_sources else ")")
        ),
    )
