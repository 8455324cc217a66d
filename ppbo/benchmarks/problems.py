"""Benchmark objectives with known optima: the "world" a Bayesian optimiser queries.

Each problem is a :class:`Problem`, a frozen value holding its box bounds in its own
units, its direction, its known optimum and optimisers, an optional Gaussian
observation noise, and a float64 NumPy objective. ``get(name, noise_var, **options)``
builds one; ``names()`` lists them. Objectives are plain NumPy, independent of the
library's JAX models, so that they stay an independent reference.

==================  =====  =========  ===========================  ====================
name                d      direction  optimum                      options
==================  =====  =========  ===========================  ====================
``branin``          2      minimize   0.397887 (3 optimisers)
``cosines``         2      maximize   1.6 at (0.3125, 0.3125)
``hartmann3``       3      minimize   -3.86278
``hartmann6``       6      minimize   -3.32237
``forrester``       1      minimize   -6.02074 at 0.757249
``ackley``          d      minimize   0 at 0                       ``d=2``
``levy``            d      minimize   0 at 1                       ``d=2``
``styblinski_tang`` d      minimize   -39.16617 d at -2.903534     ``d=2``
``rosenbrock``      d      minimize   0 at 1                       ``d=2``
``gp_sample``       d      maximize   found by dense search        ``d, lengthscale,
                                                                   outputscale, kernel,
                                                                   num_features, seed``
``nnet``            2      minimize   found by dense search
==================  =====  =========  ===========================  ====================

``gp_sample`` is a function drawn from a GP prior with random Fourier features (a
fixed function of its ``seed``), with its maximiser found by a dense Sobol search
and L-BFGS-B refinement; the PES paper's synthetic benchmark. ``nnet`` is the
validation error of a small neural network against its weight decay and training
iterations, as the posterior mean of a GP fitted to 1000 shipped evaluations (the
PES paper's real-world protocol); its default ``noise_var`` is the GP's fitted
noise. :mod:`ppbo.benchmarks.nnet` has the real, noisy training objective.

Formulas, domains and optima follow Surjanovic and Bingham's Virtual Library of
Simulation Experiments (VLSE, https://www.sfu.ca/~ssurjano/optimization.html) unless
a problem's docstring says otherwise; where the VLSE rounds an optimiser, the value
stored here was polished by a local solve (the test suite checks it is a local
optimum and that no random point beats it).

References:
    Surjanovic, S. and Bingham, D. (2013). Virtual Library of Simulation
    Experiments: Test Functions and Datasets.
    Hernández-Lobato, J. M., Hoffman, M. W. and Ghahramani, Z. (2014). Predictive
    Entropy Search for Efficient Global Optimization of Black-box Functions. NeurIPS.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.stats import qmc
from threadpoolctl import threadpool_limits

from ppbo.benchmarks import nnet

__all__ = ["Problem", "get", "names", "options"]

_DIRECTIONS = ("minimize", "maximize")
# Points this far outside the box (relative to its width) are rounding, not errors.
_BOUNDS_RTOL = 1e-9


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """A benchmark objective on a box, with its known optimum.

    Attributes:
        name: the problem's name; ``get(problem.name)`` rebuilds it (noise aside).
        bounds: (d, 2) lower and upper bounds in the problem's own units.
        direction: ``"minimize"`` or ``"maximize"``.
        optimum_value: the global optimum of the noise-free objective.
        optimizers: (k, d) the known global optimisers, in the problem's units.
        objective: noise-free objective, (m, d) float64 -> (m,) float64.
        noise_var: variance of the Gaussian noise added by ``__call__`` when a
            ``key`` is given; 0 for noise-free observations.

    Example:
        >>> problem = get("branin")
        >>> problem.direction, problem.bounds.tolist()
        ('minimize', [[-5.0, 10.0], [0.0, 15.0]])
        >>> round(problem(problem.optimizers[0]), 6)
        0.397887
        >>> problem.to_unit(np.array([-5.0, 15.0])).tolist()
        [0.0, 1.0]
    """

    name: str
    bounds: np.ndarray
    direction: str
    optimum_value: float
    optimizers: np.ndarray
    objective: Callable[[np.ndarray], np.ndarray] = dataclasses.field(repr=False)
    noise_var: float = 0.0

    def __post_init__(self) -> None:
        bounds = np.array(self.bounds, dtype=np.float64)
        if bounds.ndim != 2 or bounds.shape[1] != 2 or bounds.shape[0] < 1:
            raise ValueError(f"bounds must have shape (d, 2), got {bounds.shape}")
        if not np.all(np.isfinite(bounds)) or np.any(bounds[:, 0] >= bounds[:, 1]):
            raise ValueError(
                f"bounds must be finite with low < high, got {bounds.tolist()}"
            )
        if self.direction not in _DIRECTIONS:
            raise ValueError(
                f"direction must be one of {_DIRECTIONS}, got {self.direction!r}"
            )
        optimizers = np.array(self.optimizers, dtype=np.float64)
        if optimizers.ndim != 2 or optimizers.shape[1] != bounds.shape[0]:
            raise ValueError(
                f"optimizers must have shape (k, {bounds.shape[0]}), got "
                f"{optimizers.shape}"
            )
        noise_var = float(self.noise_var)
        if not (math.isfinite(noise_var) and noise_var >= 0.0):
            raise ValueError(f"noise_var must be finite and >= 0, got {noise_var}")
        bounds.setflags(write=False)
        optimizers.setflags(write=False)
        object.__setattr__(self, "bounds", bounds)
        object.__setattr__(self, "optimizers", optimizers)
        object.__setattr__(self, "optimum_value", float(self.optimum_value))
        object.__setattr__(self, "noise_var", noise_var)

    @property
    def dim(self) -> int:
        """The number of inputs d."""
        return self.bounds.shape[0]

    @property
    def space(self) -> list[tuple[str, float, float]]:
        """The search space as ``(name, low, high)`` per input, named x1 ... xd.

        A lightweight description for now; it becomes a ``ppbo.Space`` of
        ``ppbo.Real`` parameters when the campaign layer lands.
        """
        return [
            (f"x{i + 1}", float(low), float(high))
            for i, (low, high) in enumerate(self.bounds)
        ]

    def to_unit(self, x: Any) -> np.ndarray:
        """Map points from the problem's units to the unit cube.

        Args:
            x: (d,) or (m, d) points in the problem's units.

        Returns:
            Points of the same shape in [0, 1]^d (for points inside the bounds).

        Raises:
            ValueError: if ``x`` is not numeric and finite or has the wrong shape.
        """
        x = self._points("x", x)
        low, high = self.bounds[:, 0], self.bounds[:, 1]
        return (x - low) / (high - low)

    def from_unit(self, u: Any) -> np.ndarray:
        """Map points from the unit cube to the problem's units.

        Args:
            u: (d,) or (m, d) points in [0, 1]^d.

        Returns:
            Points of the same shape in the problem's units.

        Raises:
            ValueError: if ``u`` is not numeric and finite or has the wrong shape.
        """
        u = self._points("u", u)
        low, high = self.bounds[:, 0], self.bounds[:, 1]
        return low + u * (high - low)

    def noise_free(self, x: Any) -> float | np.ndarray:
        """Evaluate the noise-free objective.

        Args:
            x: (d,) or (m, d) points inside the bounds, in the problem's units.

        Returns:
            A float for one point, an (m,) float64 array for several.

        Raises:
            ValueError: if ``x`` is not numeric and finite, has the wrong shape, or
                lies outside the bounds.
        """
        x = self._points("x", x)
        self._check_bounds(x)
        values = np.asarray(
            self.objective(np.clip(np.atleast_2d(x), *self.bounds.T)),
            dtype=np.float64,
        )
        return float(values[0]) if x.ndim == 1 else values

    def __call__(
        self, x: Any, key: int | np.random.Generator | None = None
    ) -> float | np.ndarray:
        """Observe the objective, with Gaussian noise of variance ``noise_var``.

        Args:
            x: (d,) or (m, d) points inside the bounds, in the problem's units.
            key: ``None`` for noise-free values; otherwise a NumPy ``Generator``
                (or a seed for one) drawing the noise. Ignored when
                ``noise_var == 0``.

        Returns:
            A float for one point, an (m,) float64 array for several.

        Raises:
            ValueError: as :meth:`noise_free`.
        """
        values = self.noise_free(x)
        if key is None or self.noise_var == 0.0:
            return values
        rng = (
            key if isinstance(key, np.random.Generator) else np.random.default_rng(key)
        )
        noise = math.sqrt(self.noise_var) * rng.standard_normal(np.shape(values))
        return float(values + noise) if np.ndim(values) == 0 else values + noise

    def regret(self, x: Any) -> float | np.ndarray:
        """Return the immediate regret of ``x``: its noise-free gap to the optimum.

        ``f(x) - optimum_value`` when minimising and ``optimum_value - f(x)`` when
        maximising; non-negative up to floating-point rounding.

        Args:
            x: (d,) or (m, d) points inside the bounds, in the problem's units.

        Returns:
            A float for one point, an (m,) float64 array for several.
        """
        gap = self.noise_free(x) - self.optimum_value
        return gap if self.direction == "minimize" else -gap

    def _points(self, label: str, x: Any) -> np.ndarray:
        array = np.asarray(x)
        if not (np.issubdtype(array.dtype, np.integer) or array.dtype.kind == "f"):
            raise ValueError(
                f"{self.name}: {label} must be a real array, got dtype {array.dtype}"
            )
        d = self.dim
        if not (array.ndim in (1, 2) and array.shape[-1] == d):
            raise ValueError(
                f"{self.name}: {label} must have shape ({d},) or (m, {d}), got "
                f"shape {array.shape}"
            )
        array = array.astype(np.float64)
        bad = ~np.isfinite(array)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{self.name}: {label} must be finite, but {label}{list(index)} = "
                f"{array[index]}"
            )
        return array

    def _check_bounds(self, x: np.ndarray) -> None:
        low, high = self.bounds[:, 0], self.bounds[:, 1]
        slack = _BOUNDS_RTOL * (high - low)
        outside = (x < low - slack) | (x > high + slack)
        if outside.any():
            index = tuple(int(i) for i in np.argwhere(outside)[0])
            j = index[-1]
            raise ValueError(
                f"{self.name}: x{list(index)} = {x[index]} is outside the bounds "
                f"[{low[j]}, {high[j]}] of input x{j + 1}"
            )


# ---------------------------------------------------------------------------------
# Objectives: (m, d) float64 -> (m,) float64.


def _branin(x: np.ndarray) -> np.ndarray:
    # VLSE "Branin function", recommended parameter values.
    b, c, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 1 / (8 * np.pi)
    x1, x2 = x[:, 0], x[:, 1]
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10


def _cosines(x: np.ndarray) -> np.ndarray:
    u = 1.6 * x - 0.5
    return 1 - np.sum(u**2 - 0.3 * np.cos(3 * np.pi * u), axis=1)


_HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_HARTMANN3_A = np.array(
    [[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]],
)
_HARTMANN3_P = 1e-4 * np.array(
    [[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]],
)
_HARTMANN6_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_HARTMANN6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)


def _hartmann(x: np.ndarray, A: np.ndarray, P: np.ndarray) -> np.ndarray:
    inner = np.sum(A * (x[:, None, :] - P) ** 2, axis=-1)  # (m, 4)
    return -np.exp(-inner) @ _HARTMANN_ALPHA


def _forrester(x: np.ndarray) -> np.ndarray:
    x = x[:, 0]
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def _ackley(x: np.ndarray) -> np.ndarray:
    # a = 20, b = 0.2, c = 2 pi, the VLSE's recommended values.
    rms = np.sqrt(np.mean(x**2, axis=1))
    return (
        -20 * np.exp(-0.2 * rms) - np.exp(np.mean(np.cos(2 * np.pi * x), axis=1)) + 20
    ) + np.e


def _levy(x: np.ndarray) -> np.ndarray:
    w = 1 + (x - 1) / 4
    head = np.sin(np.pi * w[:, 0]) ** 2
    body = np.sum(
        (w[:, :-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:, :-1] + 1) ** 2), axis=1
    )
    tail = (w[:, -1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[:, -1]) ** 2)
    return head + body + tail


def _styblinski_tang(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.sum(x**4 - 16 * x**2 + 5 * x, axis=1)


def _rosenbrock(x: np.ndarray) -> np.ndarray:
    return np.sum(100 * (x[:, 1:] - x[:, :-1] ** 2) ** 2 + (x[:, :-1] - 1) ** 2, axis=1)


def _rff(
    x: np.ndarray, W: np.ndarray, b: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    # Chunked so that an (m, num_features) block stays small; sin is ~2x faster than
    # cos in NumPy, and with a uniform phase the two give the same random function.
    out = np.empty(x.shape[0])
    for start in range(0, x.shape[0], 4096):
        z = x[start : start + 4096] @ W.T
        z += b
        out[start : start + 4096] = np.sin(z, out=z) @ weights
    return out


def _rff_value_and_grad(
    x: np.ndarray, W: np.ndarray, b: np.ndarray, weights: np.ndarray
) -> tuple[float, np.ndarray]:
    z = W @ x + b
    return float(np.sin(z) @ weights), (np.cos(z) * weights) @ W


# ---------------------------------------------------------------------------------
# Problem builders: keyword options -> Problem fields (name and noise added by get).


def _require_dim(d: Any, minimum: int = 1) -> int:
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < minimum:
        raise ValueError(f"d must be an integer >= {minimum}, got {d!r}")
    return int(d)


def _build_branin() -> dict[str, Any]:
    """Branin (-Hoo) on [-5, 10] x [0, 15], minimised.

    Three global minima f = 5 / (4 pi) = 0.397887 at (-pi, 12.275), (pi, 2.275) and
    (3 pi, 2.475): the quadratic term vanishes where cos(x1) = -1.

    References:
        Dixon, L. C. W. and Szegő, G. P. (1978). The global optimization problem: an
        introduction. In Towards Global Optimisation 2. VLSE "Branin function".
    """
    return {
        "bounds": [[-5.0, 10.0], [0.0, 15.0]],
        "direction": "minimize",
        "optimum_value": 5 / (4 * np.pi),
        "optimizers": [[-np.pi, 12.275], [np.pi, 2.275], [3 * np.pi, 2.475]],
        "objective": _branin,
    }


def _build_cosines() -> dict[str, Any]:
    """Mixture of cosines on [0, 1]^2, maximised.

    f(x) = 1 - sum_i (g(u_i) - r(u_i)) with u = 1.6 x - 0.5, g(u) = u^2 and
    r(u) = 0.3 cos(3 pi u). Each term u^2 - 0.3 cos(3 pi u) >= -0.3 with equality
    only at u = 0, so the unique maximum is f = 1.6 at x = (0.3125, 0.3125).

    References:
        Anderson, B. S., Moore, A. W. and Cohn, D. (2000). A Nonparametric Approach
        to Noisy and Costly Optimization. ICML. As stated by Lizotte, D. J. (2008),
        Practical Bayesian Optimization, PhD thesis, University of Alberta, and used
        by Hernández-Lobato et al. (2014).
    """
    return {
        "bounds": [[0.0, 1.0], [0.0, 1.0]],
        "direction": "maximize",
        "optimum_value": 1.6,
        "optimizers": [[0.3125, 0.3125]],
        "objective": _cosines,
    }


def _build_hartmann3() -> dict[str, Any]:
    """Hartmann-3 on [0, 1]^3, minimised (min -3.86278).

    References:
        Dixon and Szegő (1978). VLSE "Hartmann 3-D function"; its rounded optimiser
        (0.114614, 0.555649, 0.852547) polished here by a local solve.
    """
    return {
        "bounds": [[0.0, 1.0]] * 3,
        "direction": "minimize",
        "optimum_value": -3.862779787332663,
        "optimizers": [[0.11458888122541287, 0.5556488954739371, 0.8525469842172746]],
        "objective": functools.partial(_hartmann, A=_HARTMANN3_A, P=_HARTMANN3_P),
    }


def _build_hartmann6() -> dict[str, Any]:
    """Hartmann-6 on [0, 1]^6, minimised (min -3.32237).

    References:
        Dixon and Szegő (1978). VLSE "Hartmann 6-D function"; its rounded optimiser
        (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573) polished here.
    """
    return {
        "bounds": [[0.0, 1.0]] * 6,
        "direction": "minimize",
        "optimum_value": -3.3223680114155147,
        "optimizers": [
            [
                0.20168950909365746,
                0.15001069354111374,
                0.4768739729250998,
                0.2753324275220782,
                0.3116516172395686,
                0.6573005345536702,
            ]
        ],
        "objective": functools.partial(_hartmann, A=_HARTMANN6_A, P=_HARTMANN6_P),
    }


def _build_forrester() -> dict[str, Any]:
    """Forrester et al. (2008) on [0, 1], minimised (min -6.02074 at x = 0.757249).

    f(x) = (6x - 2)^2 sin(12x - 4).

    References:
        Forrester, A., Sóbester, A. and Keane, A. (2008). Engineering Design via
        Surrogate Modelling: A Practical Guide. Wiley. VLSE "Forrester et al. (2008)
        function"; optimiser polished here.
    """
    return {
        "bounds": [[0.0, 1.0]],
        "direction": "minimize",
        "optimum_value": -6.0207400557670825,
        "optimizers": [[0.7572487578418557]],
        "objective": _forrester,
    }


def _build_ackley(d: int = 2) -> dict[str, Any]:
    """Ackley on [-32.768, 32.768]^d, minimised (min 0 at the origin).

    References:
        Ackley, D. H. (1987). A Connectionist Machine for Genetic Hillclimbing.
        Kluwer. VLSE "Ackley function" (a = 20, b = 0.2, c = 2 pi).
    """
    d = _require_dim(d)
    return {
        "bounds": [[-32.768, 32.768]] * d,
        "direction": "minimize",
        "optimum_value": 0.0,
        "optimizers": np.zeros((1, d)),
        "objective": _ackley,
    }


def _build_levy(d: int = 2) -> dict[str, Any]:
    """Levy on [-10, 10]^d, minimised (min 0 at (1, ..., 1)).

    References:
        Laguna, M. and Martí, R. (2005). Experimental testing of advanced scatter
        search designs for global optimization of multimodal functions. J. Global
        Optim. 33. VLSE "Levy function".
    """
    d = _require_dim(d)
    return {
        "bounds": [[-10.0, 10.0]] * d,
        "direction": "minimize",
        "optimum_value": 0.0,
        "optimizers": np.ones((1, d)),
        "objective": _levy,
    }


# The root of d/dx (x^4 - 16x^2 + 5x) = 4x^3 - 32x + 5 near -2.9035, and the value
# there: -39.166165703771 per input. (The VLSE's "-39.16599 d" is that value at the
# rounded optimiser taken to too few digits; it is 1.7e-4 too high per input.)
_STYBLINSKI_TANG_X = -2.903534027771177
_STYBLINSKI_TANG_F = -39.16616570377141


def _build_styblinski_tang(d: int = 2) -> dict[str, Any]:
    """Styblinski-Tang on [-5, 5]^d, minimised (min -39.16617 d at x_i = -2.903534).

    References:
        Styblinski, M. A. and Tang, T.-S. (1990). Experiments in nonconvex
        optimization: stochastic approximation with function smoothing and
        simulated annealing. Neural Networks 3. VLSE "Styblinski-Tang function".
    """
    d = _require_dim(d)
    return {
        "bounds": [[-5.0, 5.0]] * d,
        "direction": "minimize",
        "optimum_value": _STYBLINSKI_TANG_F * d,
        "optimizers": np.full((1, d), _STYBLINSKI_TANG_X),
        "objective": _styblinski_tang,
    }


def _build_rosenbrock(d: int = 2) -> dict[str, Any]:
    """Rosenbrock on [-5, 10]^d, minimised (min 0 at (1, ..., 1)).

    References:
        Rosenbrock, H. H. (1960). An automatic method for finding the greatest or
        least value of a function. The Computer Journal 3. VLSE "Rosenbrock
        function".
    """
    d = _require_dim(d, minimum=2)
    return {
        "bounds": [[-5.0, 10.0]] * d,
        "direction": "minimize",
        "optimum_value": 0.0,
        "optimizers": np.ones((1, d)),
        "objective": _rosenbrock,
    }


_RFF_KERNELS = ("se", "matern52")


def _build_gp_sample(
    d: int = 2,
    lengthscale: float = 0.1,
    outputscale: float = 1.0,
    kernel: str = "se",
    num_features: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """A function drawn from a zero-mean GP prior on [0, 1]^d, maximised.

    The draw is a random-Fourier-feature approximation,
    f(x) = sqrt(2 s / F) sum_j w_j sin(omega_j . x + b_j) with w_j ~ N(0, 1),
    b_j ~ U(0, 2 pi) and omega_j from the kernel's spectral density: N(0, I / l^2)
    for the squared-exponential kernel, a multivariate Student-t with 5 degrees of
    freedom and scale 1 / l for Matérn-5/2. Over draws, Cov(f(x), f(x')) is
    exactly s k(x, x'); given its frequencies, a draw is a sample of the rank-F GP
    that tends to the exact one as F grows. Everything is a fixed function of
    ``seed``, independent of ppbo's models. The maximiser comes from a dense
    search: a scrambled Sobol set (2^14 points for d <= 2, up to 2^17 for larger
    d), whose best well-separated points start L-BFGS-B runs with the exact
    gradient. For
    lengthscales much shorter than the Sobol spacing (d >= 4 with l = 0.1, say)
    the search may miss the global maximum.

    Args:
        d: input dimension.
        lengthscale: the kernel's lengthscale l (shared by all inputs).
        outputscale: the kernel's variance s.
        kernel: ``"se"`` or ``"matern52"``.
        num_features: number of random features F.
        seed: integer seed of the draw.

    References:
        Rahimi, A. and Recht, B. (2007). Random Features for Large-Scale Kernel
        Machines. NeurIPS.
        Hernández-Lobato et al. (2014), Section 5 and Appendix A.
    """
    d = _require_dim(d)
    lengthscale, outputscale = float(lengthscale), float(outputscale)
    if not (math.isfinite(lengthscale) and lengthscale > 0):
        raise ValueError(f"lengthscale must be finite and > 0, got {lengthscale}")
    if not (math.isfinite(outputscale) and outputscale > 0):
        raise ValueError(f"outputscale must be finite and > 0, got {outputscale}")
    if kernel not in _RFF_KERNELS:
        raise ValueError(f"kernel must be one of {_RFF_KERNELS}, got {kernel!r}")
    if isinstance(num_features, bool) or not isinstance(num_features, int | np.integer):
        raise ValueError(f"num_features must be an integer, got {num_features!r}")
    if num_features < 1:
        raise ValueError(f"num_features must be >= 1, got {num_features}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    W, b, weights = _rff_draw(d, lengthscale, outputscale, kernel, num_features, seed)
    objective = functools.partial(_rff, W=W, b=b, weights=weights)
    # OpenBLAS threads spinning after the big products slow the many small L-BFGS-B
    # steps several-fold.
    with threadpool_limits(limits=1, user_api="blas"):
        x_best, f_best = _maximize_rff(
            W, b, weights, lengthscale, np.random.default_rng([int(seed), 1])
        )
    return {
        "bounds": [[0.0, 1.0]] * d,
        "direction": "maximize",
        "optimum_value": f_best,
        "optimizers": x_best[None],
        "objective": objective,
    }


def _rff_draw(
    d: int,
    lengthscale: float,
    outputscale: float,
    kernel: str,
    num_features: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return frequencies (F, d), phases (F,) and weights (F,) of one draw."""
    rng = np.random.default_rng(int(seed))
    W = rng.standard_normal((num_features, d)) / lengthscale
    if kernel == "matern52":
        # Student-t with 2 nu = 5 degrees of freedom: a Gaussian over sqrt(chi2_5 / 5).
        W = W * np.sqrt(5.0 / rng.chisquare(5.0, size=(num_features, 1)))
    b = rng.uniform(0.0, 2 * np.pi, num_features)
    weights = np.sqrt(2 * outputscale / num_features) * rng.standard_normal(
        num_features
    )
    return W, b, weights


def _maximize_rff(
    W: np.ndarray,
    b: np.ndarray,
    weights: np.ndarray,
    lengthscale: float,
    rng: np.random.Generator,
    num_starts: int = 16,
) -> tuple[np.ndarray, float]:
    d = W.shape[1]
    num_grid = 2 ** min(12 + d, 17) if d > 2 else 2**14
    grid = qmc.Sobol(d, rng=rng).random(num_grid)
    values = _rff(grid, W, b, weights)
    # Starts from distinct bumps: the best grid points at least l / 4 apart, so that
    # near-ties between separate maxima are all refined.
    starts: list[np.ndarray] = []
    for i in np.argsort(-values)[:4096]:
        if all(np.max(np.abs(grid[i] - s)) > lengthscale / 4 for s in starts):
            starts.append(grid[i])
            if len(starts) == num_starts:
                break
    best_x, best_f = grid[np.argmax(values)], float(np.max(values))
    for start in starts:
        result = minimize(
            lambda x: tuple(-v for v in _rff_value_and_grad(x, W, b, weights)),
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * d,
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 1000},
        )
        x = np.clip(result.x, 0.0, 1.0)
        value = float(_rff(x[None], W, b, weights)[0])
        if value > best_f:
            best_x, best_f = x, value
    return best_x, best_f


_BUILDERS: Mapping[str, Callable[..., dict[str, Any]]] = types.MappingProxyType(
    {
        "branin": _build_branin,
        "cosines": _build_cosines,
        "hartmann3": _build_hartmann3,
        "hartmann6": _build_hartmann6,
        "forrester": _build_forrester,
        "ackley": _build_ackley,
        "levy": _build_levy,
        "styblinski_tang": _build_styblinski_tang,
        "rosenbrock": _build_rosenbrock,
        "gp_sample": _build_gp_sample,
        "nnet": nnet.problem_fields,
    }
)


# ---------------------------------------------------------------------------------
# Public entry points.


def names() -> list[str]:
    """Return the names of the benchmark problems ``get`` knows.

    Example:
        >>> names()[:3]
        ['branin', 'cosines', 'hartmann3']
    """
    return list(_BUILDERS)


def options(name: str) -> dict[str, Any]:
    """Return the options a problem accepts, with their defaults.

    Args:
        name: a problem name from :func:`names`.

    Returns:
        A dict option -> default value (empty for fixed-size problems).

    Raises:
        ValueError: if ``name`` is unknown.

    Example:
        >>> options("ackley")
        {'d': 2}
        >>> options("branin")
        {}
    """
    builder = _builder(name)
    return {p.name: p.default for p in inspect.signature(builder).parameters.values()}


def get(name: str, noise_var: float | None = None, **kwargs: Any) -> Problem:
    """Build a benchmark problem.

    Options may be given as keywords or inside the name, as in ``"ackley:d=5"`` or
    ``"gp_sample:d=2,lengthscale=0.2,seed=3"`` (integers, floats and words are
    recognised), so that a problem is named by one string on a command line. A
    problem's ``name`` lists its non-default options (and any ``seed`` given) in
    that form, so ``get(problem.name)`` rebuilds it.

    Args:
        name: a name from :func:`names`, optionally with ``:option=value,...``.
        noise_var: variance of the Gaussian observation noise (0 for none; the
            PES paper uses 1e-3). ``None``: the problem's own, which is 0 except
            for ``nnet``.
        **kwargs: the problem's options; see :func:`options`.

    Returns:
        The :class:`Problem`.

    Raises:
        ValueError: for an unknown name, an unknown or repeated option, or a bad
            option value.

    Example:
        >>> problem = get("ackley", d=3, noise_var=1e-3)
        >>> problem.name, problem.dim, problem.noise_var
        ('ackley:d=3', 3, 0.001)
        >>> get("ackley:d=3").optimum_value
        0.0
    """
    if not isinstance(name, str):
        raise ValueError(f"a problem name must be a string, got {name!r}")
    base, _, option_text = name.partition(":")
    base = base.strip()
    parsed = _parse_options(name, option_text)
    repeated = sorted(set(parsed) & set(kwargs))
    if repeated:
        raise ValueError(f"option(s) {repeated} given both in {name!r} and as keywords")
    chosen = {**parsed, **kwargs}
    defaults = options(base)
    unknown = sorted(set(chosen) - set(defaults))
    if unknown:
        accepted = ", ".join(defaults) if defaults else "none"
        raise ValueError(
            f"unknown option(s) {unknown} for problem {base!r}; it accepts: {accepted}"
        )
    fields = _BUILDERS[base](**chosen)
    own_noise_var = fields.pop("noise_var", 0.0)
    label = ",".join(
        f"{key}={value}"
        for key, value in sorted(chosen.items())
        if key == "seed" or not _same(value, defaults[key])
    )
    return Problem(
        name=f"{base}:{label}" if label else base,
        noise_var=own_noise_var if noise_var is None else noise_var,
        **fields,
    )


def _builder(name: str) -> Callable[..., dict[str, Any]]:
    try:
        return _BUILDERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown benchmark problem {name!r}; choose one of {', '.join(_BUILDERS)}"
        ) from None


def _parse_options(name: str, text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    if not text.strip():
        return parsed
    for item in text.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not (sep and key and value):
            raise ValueError(
                f"cannot read option {item.strip()!r} in {name!r}; write "
                f"'name:option=value,option=value'"
            )
        if key in parsed:
            raise ValueError(f"option {key!r} repeated in {name!r}")
        parsed[key] = _parse_value(value)
    return parsed


def _parse_value(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _same(value: Any, default: Any) -> bool:
    try:
        return bool(value == default)
    except (TypeError, ValueError):  # e.g. an array compared with a number
        return False
