"""Hierarchical multi-task Gaussian process (intrinsic coregionalisation model).

The multi-task GP of Swersky, Snoek and Adams (2013) for transfer between related
optimisation tasks: one latent function per task, correlated through a task
covariance matrix, observed with per-task noise (inputs in the unit cube,
standardised outputs). For observation ``i`` with input ``x_i`` and task ``t_i``:

.. math::
    \\operatorname{cov}\\big(f_{t_i}(x_i), f_{t_j}(x_j)\\big)
        = K_t[t_i, t_j] \\, k_\\ell(x_i, x_j), \\qquad
    K_t = \\operatorname{diag}(\\sigma) \\, C \\, \\operatorname{diag}(\\sigma),

.. math::
    y_i = \\mu_{t_i} + f_{t_i}(x_i) + \\varepsilon_i, \\qquad
    \\varepsilon_i \\sim \\mathcal N(0, \\sigma^2_{n, t_i}),

the Hadamard (element-wise) form of ``K_t ⊗ K_x`` (Bonilla, Chai and Williams 2008,
eq. (1); Swersky et al. 2013, §2.2), which needs no grid: every observation carries
its own task id ``data.task``. ``k_ℓ`` is a unit-variance kernel of
:mod:`ppbo.models.kernels` shared by all tasks, ``σ`` are per-task output scales and
``C`` is a correlation matrix (unit diagonal). The latent prediction for task ``k``
at ``x_*`` is the GP posterior (Rasmussen and Williams 2006, Algorithm 2.1) under
this covariance (Bonilla et al. 2008, eq. (2)):

.. math::
    m_k(x_*) = \\mu_k + \\mathbf k_*^\\top (K + D)^{-1} (y - \\mu_{t}), \\qquad
    v_k(x_*) = K_t[k, k] \\, k_\\ell(x_*, x_*)
        - \\mathbf k_*^\\top (K + D)^{-1} \\mathbf k_*,

with ``k_*[i] = K_t[k, t_i] k_ℓ(x_*, x_i)``, ``K`` the covariance above over the
data, ``D = diag(noise[t_i] + JITTER)`` and ``μ_t[i] = mean[t_i]``.

Sites (``t = num_tasks``, ``d`` input dimensions):

- ``lengthscale`` (d,): lengthscales of ``k_ℓ``; the default prior of
  :func:`ppbo.models.gp.default_priors`.
- ``task_scales`` (t,): per-task output scales ``σ``. These are standard deviations
  (``K_t[k, k] = task_scales[k] ** 2``), unlike the single-task GP's ``outputscale``,
  which is a variance. Default ``LogNormal(0, 1/2)``, so that ``task_scales ** 2``
  has a ``LogNormal(0, 1)`` prior.
- ``noise`` (t,): per-task noise variances ``σ_n^2`` (the diagonal matrix ``D`` of
  Bonilla et al. 2008, eq. (2)): source tasks are often cheaper, noisier
  measurements than the target. Default ``LogNormal(-4, 1)`` as in the single-task GP.
- ``mean`` (t,): per-task constant means ``μ``; default ``Normal(0, 1)``.
- ``task_cholesky`` (t, t), when ``positive_correlation=False`` (the default): the
  lower Cholesky factor ``L`` of ``C = L L^T``, with an LKJ prior
  ``LKJCholesky(t, lkj_concentration)`` (Lewandowski, Kurowicka and Joe 2009);
  concentration 1 is uniform over correlation matrices, larger values shrink
  towards independent tasks.
- ``task_factors`` (t, r) and ``task_specific`` (t,), when
  ``positive_correlation=True``: non-negative factor loadings ``W`` and positive
  task-specific variances ``κ`` of ``B = W W^T + diag(κ)``, normalised to the
  correlation ``C = diag(B)^{-1/2} B diag(B)^{-1/2}``. This is the rank-``r``
  coregionalisation matrix of the ICM plus a diagonal that keeps it full rank
  (Álvarez, Rosasco and Lawrence 2012, §4.2); with ``W >= 0`` every entry of ``B``,
  hence every correlation, is non-negative. With ``r = t`` (the default) and
  ``t <= 4`` it reaches every positive-definite correlation matrix with non-negative
  entries, because those are completely positive (Berman and Shaked-Monderer 2003).
  Both default to ``HalfNormal(1)``.

With ``num_tasks == 1`` there is no correlation site (``C = [[1]]``), and the model
is the single-task GP with a constant mean and ``outputscale = task_scales ** 2``.

Task ids must lie in ``[0, num_tasks)``. Compiled code cannot raise on data, so the
check is host-side: :func:`check_tasks` raises a ``ValueError``; the model calls it
whenever it sees concrete data (``ppbo.Fixed``, ``numpyro.infer.Predictive``, eager
calls). Under ``jit`` (NUTS, MAP, prediction) an out-of-range id is never clipped:
it makes the covariance NaN, so fitting fails with a ``FloatingPointError``
(``CholeskyError`` or MAP's "no finite log posterior") instead of silently pooling
the row with another task. :func:`ppbo.fit` runs :func:`check_tasks` (the
surrogate's ``check_data``) before fitting, so users get the clear message.

References:
    Swersky, K., Snoek, J. and Adams, R. P. (2013). Multi-task Bayesian
    optimization. NeurIPS 26.

    Bonilla, E. V., Chai, K. M. A. and Williams, C. K. I. (2008). Multi-task Gaussian
    process prediction. NeurIPS 20.

    Lewandowski, D., Kurowicka, D. and Joe, H. (2009). Generating random correlation
    matrices based on vines and extended onion method. J. Multivariate Analysis 100.

    Álvarez, M. A., Rosasco, L. and Lawrence, N. D. (2012). Kernels for vector-valued
    functions: a review. Foundations and Trends in Machine Learning 4(3).

    Berman, A. and Shaked-Monderer, N. (2003). Completely Positive Matrices. World
    Scientific.

    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press, Algorithm 2.1.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import cho_solve, solve_triangular
from numpyro.util import not_jax_tracer

from ppbo.data import Dataset
from ppbo.linalg import cholesky
from ppbo.models import gp
from ppbo.models.gaussian import MaskedMultivariateNormal, masked_covariance
from ppbo.models.gp import JITTER
from ppbo.models.kernels import KERNELS, Kernel
from ppbo.surrogate import Surrogate

__all__ = [
    "surrogate",
    "default_priors",
    "check_tasks",
    "task_correlation",
    "task_covariance",
    "JITTER",
    "PRIOR_SITES",
]

#: Sites whose prior can be replaced through ``priors=``.
PRIOR_SITES = (
    "lengthscale",
    "task_scales",
    "noise",
    "mean",
    "task_factors",
    "task_specific",
)


def default_priors(d: int) -> dict[str, dist.Distribution]:
    """Default (scalar) hyperparameter priors for ``d`` inputs in the unit cube.

    The model broadcasts them to the site shapes: ``lengthscale`` (d,),
    ``task_scales``, ``noise``, ``mean`` and ``task_specific`` (t,), ``task_factors``
    (t, r). The LKJ prior of ``task_cholesky`` is set by ``lkj_concentration``.

    Example:
        >>> sorted(default_priors(2))
        ['lengthscale', 'mean', 'noise', 'task_factors', 'task_scales', 'task_specific']
    """
    single = gp.default_priors(d)
    return {
        "lengthscale": single["lengthscale"],
        # task_scales**2 ~ LogNormal(0, 1)
        "task_scales": dist.LogNormal(0.0, 0.5),
        "noise": single["noise"],
        "mean": single["mean"],
        "task_factors": dist.HalfNormal(1.0),
        "task_specific": dist.HalfNormal(1.0),
    }


@dataclass(frozen=True, eq=False)
class _Config:
    num_tasks: int
    kernel: str | Callable[[jax.Array], Kernel]
    positive_correlation: bool
    priors: Mapping[str, dist.Distribution]
    lkj_concentration: float
    rank: int


def _site_shape(config: _Config, name: str, d: int) -> tuple[int, ...]:
    t = config.num_tasks
    if name == "lengthscale":
        return (d,)
    if name == "task_factors":
        return (t, config.rank)
    return (t,)


def _prior(config: _Config, name: str, d: int) -> dist.Distribution:
    prior = config.priors.get(name) or default_priors(d)[name]
    if prior.event_shape == ():
        shape = _site_shape(config, name, d)
        prior = prior.expand(list(shape)).to_event(len(shape))
    return prior


def check_tasks(data: Dataset, num_tasks: int) -> None:
    """Raise if a real (unmasked) row of ``data`` has a task id ``>= num_tasks``.

    Host-side (it reads the arrays); compiled code cannot raise on data values.

    Args:
        data: observations with task ids ``data.task`` (n,).
        num_tasks: number of tasks the surrogate was built for.

    Raises:
        ValueError: naming the first offending row and its task id.

    Example:
        >>> import jax, numpy as np
        >>> from ppbo.data import Dataset
        >>> jax.config.update("jax_enable_x64", True)
        >>> data = Dataset(np.zeros((2, 1)), np.zeros(2), task=[0, 1])
        >>> check_tasks(data, num_tasks=2)  # passes silently
    """
    task = np.asarray(data.task)
    bad = np.asarray(data.mask) & ((task < 0) | (task >= num_tasks))
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(
            f"data.task[{row}] = {int(task[row])} is not a valid task id for a "
            f"surrogate built with num_tasks={num_tasks}; task ids must be in "
            f"[0, {num_tasks})"
        )


def task_correlation(
    params: Mapping[str, jax.Array], num_tasks: int, positive_correlation: bool
) -> jax.Array:
    """Task correlation matrix ``C`` (t, t) of one hyperparameter sample.

    ``L L^T`` from ``task_cholesky``, or the normalised ``W W^T + diag(κ)`` from
    ``task_factors`` and ``task_specific`` when ``positive_correlation``.

    Example:
        >>> import jax.numpy as jnp
        >>> W, kappa = jnp.ones((2, 1)), jnp.full(2, 3.0)
        >>> params = {"task_factors": W, "task_specific": kappa}
        >>> task_correlation(params, 2, positive_correlation=True).tolist()
        [[1.0, 0.25], [0.25, 1.0]]
    """
    if num_tasks == 1:
        return jnp.eye(1)
    if not positive_correlation:
        L = params["task_cholesky"]
        return L @ L.T
    W = params["task_factors"]
    B = W @ W.T + jnp.diag(params["task_specific"])
    inv_sd = 1.0 / jnp.sqrt(jnp.diag(B))
    C = B * inv_sd[:, None] * inv_sd[None, :]
    # Exactly unit diagonal; the off-diagonal entries are non-negative by construction.
    return jnp.where(jnp.eye(num_tasks, dtype=bool), 1.0, C)


def task_covariance(
    params: Mapping[str, jax.Array], num_tasks: int, positive_correlation: bool
) -> jax.Array:
    """Task covariance ``K_t = diag(task_scales) C diag(task_scales)``, (t, t).

    Example:
        >>> import jax.numpy as jnp
        >>> params = {"task_scales": jnp.array([2.0])}
        >>> task_covariance(params, 1, positive_correlation=False).tolist()
        [[4.0]]
    """
    scales = params["task_scales"]
    C = task_correlation(params, num_tasks, positive_correlation)
    return C * scales[:, None] * scales[None, :]


def _task_covariance(config: _Config, params) -> jax.Array:
    return task_covariance(params, config.num_tasks, config.positive_correlation)


def _input_kernel(config_kernel, params: Mapping[str, jax.Array]) -> Kernel:
    base = KERNELS[config_kernel] if isinstance(config_kernel, str) else config_kernel
    return base(params["lengthscale"])


def _valid(config: _Config, data: Dataset) -> jax.Array:
    in_range = (data.task >= 0) & (data.task < config.num_tasks)
    return jnp.all(in_range | ~data.mask)


def _data_covariance(config: _Config, params, data: Dataset) -> jax.Array:
    Kt = _task_covariance(config, params)
    Kx = _input_kernel(config.kernel, params).matrix(data.X, data.X)
    K = Kt[data.task[:, None], data.task[None, :]] * Kx
    K = K + jnp.diag(params["noise"][data.task] + JITTER)
    # JAX clamps out-of-range indices; NaN makes a bad task id fail loudly instead.
    return jnp.where(_valid(config, data), K, jnp.nan)


def _model(data: Dataset, *, config: _Config) -> None:
    if not_jax_tracer(data.task):
        check_tasks(data, config.num_tasks)
    d, t = data.X.shape[1], config.num_tasks
    params = {
        name: numpyro.sample(name, _prior(config, name, d))
        for name in ("lengthscale", "task_scales")
    }
    if t > 1 and config.positive_correlation:
        for name in ("task_factors", "task_specific"):
            params[name] = numpyro.sample(name, _prior(config, name, d))
    elif t > 1:
        prior = dist.LKJCholesky(t, config.lkj_concentration)
        params["task_cholesky"] = numpyro.sample("task_cholesky", prior)
    for name in ("noise", "mean"):
        params[name] = numpyro.sample(name, _prior(config, name, d))
    K = _data_covariance(config, params, data)
    loc = params["mean"][data.task]
    numpyro.sample("y", MaskedMultivariateNormal(loc, K, data.mask), obs=data.y)


def _prepare(params, data: Dataset, *, config: _Config) -> dict[str, jax.Array]:
    K = masked_covariance(_data_covariance(config, params, data), data.mask)
    L = cholesky(K)
    r = jnp.where(data.mask, data.y - params["mean"][data.task], 0.0)
    return {"L": L, "alpha": cho_solve((L, True), r)}


def _check_task(config: _Config, task) -> None:
    # A Python or NumPy integer is static and checked here; an integer JAX scalar
    # (e.g. traced) cannot be, and an out-of-range one gives a NaN mean instead.
    is_int = isinstance(task, numbers.Integral) and not isinstance(task, bool)
    is_array = isinstance(task, jax.Array) and task.ndim == 0
    if not (is_int or is_array and jnp.issubdtype(task.dtype, jnp.integer)):
        raise ValueError(f"task must be an integer task id, got task={task!r}")
    if is_int and not 0 <= int(task) < config.num_tasks:
        raise ValueError(
            f"task must be in [0, {config.num_tasks}) for a surrogate built with "
            f"num_tasks={config.num_tasks}, got task={task}"
        )


def _cross(config: _Config, params, data: Dataset, X, task):
    _check_task(config, task)
    Kt = _task_covariance(config, params)
    kernel = _input_kernel(config.kernel, params)
    Ks = Kt[task, data.task][None, :] * kernel.matrix(X, data.X)
    Ks = jnp.where(data.mask[None, :], Ks, 0.0)
    ok = _valid(config, data) & (task >= 0) & (task < config.num_tasks)
    mean = jnp.where(ok, params["mean"][task], jnp.nan)
    return Kt[task, task], kernel, Ks, mean


def _predict(params, data: Dataset, X, cache, task: int = 0, *, config: _Config):
    scale, kernel, Ks, mean = _cross(config, params, data, X, task)
    mean = mean + Ks @ cache["alpha"]
    V = solve_triangular(cache["L"], Ks.T, lower=True)
    var = scale * kernel.diag(X) - jnp.sum(V**2, axis=0)
    return mean, jnp.maximum(var, 0.0)


def _predict_joint(params, data: Dataset, X, cache, task: int = 0, *, config: _Config):
    scale, kernel, Ks, mean = _cross(config, params, data, X, task)
    mean = mean + Ks @ cache["alpha"]
    V = solve_triangular(cache["L"], Ks.T, lower=True)
    return mean, scale * kernel.matrix(X, X) - V.T @ V


def _task_kernel(config: _Config, params, task: int = 0) -> Kernel:
    _check_task(config, task)
    Kt = _task_covariance(config, params)
    return Kt[task, task] * _input_kernel(config.kernel, params)


def _noise(params, X: jax.Array, task: int = 0, *, config: _Config) -> jax.Array:
    # the per-task noise variance, as in the likelihood's D = diag(noise[t] + JITTER)
    _check_task(config, task)
    return jnp.full(X.shape[0], params["noise"][task] + JITTER, dtype=X.dtype)


def _mean(params, X: jax.Array, task: int = 0) -> jax.Array:
    return jnp.full(X.shape[0], params["mean"][task], dtype=X.dtype)


def surrogate(
    num_tasks: int,
    kernel: str | Callable[[jax.Array], Kernel] = "matern52",
    positive_correlation: bool = False,
    priors: Mapping[str, dist.Distribution] | None = None,
    lkj_concentration: float = 1.0,
    rank: int | None = None,
) -> Surrogate:
    """Build the multi-task GP surrogate.

    Args:
        num_tasks: number of tasks ``t``; observations carry ids in ``[0, t)``
            (``data.task``).
        kernel: unit-variance input kernel shared by all tasks: ``"matern12"``,
            ``"matern32"``, ``"matern52"``, ``"rbf"`` (squared-exponential),
            ``"linear"``, or a function ``lengthscale -> Kernel``.
        positive_correlation: build ``C`` from non-negative factors (sites
            ``task_factors`` and ``task_specific``) so that every task correlation
            is ``>= 0``; otherwise ``C`` has an LKJ prior (site ``task_cholesky``).
        priors: site name -> NumPyro distribution replacing a default prior (sites
            in :data:`PRIOR_SITES`); scalar priors are broadcast to the site shape.
        lkj_concentration: concentration ``η > 0`` of the LKJ prior on ``C``
            (``positive_correlation=False`` only); 1 is uniform.
        rank: number of columns ``r`` of ``task_factors`` (``positive_correlation``
            only); defaults to ``num_tasks``.

    Returns:
        A :class:`ppbo.Surrogate`. ``predict(params, data, X, cache, task=0)`` gives
        the latent (noise-free) mean and variance (m,) of task ``task`` at ``X``
        (m, d), ``predict_joint`` the mean and joint covariance (m, m), ``prepare``
        caches the Cholesky factor of the masked data covariance. Choose the task
        with ``posterior.predict(X, task=k)``. ``extras`` holds ``"kernel"``
        (``(params, task=0) -> Kernel``, the within-task kernel
        ``K_t[task, task] k_ℓ``), ``"input_kernel"`` (``params -> k_ℓ``),
        ``"mean"`` (``(params, X, task=0) -> mean``), ``"task_covariance"`` and
        ``"task_correlation"`` (``params -> (t, t)``), ``"kernel_name"`` and
        ``"num_tasks"``, for users. It declares the per-point ``noise`` of the task
        asked for (``task=k``) but no :class:`ppbo.GPParts`, so Thompson sampling,
        ES/MES with random-feature paths and PES refuse it (log-EI, EI, PI, UCB,
        KG and MES with ``method="gumbel"`` work).

    Raises:
        ValueError: for ``num_tasks < 1``, an unknown kernel or prior site, a prior
            that is not a distribution, ``lkj_concentration <= 0``, ``rank < 1``,
            or ``rank`` without ``positive_correlation``; at prediction, for a
            ``task`` outside ``[0, num_tasks)``.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> jax.config.update("jax_enable_x64", True)
        >>> X = np.random.rand(6, 1)
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]), task=[0, 1, 1, 1, 1, 1])
        >>> s = surrogate(num_tasks=2)
        >>> s.name
        'multitask_gp(matern52, t=2, lkj)'
        >>> params = {"lengthscale": np.array([0.3]), "task_scales": np.ones(2),
        ...           "task_cholesky": np.eye(2), "noise": np.full(2, 1e-4),
        ...           "mean": np.zeros(2)}
        >>> posterior = ppbo.fit(s, data, ppbo.Fixed(params), jax.random.key(0))
        >>> mean, var = posterior.predict(np.array([[0.5]]), task=0)
        >>> mean.shape
        (1, 1)

    References:
        Swersky, Snoek and Adams (2013), §2.2; Bonilla, Chai and Williams (2008),
        eqs. (1)-(2); Rasmussen and Williams (2006), Algorithm 2.1.
    """
    integral = isinstance(num_tasks, numbers.Integral) and not isinstance(
        num_tasks, bool
    )
    if not integral or num_tasks < 1:
        raise ValueError(f"num_tasks must be an integer >= 1, got {num_tasks=!r}")
    num_tasks = int(num_tasks)
    if isinstance(kernel, str) and kernel not in KERNELS:
        raise ValueError(
            f"kernel must be one of {sorted(KERNELS)} or a callable, got {kernel!r}"
        )
    if not isinstance(kernel, str) and not callable(kernel):
        raise ValueError(f"kernel must be a name or a callable, got {kernel!r}")
    if not isinstance(positive_correlation, bool):
        raise ValueError(
            f"positive_correlation must be a bool, got {positive_correlation!r}"
        )
    concentration = float(lkj_concentration)
    if not math.isfinite(concentration) or concentration <= 0.0:
        raise ValueError(
            f"lkj_concentration must be a finite number > 0, got {lkj_concentration!r}"
        )
    if rank is not None and not positive_correlation:
        raise ValueError(
            f"rank only applies with positive_correlation=True, got rank={rank!r}"
        )
    if rank is None:
        rank = num_tasks
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
        raise ValueError(f"rank must be an integer >= 1, got rank={rank!r}")
    priors = dict(priors or {})
    for name, prior in priors.items():
        if name not in PRIOR_SITES:
            hint = (
                "; set the LKJ prior with lkj_concentration"
                if name == "task_cholesky"
                else ""
            )
            raise ValueError(
                f"priors has unknown site {name!r}; known sites: "
                f"{sorted(PRIOR_SITES)}{hint}"
            )
        if not isinstance(prior, dist.Distribution):
            raise ValueError(
                f"priors[{name!r}] must be a numpyro Distribution, got {prior!r}"
            )
    config = _Config(
        num_tasks=num_tasks,
        kernel=kernel,
        positive_correlation=positive_correlation,
        priors=priors,
        lkj_concentration=concentration,
        rank=int(rank),
    )
    kernel_name = (
        kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "custom")
    )
    correlation = "positive" if positive_correlation else "lkj"
    return Surrogate(
        model=partial(_model, config=config),
        predict=partial(_predict, config=config),
        prepare=partial(_prepare, config=config),
        predict_joint=partial(_predict_joint, config=config),
        name=f"multitask_gp({kernel_name}, t={num_tasks}, {correlation})",
        check_data=partial(check_tasks, num_tasks=num_tasks),
        extras={
            "kernel": partial(_task_kernel, config),
            "input_kernel": partial(_input_kernel, kernel),
            "mean": _mean,
            "task_covariance": partial(
                task_covariance,
                num_tasks=num_tasks,
                positive_correlation=positive_correlation,
            ),
            "task_correlation": partial(
                task_correlation,
                num_tasks=num_tasks,
                positive_correlation=positive_correlation,
            ),
            "kernel_name": kernel_name,
            "num_tasks": num_tasks,
        },
        # the noise of the task asked for (task=k, as for predict); no GPParts: a
        # task's kernel is not a stationary single-task GP kernel of its own sites,
        # so random-feature paths and PES refuse this surrogate
        noise=partial(_noise, config=config),
    )
