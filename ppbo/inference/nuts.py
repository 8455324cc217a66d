"""The No-U-Turn Sampler over a surrogate's hyperparameters.

Uses NumPyro's NUTS kernel (Hoffman and Gelman 2014, "The No-U-Turn Sampler:
adaptively setting path lengths in Hamiltonian Monte Carlo", JMLR 15) with its
windowed step-size and mass-matrix adaptation, driven by ppbo's compiled driver so a
refit in the same data bucket reuses the compiled code. A refit can start from the
previous posterior's last positions, step sizes and inverse mass matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from numpyro.infer import NUTS as _NumPyroNUTS

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["NUTS"]


def _record(state) -> dict:
    steps = state.num_steps
    return {
        "diverging": state.diverging,
        "n_steps": steps,
        "tree_depth": jnp.ceil(jnp.log2(steps + 1.0)).astype(jnp.int32),
        "energy": state.energy,
        "step_size": state.adapt_state.step_size,
        "acceptance_rate": state.accept_prob,
        "lp": -state.potential_energy,
    }


@dataclass(frozen=True)
class _NutsKernel:
    """Builds the NumPyro kernel; hashed as the compiled driver's static argument,
    so configs that differ only in fields the sampler ignores share compiled code."""

    dense_mass: bool
    max_tree_depth: int
    target_accept_prob: float
    adapt_mass_matrix: bool = True

    def __call__(self, model, warm):
        return _NumPyroNUTS(
            model,
            step_size=warm["step_size"],
            inverse_mass_matrix=warm["inverse_mass_matrix"],
            adapt_mass_matrix=self.adapt_mass_matrix,
            dense_mass=self.dense_mass,
            max_tree_depth=self.max_tree_depth,
            target_accept_prob=self.target_accept_prob,
        )


def _draws_inverse_mass(draws, dense: bool):
    # The posterior's (co)variance in unconstrained space from one chain's draws,
    # shrunk towards 1e-3 as Stan and NumPyro regularise their windowed estimates
    # (Stan Reference Manual, "HMC algorithm parameters": n / (n + 5) * estimate
    # + 1e-3 * 5 / (n + 5)).
    n = draws.shape[0]
    shrink = n / (n + 5.0)
    if dense:
        centred = draws - draws.mean(0)
        cov = centred.T @ centred / max(n - 1, 1)
        return shrink * cov + 1e-3 * (1.0 - shrink) * jnp.eye(draws.shape[1])
    return shrink * draws.var(0, ddof=1) + 1e-3 * (1.0 - shrink)


def _warm_of(dense: bool):
    def warm_of(last, draws) -> dict:
        # NumPyro returns the inverse mass matrix keyed by the tuple of sorted site
        # names (one block here); it accepts the bare array back and keys it the
        # same. With enough draws, their own (co)variance replaces the matrix
        # adapted during warm-up: it describes the posterior the next, warm-started
        # fit starts from better than the estimate of the warm-up's last window.
        (adapted,) = last.adapt_state.inverse_mass_matrix.values()
        inverse_mass_matrix = adapted
        if draws.shape[1] >= _MIN_DRAWS_FOR_MASS:
            inverse_mass_matrix = jax.vmap(lambda d: _draws_inverse_mass(d, dense))(
                draws
            )
        return {
            "step_size": last.adapt_state.step_size,
            "inverse_mass_matrix": inverse_mass_matrix,
        }

    return warm_of


#: Draws per chain from which a warm start takes the inverse mass matrix from the
#: previous posterior's draws rather than from its adaptation.
_MIN_DRAWS_FOR_MASS = 32


@dataclass(frozen=True)
class NUTS:
    """NUTS with windowed adaptation; a frozen config with one method, :meth:`fit`.

    Args:
        num_warmup: adaptation iterations per chain (discarded).
        num_samples: iterations per chain after warm-up.
        thinning: keep every ``thinning``-th iteration (``num_samples // thinning``
            draws per chain).
        num_chains: chains, vmapped in one compiled function.
        dense_mass: adapt a dense instead of a diagonal inverse mass matrix.
        max_tree_depth: limit on the doubling depth (at most 2**depth - 1 leapfrog
            steps per iteration).
        target_accept_prob: target of the dual-averaging step-size adaptation.
        warm_start: start from ``init``'s last positions, step sizes and inverse
            mass matrices when :meth:`fit` is given a compatible previous posterior.
            The inverse mass matrix of a warm start is the (regularised) variance
            of the previous posterior's unconstrained draws.
        refit_warmup: warm-up iterations of a warm-started fit, which then adapts
            only the step size and keeps the inverse mass matrix it starts from;
            None: a warm-started fit runs the full ``num_warmup`` with windowed
            mass-matrix adaptation, as a cold one does.

    The defaults (64 draws; 64 warm-up iterations for a warm-started refit) were
    chosen by effective samples per second and by regret (benchmarks/README.md,
    "fit_speed.py"): with the mass matrix from the previous draws a refit at
    n = 50 (Hartmann-6) runs 13 leapfrog steps a draw, takes 0.42 s instead of
    0.97 s and gives twice the effective samples per second; 32 warm-up
    iterations left the step size too large (divergences at n = 20 to 100). A
    campaign's acquisition averages over 16 evenly spaced draws
    (:data:`ppbo.campaign.step.ACQUISITION_SAMPLES`), as BoTorch's fully
    Bayesian GP keeps 16 of 256 NUTS draws; 64 draws give those 16 from a chain
    four times as long, at half the refit time of 128.

    Example:
        >>> import jax
        >>> inference = NUTS(num_warmup=10, num_samples=20)  # tiny, for the example
        >>> fitted = inference.fit(jax.random.key(0), posterior.surrogate, data)
        >>> fitted.num_samples, fitted.samples["lengthscale"].shape
        (20, (20, 2))

    References:
        Hoffman, M. D. and Gelman, A. (2014). The No-U-Turn Sampler. JMLR 15.
    """

    num_warmup: int = 256
    num_samples: int = 64
    thinning: int = 1
    num_chains: int = 1
    dense_mass: bool = False
    max_tree_depth: int = 8
    target_accept_prob: float = 0.8
    warm_start: bool = True
    refit_warmup: int | None = 64

    def __post_init__(self) -> None:
        _mcmc.check_schedule(self)
        if self.refit_warmup is not None and (
            not isinstance(self.refit_warmup, int)
            or isinstance(self.refit_warmup, bool)
            or self.refit_warmup < 0
        ):
            raise ValueError(
                "refit_warmup must be None or an integer >= 0, got "
                f"{self.refit_warmup!r}"
            )
        if not 1 <= int(self.max_tree_depth) <= 15:
            raise ValueError(
                f"max_tree_depth must be in [1, 15], got {self.max_tree_depth!r}"
            )
        if not 0.0 < float(self.target_accept_prob) < 1.0:
            raise ValueError(
                f"target_accept_prob must be in (0, 1), got {self.target_accept_prob!r}"
            )

    def _kernel_factory(self, adapt_mass_matrix: bool = True) -> _NutsKernel:
        return _NutsKernel(
            bool(self.dense_mass),
            int(self.max_tree_depth),
            float(self.target_accept_prob),
            adapt_mass_matrix,
        )

    def _cold_warm(self, size: int) -> dict:
        eye = jnp.eye(size) if self.dense_mass else jnp.ones(size)
        return {
            "step_size": jnp.ones(self.num_chains),
            "inverse_mass_matrix": jnp.broadcast_to(eye, (self.num_chains, *eye.shape)),
        }

    def fit(
        self,
        key: jax.Array,
        surrogate: Surrogate,
        data: Dataset,
        *,
        init: Posterior | None = None,
    ) -> Posterior:
        """Sample the hyperparameter posterior of ``surrogate`` given ``data``.

        Args:
            key: PRNG key.
            surrogate: the model to fit.
            data: observations.
            init: a previous posterior of the same surrogate to warm-start from
                (ignored when ``warm_start`` is False or it is incompatible).

        Returns:
            A :class:`~ppbo.Posterior` with ``num_chains * (num_samples //
            thinning)`` samples and per-draw NUTS statistics.

        Example:
            >>> config = NUTS(num_warmup=10, num_samples=20)
            >>> config.fit(key, posterior.surrogate, data).method
            'NUTS'
        """
        posterior = _mcmc.fit_mcmc(
            self,
            key,
            surrogate,
            data,
            init,
            cold_warm=self._cold_warm,
            warm_of=_warm_of(bool(self.dense_mass)),
            make_kernel=self._kernel_factory(),
            record=_record,
            method="NUTS",
            refit=None
            if self.refit_warmup is None
            else (self._kernel_factory(adapt_mass_matrix=False), self.refit_warmup),
        )
        depth = posterior.sample_stats["tree_depth"]
        posterior.sample_stats["max_tree_depth"] = jnp.full(
            depth.shape, self.max_tree_depth, jnp.int32
        )
        return posterior
