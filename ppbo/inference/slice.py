"""Univariate slice sampling with stepping out and shrinkage, as a NumPyro kernel.

One MCMC step is a systematic sweep over the unconstrained coordinates; each
coordinate gets one univariate slice update: the slice level is drawn below the
current density, an interval of width ``w`` is placed at random around the current
value and stepped out (Neal 2003, Fig. 3), then shrunk towards the current value
until a uniform draw from it lies in the slice (Neal 2003, Fig. 5). Every loop is a
bounded ``lax.while_loop`` or ``lax.fori_loop``, so a step traces once and runs
under ``jit``, ``vmap`` and ``scan``.

During warm-up each coordinate's width is adapted so that step-outs and shrinks
balance (the criterion of Tibbits et al. 2014), by a Robbins–Monro recursion on the
log width; widths are frozen afterwards, so the post-warm-up draws form a
time-homogeneous Markov chain that leaves the target invariant.

References:
    Neal, R. M. (2003). Slice sampling. *The Annals of Statistics* 31(3), 705–767.

    Tibbits, M. M., Groendyke, C., Haran, M. and Liechty, J. C. (2014). Automated
    factor slice sampling. *Journal of Computational and Graphical Statistics*
    23(2), 543–563.

    Robbins, H. and Monro, S. (1951). A stochastic approximation method. *The
    Annals of Mathematical Statistics* 22(3), 400–407.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax, random
from jax.flatten_util import ravel_pytree
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import init_to_uniform
from numpyro.util import identity

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["Slice", "SliceKernel", "SliceState"]

# Robbins–Monro gain gamma_t = _GAIN / (t + 1) ** _DECAY on the log width. Any decay
# in (1/2, 1] satisfies the Robbins–Monro conditions; 0.6 keeps early warm-up moves
# large: the first sweep can widen a bracket by up to e^{0.5 * max_steps_out}.
_GAIN = 0.5
_DECAY = 0.6
# Keeps the log-width recursion finite when the target is flat or degenerate.
_MIN_WIDTH = 1e-10
_MAX_WIDTH = 1e10


class SliceState(NamedTuple):
    """State of one chain of :class:`SliceKernel`.

    Attributes:
        i: iteration counter; adaptation runs while ``i < num_warmup``.
        z: unconstrained latent values (a pytree, a dict of sites for a model).
        potential_energy: potential energy (negative log density) at ``z``; ``inf``
            if ``z`` lies outside the support.
        width: initial bracket width per unconstrained coordinate, shape (p,) for
            ``p`` flattened coordinates.
        num_evals: potential evaluations in the last sweep.
        num_steps_out: step-outs (Neal's Fig. 3 expansions) in the last sweep.
        num_shrinks: rejected shrinkage proposals (Neal's Fig. 5) in the last sweep.
        num_warmup: number of warm-up iterations, during which widths adapt.
        rng_key: PRNG key for the next sweep.
    """

    i: jax.Array
    z: Any
    potential_energy: jax.Array
    width: jax.Array
    num_evals: jax.Array
    num_steps_out: jax.Array
    num_shrinks: jax.Array
    num_warmup: jax.Array
    rng_key: jax.Array


def _as_log_density(
    potential_fn: Callable[[Any], jax.Array], unravel: Callable[[jax.Array], Any]
) -> Callable[[jax.Array], jax.Array]:
    def log_density(x):
        pe = potential_fn(unravel(x))
        # NaN or infinite potentials lie outside every slice: -inf is never above
        # a slice level, so such points are never accepted nor stepped over.
        return jnp.where(jnp.isfinite(pe), -pe, -jnp.inf)

    return log_density


def _update_coordinate(log_density, x, log_f, k, w, key, max_steps_out, max_shrinks):
    """One univariate slice update of coordinate ``k`` of the flat position ``x``.

    Returns:
        ``(x, log_f, steps_out, shrinks, evals)``: the new position and its log
        density, and the counts of step-outs, rejected proposals and evaluations.
    """
    dtype = x.dtype
    key_level, key_place, key_split, key_shrink = random.split(key, 4)
    x0 = x[k]

    def log_density_at(value):
        return log_density(x.at[k].set(value))

    # Slice level in log space: log y = log f(x0) - E with E ~ Exp(1) (Neal, Sec. 4).
    log_y = log_f - random.exponential(key_level, dtype=dtype)

    # Fig. 3: place [L, R] of width w at random around x0, then step out at most
    # m - 1 = max_steps_out times, split at random between the two ends.
    left = x0 - w * random.uniform(key_place, dtype=dtype)
    right = left + w
    m = max_steps_out + 1
    budget_left = jnp.minimum(
        jnp.floor(m * random.uniform(key_split, dtype=dtype)).astype(jnp.int32),
        max_steps_out,
    )
    budget_right = max_steps_out - budget_left

    def step_out(end, budget, direction):
        def cond(carry):
            return carry[3]

        def body(carry):
            end, budget, evals, _ = carry
            inside = log_y < log_density_at(end)
            end = jnp.where(inside, end + direction * w, end)
            budget = budget - inside.astype(jnp.int32)
            return end, budget, evals + 1, inside & (budget > 0)

        init = (end, budget, jnp.int32(0), budget > 0)
        end, budget_left_over, evals, _ = lax.while_loop(cond, body, init)
        return end, budget - budget_left_over, evals

    left, steps_left, evals_left = step_out(left, budget_left, -1.0)
    right, steps_right, evals_right = step_out(right, budget_right, 1.0)

    # Fig. 5: draw uniformly from [L, R], shrinking the side of each rejected draw
    # towards x0. Truncating after max_shrinks draws (then keeping x0) preserves
    # reversibility: the forward and reverse moves need the same rejections.
    def shrink_cond(carry):
        return ~carry[4] & (carry[5] < max_shrinks)

    def shrink_body(carry):
        left, right, x1, log_f1, _, n = carry
        u = random.uniform(random.fold_in(key_shrink, n), dtype=dtype)
        proposal = left + u * (right - left)
        log_f_proposal = log_density_at(proposal)
        accepted = log_y < log_f_proposal
        left = jnp.where(~accepted & (proposal < x0), proposal, left)
        right = jnp.where(~accepted & (proposal >= x0), proposal, right)
        x1 = jnp.where(accepted, proposal, x1)
        log_f1 = jnp.where(accepted, log_f_proposal, log_f1)
        return left, right, x1, log_f1, accepted, n + 1

    init = (left, right, x0, log_f, jnp.bool_(False), jnp.int32(0))
    _, _, x1, log_f1, accepted, draws = lax.while_loop(shrink_cond, shrink_body, init)
    shrinks = draws - accepted.astype(jnp.int32)
    evals = evals_left + evals_right + draws
    return x.at[k].set(x1), log_f1, steps_left + steps_right, shrinks, evals


def _sweep(log_density, x, log_f, width, key, max_steps_out, max_shrinks):
    """Update every coordinate of ``x`` once, in order (a systematic-scan sweep)."""
    num_coords = x.shape[0]

    def body(k, carry):
        x, log_f, steps_out, shrinks, evals = carry
        x, log_f, n_out, n_shrink, n_eval = _update_coordinate(
            log_density,
            x,
            log_f,
            k,
            width[k],
            random.fold_in(key, k),
            max_steps_out,
            max_shrinks,
        )
        steps_out = steps_out.at[k].set(n_out)
        shrinks = shrinks.at[k].set(n_shrink)
        return x, log_f, steps_out, shrinks, evals + n_eval

    counts = jnp.zeros(num_coords, dtype=jnp.int32)
    init = (x, log_f, counts, counts, jnp.int32(0))
    return lax.fori_loop(0, num_coords, body, init)


def _adapted_width(width, steps_out, shrinks, t):
    """Robbins–Monro step on log widths towards E[step-outs] = E[shrinks].

    Tibbits et al. (2014) tune the width so that expansions make up half of all
    expansions plus contractions; too narrow a width shows as many step-outs, too
    wide a width as many shrinks, so ``steps_out - shrinks`` has mean zero at the
    target and moves the log width in the right direction.
    """
    gain = _GAIN / (t + 1.0) ** _DECAY
    log_width = jnp.log(width) + gain * (steps_out - shrinks).astype(width.dtype)
    return jnp.clip(jnp.exp(log_width), _MIN_WIDTH, _MAX_WIDTH)


class SliceKernel(MCMCKernel):
    r"""Univariate slice sampler with stepping out and shrinkage (Neal 2003).

    One call to :meth:`sample` is one sweep: every unconstrained coordinate in
    turn gets one slice update with the stepping-out procedure of Neal (2003,
    Fig. 3) and the shrinkage procedure of Neal (2003, Fig. 5). Points whose
    potential energy is NaN or infinite are outside every slice and never
    accepted. No gradients are needed.

    While ``i < num_warmup`` each coordinate's width ``w`` adapts by

    .. math::

        \log w_{t+1} = \log w_t + \gamma_t\,(e_t - c_t),
        \qquad \gamma_t = 0.5\,(t + 1)^{-0.6},

    where ``e_t`` and ``c_t`` are that coordinate's step-outs and rejected
    shrinkage proposals in sweep ``t``: a Robbins–Monro recursion whose fixed
    point balances expansions and contractions, the tuning criterion of Tibbits
    et al. (2014). After warm-up the widths are frozen, so the kernel is a fixed
    reversible update per coordinate and the sweep leaves the target invariant.

    The kernel works with :class:`numpyro.infer.MCMC` like ``NUTS`` does
    (sequential and vectorized chains, ``thinning``, ``print_summary``), and can
    also be driven by hand under ``jax.jit`` with traced model arguments:
    :meth:`init` and :meth:`sample` are traceable and every loop is bounded.

    Args:
        model: NumPyro model; exactly one of ``model`` and ``potential_fn``.
        potential_fn: potential energy (negative log density) of a pytree of
            unconstrained values; then :meth:`init` needs ``init_params``.
        width: initial bracket width, a scalar or one per flattened unconstrained
            coordinate (shape (p,)); may be a traced array, e.g. the adapted
            ``state.width`` of an earlier run.
        max_steps_out: most step-outs per coordinate update (Neal's ``m - 1``);
            the stepped-out interval is at most ``(max_steps_out + 1) * width``
            wide. ``0`` disables stepping out.
        max_shrinks: most shrinkage proposals per coordinate update; if all are
            rejected the coordinate keeps its value (the truncation is symmetric,
            so the update stays reversible).
        adapt_width: whether to adapt the widths during warm-up.
        init_strategy: per-site initialisation strategy for a ``model``, as in
            :class:`numpyro.infer.NUTS`.

    Raises:
        ValueError: if not exactly one of ``model`` and ``potential_fn`` is given,
            or a setting is out of range.

    References:
        Neal, R. M. (2003). Slice sampling. *The Annals of Statistics* 31(3),
        705–767.

        Tibbits, M. M., Groendyke, C., Haran, M. and Liechty, J. C. (2014).
        Automated factor slice sampling. *Journal of Computational and Graphical
        Statistics* 23(2), 543–563.

    Example:
        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
        >>> mcmc = MCMC(
        ...     SliceKernel(model), num_warmup=200, num_samples=500, progress_bar=False
        ... )
        >>> mcmc.run(jax.random.key(0), jax.numpy.array([0.9, 1.1, 1.3]))
        >>> mcmc.get_samples()["mu"].shape
        (500,)
    """

    def __init__(
        self,
        model: Callable[..., Any] | None = None,
        potential_fn: Callable[[Any], jax.Array] | None = None,
        *,
        width: float | jax.Array = 1.0,
        max_steps_out: int = 16,
        max_shrinks: int = 64,
        adapt_width: bool = True,
        init_strategy: Callable[..., Any] = init_to_uniform,
    ) -> None:
        if (model is None) == (potential_fn is None):
            raise ValueError("Give exactly one of `model` and `potential_fn`.")
        if isinstance(width, int | float) and not width > 0:
            raise ValueError(f"`width` must be positive, got {width}.")
        if not (isinstance(max_steps_out, int) and max_steps_out >= 0):
            raise ValueError(
                f"`max_steps_out` must be a non-negative int, got {max_steps_out!r}."
            )
        if not (isinstance(max_shrinks, int) and max_shrinks >= 1):
            raise ValueError(
                f"`max_shrinks` must be a positive int, got {max_shrinks!r}."
            )
        self._model = model
        self._potential_fn = potential_fn
        self._width = width
        self._max_steps_out = max_steps_out
        self._max_shrinks = max_shrinks
        self._adapt_width = adapt_width
        self._init_strategy = init_strategy
        # Built from the model by `init`, as NUTS does; they depend on the model's
        # structure only and take the model arguments when called.
        self._potential_fn_gen: Callable[..., Callable] | None = None
        self._postprocess_fn_gen: Callable[..., Callable] | None = None

    @property
    def model(self) -> Callable[..., Any] | None:
        """The NumPyro model, or ``None`` in potential-function mode."""
        return self._model

    @property
    def sample_field(self) -> str:
        """Name of the state field holding the (unconstrained) sample."""
        return "z"

    @property
    def default_fields(self) -> tuple[str, ...]:
        """State fields :class:`numpyro.infer.MCMC` collects by default."""
        return ("z", "num_evals")

    def get_diagnostics_str(self, state: SliceState) -> str:
        """Progress-bar text: potential evaluations in the last sweep."""
        return f"{int(state.num_evals)} evals/sweep"

    def get_potential_fn(
        self, model_args: tuple = (), model_kwargs: dict | None = None
    ) -> Callable[[Any], jax.Array]:
        """Potential energy of unconstrained values for the given model arguments.

        Args:
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            ``z -> potential energy`` (a scalar).

        Raises:
            RuntimeError: for a model-based kernel before :meth:`init`.
        """
        if self._potential_fn is not None:
            return self._potential_fn
        if self._potential_fn_gen is None:
            raise RuntimeError("Call `init` before using the kernel's potential.")
        model_kwargs = {} if model_kwargs is None else model_kwargs
        return self._potential_fn_gen(*model_args, **model_kwargs)

    def postprocess_fn(
        self, model_args: tuple, model_kwargs: dict | None
    ) -> Callable[[Any], Any]:
        """Map unconstrained ``z`` to constrained sites plus deterministic sites.

        Args:
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            ``z -> dict of site values`` for one sample (vmap it over samples); the
            identity in potential-function mode.

        Raises:
            RuntimeError: for a model-based kernel before :meth:`init`.
        """
        if self._model is None:
            return identity
        if self._postprocess_fn_gen is None:
            raise RuntimeError("Call `init` before `postprocess_fn`.")
        model_kwargs = {} if model_kwargs is None else model_kwargs
        return self._postprocess_fn_gen(*model_args, **model_kwargs)

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Any = None,
        model_args: tuple = (),
        model_kwargs: dict | None = None,
    ) -> SliceState:
        """Build the initial state, one chain per key.

        Args:
            rng_key: a PRNG key, or a batch of keys (one per vectorized chain).
            num_warmup: number of warm-up iterations during which widths adapt.
            init_params: unconstrained initial values (a pytree with a leading chain
                axis when ``rng_key`` is batched) where the potential is finite.
                Required with ``potential_fn``; for a model, drawn with
                ``init_strategy`` when ``None``.
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            The initial :class:`SliceState` (batched like ``rng_key``).

        Raises:
            ValueError: if ``potential_fn`` is used without ``init_params``.
        """
        model_kwargs = {} if model_kwargs is None else model_kwargs
        rng_key, init_params, info, single_chain = _mcmc.initialize_chains(
            rng_key,
            self._model,
            self._init_strategy,
            init_params,
            model_args,
            model_kwargs,
        )
        if info is not None:
            self._potential_fn_gen = info.potential_fn
            self._postprocess_fn_gen = info.postprocess_fn
        init_chain = partial(
            self._init_chain,
            potential_fn=self.get_potential_fn(model_args, model_kwargs),
            num_warmup=num_warmup,
        )
        if single_chain:
            return init_chain(init_params, rng_key)
        return jax.vmap(init_chain)(init_params, rng_key)

    def _init_chain(self, z, rng_key, *, potential_fn, num_warmup) -> SliceState:
        # Slice updates move coordinates continuously; integer leaves would be
        # truncated by `unravel`.
        z = jax.tree.map(lambda v: jnp.asarray(v, jnp.result_type(v, float)), z)
        z_flat, unravel = ravel_pytree(z)
        log_f = _as_log_density(potential_fn, unravel)(z_flat)
        width = jnp.broadcast_to(jnp.asarray(self._width, z_flat.dtype), z_flat.shape)
        zero = jnp.int32(0)
        return SliceState(
            i=zero,
            z=z,
            potential_energy=-log_f,
            width=width,
            num_evals=zero,
            num_steps_out=zero,
            num_shrinks=zero,
            num_warmup=jnp.asarray(num_warmup, jnp.int32),
            rng_key=rng_key,
        )

    def sample(
        self, state: SliceState, model_args: tuple, model_kwargs: dict | None
    ) -> SliceState:
        """Run one sweep of univariate slice updates over all coordinates.

        Args:
            state: current state (batched for vectorized chains).
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            The next :class:`SliceState`.
        """
        sample_chain = partial(
            self._sample_chain,
            potential_fn=self.get_potential_fn(model_args, model_kwargs),
        )
        # A leading chain axis on the counter marks `MCMC`'s vectorized chains.
        if jnp.ndim(state.i) == 0:
            return sample_chain(state)
        return jax.vmap(sample_chain)(state)

    def _sample_chain(self, state: SliceState, *, potential_fn) -> SliceState:
        z_flat, unravel = ravel_pytree(state.z)
        log_density = _as_log_density(potential_fn, unravel)
        rng_key, key_sweep = random.split(state.rng_key)
        log_f = jnp.where(
            jnp.isfinite(state.potential_energy), -state.potential_energy, -jnp.inf
        )
        x, log_f, steps_out, shrinks, evals = _sweep(
            log_density,
            z_flat,
            log_f,
            state.width,
            key_sweep,
            self._max_steps_out,
            self._max_shrinks,
        )
        width = state.width
        if self._adapt_width:
            width = jnp.where(
                state.i < state.num_warmup,
                _adapted_width(width, steps_out, shrinks, state.i),
                width,
            )
        return SliceState(
            i=state.i + 1,
            z=unravel(x),
            potential_energy=-log_f,
            width=width,
            num_evals=evals,
            num_steps_out=steps_out.sum(dtype=jnp.int32),
            num_shrinks=shrinks.sum(dtype=jnp.int32),
            num_warmup=state.num_warmup,
            rng_key=rng_key,
        )

    def refresh(
        self, state: SliceState, model_args: tuple, model_kwargs: dict | None
    ) -> SliceState:
        """Recompute the cached potential energy for new model arguments.

        Call this before :meth:`sample` when a chain continues on changed data
        (e.g. a warm start after new observations); the slice level is drawn from
        the cached energy.

        Args:
            state: current state (batched for vectorized chains).
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            ``state`` with ``potential_energy`` evaluated at ``state.z``.
        """
        potential_fn = self.get_potential_fn(model_args, model_kwargs)
        potential = potential_fn if jnp.ndim(state.i) == 0 else jax.vmap(potential_fn)
        return state._replace(potential_energy=potential(state.z))


@dataclass(frozen=True)
class _SliceKernelFactory:
    """Builds the kernel; hashed as the compiled driver's static argument."""

    max_steps_out: int

    def __call__(self, model, warm):
        return SliceKernel(model, width=warm["width"], max_steps_out=self.max_steps_out)


def _record(state: SliceState) -> dict:
    return {"num_evals": state.num_evals, "lp": -state.potential_energy}


@dataclass(frozen=True)
class Slice:
    """Univariate slice sampling (Neal 2003) of a surrogate's hyperparameters.

    A frozen config with one method, :meth:`fit`, running :class:`SliceKernel`
    under ppbo's compiled driver (the same one as :class:`~ppbo.NUTS`), so a refit
    on data of the same bucket reuses the compiled code. Needs no gradients.

    Args:
        num_warmup: sweeps per chain during which the bracket widths adapt.
        num_samples: sweeps per chain after warm-up.
        thinning: keep every ``thinning``-th sweep.
        width: initial bracket width on the unconstrained scale.
        num_chains: chains, vmapped in one compiled function.
        max_steps_out: most step-outs per coordinate update.
        warm_start: start from ``init``'s last positions and adapted widths.

    Example:
        >>> inference = Slice(num_warmup=10, num_samples=20)  # tiny, for the example
        >>> fitted = inference.fit(jax.random.key(0), posterior.surrogate, data)
        >>> fitted.num_samples
        20

    References:
        Neal, R. M. (2003). Slice sampling. The Annals of Statistics 31(3).
    """

    num_warmup: int = 128
    num_samples: int = 256
    thinning: int = 1
    width: float = 1.0
    num_chains: int = 1
    max_steps_out: int = 16
    warm_start: bool = True

    def __post_init__(self) -> None:
        _mcmc.check_schedule(self)
        if not float(self.width) > 0:
            raise ValueError(f"width must be > 0, got {self.width!r}")

    def fit(
        self,
        key: jax.Array,
        surrogate: Surrogate,
        data: Dataset,
        *,
        init: Posterior | None = None,
    ) -> Posterior:
        """Sample the hyperparameter posterior of ``surrogate`` given ``data``.

        Returns:
            A :class:`~ppbo.Posterior` with ``num_chains * (num_samples //
            thinning)`` samples and per-draw ``num_evals`` and ``lp``.

        Example:
            >>> config = Slice(num_warmup=10, num_samples=20)
            >>> config.fit(key, posterior.surrogate, data).method
            'Slice'
        """
        # An explicit dtype: a weakly typed array would retrace against the
        # strongly typed widths of a warm start.
        return _mcmc.fit_mcmc(
            self,
            key,
            surrogate,
            data,
            init,
            cold_warm=lambda size: {
                "width": jnp.full(
                    (self.num_chains, size), float(self.width), dtype=jnp.float64
                )
            },
            warm_of=lambda last, draws: {"width": last.width},
            make_kernel=_SliceKernelFactory(int(self.max_steps_out)),
            record=_record,
            method="Slice",
        )
