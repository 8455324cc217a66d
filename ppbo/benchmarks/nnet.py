"""NNet: the validation error of a small neural network, a real noisy benchmark.

The task of Hernández-Lobato, Hoffman and Ghahramani (2014), Section 5 ("NNet"), on
a dataset shipped with scikit-learn: minimise the validation error of a neural
network as a function of its weight decay and its number of training iterations.

Two inputs, in the problem's units:

- ``x1 = log10(weight decay)`` in [-6, -1]: the L2 penalty lambda ||W||^2 on the
  weight matrices (not the biases) added to the mean cross-entropy;
- ``x2 = iterations`` in [100, 1000]: minibatch Adam steps, rounded to an integer.

The network is a 64-32-10 tanh multilayer perceptron with LeCun-normal initial
weights and zero biases, trained by Adam (learning rate 3e-3, betas 0.9 and 0.999;
Kingma and Ba 2015) on minibatches of 32 drawn with replacement. It learns from 300
of the 1797 8x8 images of handwritten digits (UCI "Optical Recognition of
Handwritten Digits", as bundled with scikit-learn: ``sklearn.datasets.load_digits``)
and is scored on the other 1497. The split is fixed; the initial weights and the
minibatches come from the evaluation's key, so the objective is genuinely noisy.
Training runs in float32, as networks are trained, whatever JAX's x64 setting.

:func:`validation_error` runs that training (it needs scikit-learn). As in the
paper, the benchmark's ground truth is a GP fitted to 1000 evaluations of it over a
scrambled Sobol design; both ship with ppbo (:func:`load_evaluations`, written by
``benchmarks/make_nnet_data.py``). ``ppbo.benchmarks.get("nnet")`` is the
:class:`~ppbo.benchmarks.Problem` whose objective is that GP's posterior mean (plain
NumPy; Matérn-5/2 with the hyperparameters ppbo's ``MAP`` found), whose default
``noise_var`` is the fitted noise variance, and whose optimum was found by a dense
Sobol search and L-BFGS-B refinement.

References:
    Hernández-Lobato, J. M., Hoffman, M. W. and Ghahramani, Z. (2014). Predictive
    Entropy Search for Efficient Global Optimization of Black-box Functions.
    NeurIPS. Section 5.
    Alpaydin, E. and Kaynak, C. (1998). Optical Recognition of Handwritten Digits.
    UCI Machine Learning Repository. https://doi.org/10.24432/C50P49
    Kingma, D. P. and Ba, J. (2015). Adam: A Method for Stochastic Optimization.
    ICLR.
    Rasmussen, C. E. and Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press. Algorithm 2.1 and eq. (4.17).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.stats import qmc

__all__ = ["BOUNDS", "validation_error", "load_evaluations", "problem_fields"]

#: (2, 2) box: log10 weight decay, then training iterations.
BOUNDS = ((-6.0, -1.0), (100.0, 1000.0))

_NUM_TRAIN = 300
_SPLIT_SEED = 0
_HIDDEN = 32
_BATCH = 32
_LEARNING_RATE = 3e-3
_BETA1, _BETA2, _EPSILON = 0.9, 0.999, 1e-8
_NUM_INPUTS, _NUM_CLASSES = 64, 10
# Flat parameter vector: W1 (64, 32), b1 (32,), W2 (32, 10), b2 (10,).
_SHAPES = ((_NUM_INPUTS, _HIDDEN), (_HIDDEN,), (_HIDDEN, _NUM_CLASSES), (_NUM_CLASSES,))
_SIZES = tuple(int(np.prod(shape)) for shape in _SHAPES)
_OFFSETS = tuple(int(o) for o in np.cumsum((0,) + _SIZES))
_LAYERS = tuple(zip(_SIZES, _SHAPES, strict=True))

_EVALUATIONS = "nnet_evaluations.csv"
_GP = "nnet_gp.json"
# Relative slack on the box, as for the other problems: rounding, not an error.
_BOUNDS_RTOL = 1e-9


# ---------------------------------------------------------------------------------
# The real objective: train the network and score it.


@functools.cache
def _digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the fixed split (X_train, y_train, X_val, y_val), pixels in [0, 1]."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(_SPLIT_SEED).permutation(y.size)
    X = (X[order] / 16.0).astype(np.float32)
    y = y[order].astype(np.int32)
    return X[:_NUM_TRAIN], y[:_NUM_TRAIN], X[_NUM_TRAIN:], y[_NUM_TRAIN:]


def _unpack(w: jax.Array) -> list[jax.Array]:
    return [
        w[start:stop].reshape(shape)
        for start, stop, shape in zip(_OFFSETS[:-1], _OFFSETS[1:], _SHAPES, strict=True)
    ]


def _logits(w: jax.Array, X: jax.Array) -> jax.Array:
    W1, b1, W2, b2 = _unpack(w)
    return jnp.tanh(X @ W1 + b1) @ W2 + b2


def _loss(w, X, y, weight_decay, penalised):
    logits = _logits(w, X)
    picked = jnp.take_along_axis(logits, y[:, None], axis=1)[:, 0]
    cross_entropy = jnp.mean(jax.nn.logsumexp(logits, axis=1) - picked)
    return cross_entropy + weight_decay * jnp.sum(penalised * w * w)


def _error_one(key, log10_weight_decay, iterations, X_train, y_train, X_val, y_val):
    key_init, key_batches = jax.random.split(key)
    # LeCun-normal weights and zero biases; only the weights are penalised.
    is_weight = np.concatenate([np.full(n, len(s) == 2) for n, s in _LAYERS])
    fan_in = np.concatenate([np.full(n, float(s[0])) for n, s in _LAYERS])
    scale = jnp.asarray(np.where(is_weight, fan_in**-0.5, 0.0), jnp.float32)
    penalised = jnp.asarray(is_weight, jnp.float32)
    w = scale * jax.random.normal(key_init, (_OFFSETS[-1],), jnp.float32)
    weight_decay = jnp.power(jnp.float32(10.0), log10_weight_decay)

    def step(t, state):
        w, m, v = state
        rows = jax.random.randint(
            jax.random.fold_in(key_batches, t), (_BATCH,), 0, _NUM_TRAIN, jnp.int32
        )
        grad = jax.grad(_loss)(w, X_train[rows], y_train[rows], weight_decay, penalised)
        m = _BETA1 * m + (1 - _BETA1) * grad
        v = _BETA2 * v + (1 - _BETA2) * grad * grad
        count = (t + 1).astype(jnp.float32)
        m_hat = m / (1 - _BETA1**count)
        v_hat = v / (1 - _BETA2**count)
        return w - _LEARNING_RATE * m_hat / (jnp.sqrt(v_hat) + _EPSILON), m, v

    zeros = jnp.zeros_like(w)
    # A traced trip count: every iteration count shares one compiled loop.
    w, _, _ = jax.lax.fori_loop(0, iterations, step, (w, zeros, zeros))
    return jnp.sum(jnp.argmax(_logits(w, X_val), axis=1) != y_val, dtype=jnp.int32)


_errors = jax.jit(jax.vmap(_error_one, in_axes=(0, 0, 0, None, None, None, None)))


def _check_points(x: Any) -> np.ndarray:
    array = np.asarray(x)
    if not (np.issubdtype(array.dtype, np.integer) or array.dtype.kind == "f"):
        raise ValueError(f"nnet: x must be a real array, got dtype {array.dtype}")
    if not (array.ndim in (1, 2) and array.shape[-1] == 2):
        raise ValueError(f"nnet: x must have shape (2,) or (m, 2), got {array.shape}")
    array = np.atleast_2d(array.astype(np.float64))
    if not np.all(np.isfinite(array)):
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"nnet: x must be finite, but x{list(index)} = {array[index]}")
    bounds = np.array(BOUNDS)
    slack = _BOUNDS_RTOL * (bounds[:, 1] - bounds[:, 0])
    outside = (array < bounds[:, 0] - slack) | (array > bounds[:, 1] + slack)
    if outside.any():
        i, j = (int(k) for k in np.argwhere(outside)[0])
        raise ValueError(
            f"nnet: x[{i}, {j}] = {array[i, j]} is outside the bounds "
            f"{list(BOUNDS[j])} of input x{j + 1}"
        )
    return np.clip(array, bounds[:, 0], bounds[:, 1])


def validation_error(key: jax.Array, x: Any) -> float | np.ndarray:
    """Train the network at ``x`` and return its validation error (noisy).

    Compiled once per number of points m: the iteration count is a traced loop
    bound. The points of a batch train side by side, so a batch takes as long as
    its largest iteration count.

    Args:
        key: a JAX PRNG key. One point uses it as is; m points use
            ``jax.random.split(key, m)``, one key each. It draws the initial
            weights and the minibatches.
        x: (2,) or (m, 2) points ``(log10 weight decay, iterations)`` inside
            :data:`BOUNDS`; iterations are rounded to the nearest integer.

    Returns:
        The fraction of the 1497 validation digits misclassified: a float for one
        point, an (m,) float64 array for several.

    Raises:
        ValueError: for points of the wrong shape or dtype, non-finite, or outside
            :data:`BOUNDS`.
        ImportError: if scikit-learn (the ``benchmarks`` extra) is missing.

    Example:
        >>> error = validation_error(jax.random.key(0), [-4.0, 200.0])
        >>> 0.0 <= error <= 0.2
        True
        >>> error == validation_error(jax.random.key(0), [-4.0, 200.0])
        True
    """
    points = _check_points(x)
    m = points.shape[0]
    keys = jax.random.split(key, m) if np.ndim(x) == 2 else key[None]
    data = _digits()
    wrong = _errors(
        keys,
        jnp.asarray(points[:, 0], jnp.float32),
        jnp.asarray(np.rint(points[:, 1]), jnp.int32),
        *(jnp.asarray(a) for a in data),
    )
    errors = np.asarray(wrong, dtype=np.float64) / data[3].size
    return float(errors[0]) if np.ndim(x) == 1 else errors


# ---------------------------------------------------------------------------------
# The shipped evaluations and the GP ground truth fitted to them.


def _data_file(name: str) -> Any:
    return importlib.resources.files("ppbo.benchmarks").joinpath("data", name)


def load_evaluations() -> tuple[np.ndarray, np.ndarray]:
    """Return the 1000 shipped evaluations of :func:`validation_error`.

    Row i is ``validation_error(jax.random.split(jax.random.key(0), 1000)[i],
    X[i])`` for a scrambled Sobol design X over :data:`BOUNDS`; see
    ``benchmarks/make_nnet_data.py``.

    Returns:
        X (1000, 2) float64 points in the problem's units and y (1000,) float64
        validation errors.

    Example:
        >>> X, y = load_evaluations()
        >>> X.shape, y.shape
        ((1000, 2), (1000,))
    """
    with _data_file(_EVALUATIONS).open() as handle:
        table = np.loadtxt(handle, delimiter=",", skiprows=1, dtype=np.float64)
    return table[:, :2], table[:, 2]


class _GroundTruth(NamedTuple):
    """The fitted GP in the unit cube, on outputs standardised by (y_mean, y_std)."""

    X: np.ndarray  # (n, 2) evaluations in the unit cube
    alpha: np.ndarray  # (n,) K^-1 (z - mean), z the standardised outputs
    lengthscale: np.ndarray  # (2,)
    outputscale: float
    mean: float
    y_mean: float
    y_std: float


def _read_gp() -> dict[str, Any]:
    with _data_file(_GP).open() as handle:
        return json.load(handle)


def _matern52(r2: np.ndarray) -> np.ndarray:
    """Matérn-5/2 profile of squared scaled distances (R&W eq. 4.17), in place."""
    s = np.sqrt(5.0 * r2)
    r2 *= 5.0 / 3.0
    r2 += 1.0
    r2 += s
    np.negative(s, out=s)
    return np.multiply(r2, np.exp(s, out=s), out=r2)


def _sq_distances(U: np.ndarray, X: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    r2 = np.zeros((U.shape[0], X.shape[0]))
    for j, scale in enumerate(lengthscale):
        diff = np.subtract.outer(U[:, j] / scale, X[:, j] / scale)
        r2 += np.multiply(diff, diff, out=diff)
    return r2


@functools.cache
def _ground_truth() -> _GroundTruth:
    X, y = load_evaluations()
    fit = _read_gp()
    low, high = np.array(BOUNDS).T
    U = (X - low) / (high - low)
    lengthscale = np.asarray(fit["lengthscale"], dtype=np.float64)
    z = (y - fit["y_mean"]) / fit["y_std"]
    # Rasmussen and Williams (2006), Algorithm 2.1, with ppbo's diagonal jitter.
    K = fit["outputscale"] * _matern52(_sq_distances(U, U, lengthscale))
    K[np.diag_indices_from(K)] += fit["noise"] + fit["jitter"]
    alpha = cho_solve(cho_factor(K, lower=True), z - fit["mean"])
    scalars = {k: fit[k] for k in ("outputscale", "mean", "y_mean", "y_std")}
    return _GroundTruth(X=U, alpha=alpha, lengthscale=lengthscale, **scalars)


def _mean_unit(truth: _GroundTruth, U: np.ndarray) -> np.ndarray:
    """Standardised posterior mean at (m, 2) unit-cube points, in chunks."""
    out = np.empty(U.shape[0])
    for start in range(0, U.shape[0], 2048):
        r2 = _sq_distances(U[start : start + 2048], truth.X, truth.lengthscale)
        out[start : start + 2048] = _matern52(r2) @ truth.alpha
    out *= truth.outputscale
    return truth.mean + out


def _mean_and_grad_unit(truth: _GroundTruth, u: np.ndarray) -> tuple[float, np.ndarray]:
    diff = (u - truth.X) / truth.lengthscale**2  # (n, 2)
    r2 = np.sum(diff * (u - truth.X), axis=1)
    s = np.sqrt(5.0 * r2)
    weights = truth.outputscale * truth.alpha
    # d/du of (1 + s + s^2/3) exp(-s), s = sqrt(5) r: -(5/3)(1 + s) exp(-s) r dr/du,
    # and r dr/du = (u - x) / l^2.
    dk = -(5.0 / 3.0) * (1.0 + s) * np.exp(-s)
    value = truth.mean + float(_matern52(r2) @ weights)
    return value, (weights * dk) @ diff


def _objective(x: np.ndarray) -> np.ndarray:
    truth = _ground_truth()
    low, high = np.array(BOUNDS).T
    return truth.y_mean + truth.y_std * _mean_unit(truth, (x - low) / (high - low))


def _minimize_mean(truth: _GroundTruth, num_starts: int = 16) -> np.ndarray:
    """Return the unit-cube minimiser of the mean: dense Sobol search + L-BFGS-B."""
    # 4096 points: spacing about a tenth of the shorter fitted lengthscale.
    grid = qmc.Sobol(2, rng=np.random.default_rng(0)).random_base2(12)
    values = _mean_unit(truth, grid)
    separation = float(np.min(truth.lengthscale)) / 4
    starts: list[np.ndarray] = []
    for i in np.argsort(values)[:4096]:
        if all(np.max(np.abs(grid[i] - s)) > separation for s in starts):
            starts.append(grid[i])
            if len(starts) == num_starts:
                break
    best_u, best_f = grid[np.argmin(values)], float(np.min(values))
    for start in starts:
        result = minimize(
            functools.partial(_mean_and_grad_unit, truth),
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * 2,
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 1000},
        )
        u = np.clip(result.x, 0.0, 1.0)
        value = float(_mean_unit(truth, u[None])[0])
        if value < best_f:
            best_u, best_f = u, value
    return best_u


@functools.cache
def _fields() -> tuple[np.ndarray, float, float]:
    truth = _ground_truth()
    low, high = np.array(BOUNDS).T
    x_best = low + _minimize_mean(truth) * (high - low)
    # The stated optimum is the objective itself at the stated optimiser, so that
    # Problem(optimizer) reproduces it to the last bit.
    optimum = float(_objective(x_best[None])[0])
    noise_var = truth.y_std**2 * _read_gp()["noise"]
    return x_best, optimum, noise_var


def problem_fields() -> dict[str, Any]:
    """NNet's ground truth as :class:`~ppbo.benchmarks.Problem` fields, minimised.

    The objective is the posterior mean of a Matérn-5/2 GP (constant mean,
    lengthscales per input, MAP hyperparameters) fitted in the unit cube to the
    standardised 1000 shipped evaluations, mapped back to validation-error units;
    ``noise_var`` is the fitted noise variance in those units. Built once per
    process (one 1000 x 1000 Cholesky factor and the optimum search); ``get("nnet")``
    calls this.

    References:
        Hernández-Lobato et al. (2014), Section 5: the real-world benchmarks'
        ground truth is a GP fitted to evaluations of the real objective.

    Example:
        >>> fields = problem_fields()
        >>> fields["direction"], fields["bounds"]
        ('minimize', ((-6.0, -1.0), (100.0, 1000.0)))
        >>> 0.0 < fields["optimum_value"] < 0.1
        True
    """
    x_best, optimum, noise_var = _fields()
    return {
        "bounds": BOUNDS,
        "direction": "minimize",
        "optimum_value": optimum,
        "optimizers": x_best[None].copy(),
        "objective": _objective,
        "noise_var": noise_var,
    }
