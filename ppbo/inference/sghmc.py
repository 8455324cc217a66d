"""Stochastic-gradient HMC with scale adaptation (BOHAMIANN), as a NumPyro kernel.

SGHMC (Chen, Fox and Guestrin 2014) simulates Hamiltonian dynamics with friction
from noisy potential gradients computed on minibatches of the data. Springenberg et
al. (2016, §3 and Algorithm 1) precondition it with an estimate ``V̂`` of the
gradient's second moment, adapted during burn-in, and pick the friction so that
the momentum decays by a fixed fraction per step; this makes the step size almost
free of the scale of the parameters, which is what lets the sampler run on neural
networks. The noise estimate of the gradient is set to ``B̂ = 0`` as in the paper.

Minibatches are drawn among the rows of a padded :class:`~ppbo.Dataset` whose
``mask`` is True, by masking the other rows out, and the observed sites are
rescaled by ``n / batch`` so the minibatch potential is an unbiased estimate of the
full one.

References:
    Chen, T., Fox, E. B. and Guestrin, C. (2014). Stochastic gradient Hamiltonian
    Monte Carlo. *ICML*.

    Springenberg, J. T., Klein, A., Falkner, S. and Hutter, F. (2016). Bayesian
    optimization with robust Bayesian neural networks. *NeurIPS*.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import random
from jax.flatten_util import ravel_pytree
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import init_to_uniform
from numpyro.primitives import Messenger
from numpyro.util import identity

from ppbo.data import Dataset
from ppbo.inference import _mcmc
from ppbo.surrogate import Posterior, Surrogate

__all__ = ["SGHMC", "SGHMCKernel", "SGHMCState", "minibatch"]

# Keeps V̂^{-1/2} finite where a coordinate's gradient vanishes.
_MIN_V_HAT = 1e-16


class SGHMCState(NamedTuple):
    """State of one chain of :class:`SGHMCKernel`.

    Attributes:
        i: iteration counter; ``V̂`` adapts while ``i < num_warmup``.
        z: unconstrained latent values (a pytree, a dict of sites for a model).
        v: momentum in the update's units, shape (p,) for ``p`` flattened
            coordinates.
        potential_energy: minibatch estimate of the potential energy at the
            previous position (the one the last gradient was taken at).
        v_hat: preconditioner ``V̂``, shape (p,).
        g_hat: moving average of the gradient, shape (p,).
        tau: per-coordinate window length of the moving averages, shape (p,).
        num_warmup: number of burn-in iterations.
        rng_key: PRNG key for the next step.
    """

    i: jax.Array
    z: Any
    v: jax.Array
    potential_energy: jax.Array
    v_hat: jax.Array
    g_hat: jax.Array
    tau: jax.Array
    num_warmup: jax.Array
    rng_key: jax.Array


class _scale_observed(Messenger):
    """Multiply the log density of observed sites (the likelihood) by ``scale``."""

    def __init__(self, fn=None, scale=1.0):
        self.scale = scale
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["is_observed"]:
            old = msg.get("scale")
            msg["scale"] = self.scale if old is None else old * self.scale


def _scaled_model(model):
    def scaled(*args, likelihood_scale=1.0, **kwargs):
        with _scale_observed(scale=likelihood_scale):
            return model(*args, **kwargs)

    return scaled


def minibatch(key: jax.Array, data: Dataset, batch_size: int):
    """A random minibatch of the valid rows of ``data`` and its likelihood scale.

    ``min(batch_size, n)`` of the ``n`` rows with ``mask`` True are kept (uniformly,
    without replacement) by setting the mask of the others to False; shapes are
    unchanged, so the model and its compiled code are the same as for ``data``.

    Args:
        key: PRNG key.
        data: a padded dataset.
        batch_size: rows per minibatch.

    Returns:
        ``(batch, n / min(batch_size, n))``.

    Example:
        >>> batch, scale = minibatch(key, data, 3)
        >>> int(batch.mask.sum()), float(scale)
        (3, 2.6666666666666665)
    """
    mask = data.mask
    n = mask.sum()
    size = jnp.minimum(batch_size, n)
    u = jnp.where(mask, random.uniform(key, mask.shape), jnp.inf)
    rank = (
        jnp.empty(mask.shape, jnp.int32)
        .at[jnp.argsort(u)]
        .set(jnp.arange(mask.shape[0], dtype=jnp.int32))
    )
    children, aux = data.tree_flatten()
    names = Dataset._LEAVES
    children = tuple(
        mask & (rank < size) if name == "mask" else child
        for name, child in zip(names, children, strict=True)
    )
    return Dataset.tree_unflatten(aux, children), n / jnp.maximum(size, 1)


class SGHMCKernel(MCMCKernel):
    r"""Stochastic-gradient HMC with scale adaptation (Springenberg et al. 2016).

    With :math:`\nabla\tilde U` the potential's gradient on a minibatch (the
    likelihood rescaled by :math:`n / |B|`; the full gradient when no batch size
    is given), one step is Algorithm 1 of Springenberg et al. (2016), per
    coordinate. During burn-in (``i < num_warmup``) the gradient's moments are
    tracked by exponential moving averages with an adaptive window :math:`\tau`
    (their eqs. (8) and (9)):

    .. math::

        \tau &\leftarrow 1 + \tau\,(1 - \hat g^2 / \hat V), \\
        \hat g &\leftarrow (1 - \tau^{-1})\,\hat g + \tau^{-1}\,\nabla\tilde U, \\
        \hat V &\leftarrow (1 - \tau^{-1})\,\hat V
            + \tau^{-1}\,(\nabla\tilde U)^2;

    then, at every step, with the friction chosen as
    :math:`C = \text{mdecay}\,\hat V^{1/2} / \epsilon` so that
    :math:`\epsilon \hat V^{-1/2} C = \text{mdecay}`, and :math:`\hat B = 0`
    (their eq. (10)),

    .. math::

        v &\leftarrow v - \epsilon^2 \hat V^{-1/2} \nabla\tilde U(\theta)
            - \text{mdecay}\, v
            + \mathcal N\!\left(0,\; 2 \epsilon^2\, \text{mdecay}\, \hat V^{-1/2}
            \right), \\
        \theta &\leftarrow \theta + v.

    This is eq. (15) of Chen et al. (2014), :math:`\Delta\theta = v`,
    :math:`\Delta v = -\eta\nabla\tilde U - \alpha v
    + \mathcal N(0, 2(\alpha - \hat\beta)\eta)`, with learning rate
    :math:`\eta = \epsilon^2 \hat V^{-1/2}`, momentum decay
    :math:`\alpha = \epsilon \hat V^{-1/2} C = \text{mdecay}` and
    :math:`\hat\beta = \epsilon \hat V^{-1/2} \hat B / 2 = 0`. Their eq. (10)
    also subtracts :math:`\epsilon^4` from the noise variance; that term is left
    out here: with the step size on this scale (not divided by
    :math:`\sqrt n`) it is not negligible and shrinks the sampled variance (by
    about 19% on the correlated Gaussian of the tests at :math:`\epsilon =
    0.05`), while the plain eq. (15) matches the target moments. After
    burn-in :math:`\hat V` is frozen. There is no Metropolis correction: the chain
    is exact only as :math:`\epsilon \to 0`, and with :math:`\hat B = 0` the
    minibatch gradient noise inflates the spread by about
    :math:`\eta\,\mathrm{Var}(\nabla\tilde U) / (2\,\text{mdecay})` relative to the
    injected noise.

    Args:
        model: NumPyro model; exactly one of ``model`` and ``potential_fn``.
        potential_fn: potential energy of a pytree of unconstrained values (full
            batch only); then :meth:`init` needs ``init_params``.
        step_size: :math:`\epsilon`.
        mdecay: momentum decay per step, in (0, 1].
        batch_size: rows per minibatch, drawn among the valid rows of the model's
            first argument, a :class:`~ppbo.Dataset`; ``None`` for full-batch
            gradients.
        v_hat: initial :math:`\hat V`, a scalar or shape (p,); may be traced.
        init_strategy: per-site initialisation strategy for a ``model``.

    Raises:
        ValueError: if not exactly one of ``model`` and ``potential_fn`` is given,
            a setting is out of range, or minibatches are asked of a
            ``potential_fn`` or of a model whose first argument is not a Dataset.

    References:
        Chen, T., Fox, E. B. and Guestrin, C. (2014). Stochastic gradient
        Hamiltonian Monte Carlo. *ICML*.

        Springenberg, J. T., Klein, A., Falkner, S. and Hutter, F. (2016). Bayesian
        optimization with robust Bayesian neural networks. *NeurIPS*.

    Example:
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
        >>> mcmc = MCMC(
        ...     SGHMCKernel(model), num_warmup=100, num_samples=200, progress_bar=False
        ... )
        >>> mcmc.run(jax.random.key(0), jnp.array([0.9, 1.1, 1.3]))
        >>> mcmc.get_samples()["mu"].shape
        (200,)
    """

    def __init__(
        self,
        model: Callable[..., Any] | None = None,
        potential_fn: Callable[[Any], jax.Array] | None = None,
        *,
        step_size: float = 0.1,
        mdecay: float = 0.05,
        batch_size: int | None = None,
        v_hat: float | jax.Array = 1.0,
        init_strategy: Callable[..., Any] = init_to_uniform,
    ) -> None:
        if (model is None) == (potential_fn is None):
            raise ValueError("Give exactly one of `model` and `potential_fn`.")
        if not float(step_size) > 0:
            raise ValueError(f"`step_size` must be positive, got {step_size!r}.")
        if not 0 < float(mdecay) <= 1:
            raise ValueError(f"`mdecay` must be in (0, 1], got {mdecay!r}.")
        if batch_size is not None:
            if not (isinstance(batch_size, int) and batch_size >= 1):
                raise ValueError(
                    f"`batch_size` must be a positive int, got {batch_size!r}."
                )
            if model is None:
                raise ValueError("Minibatches need a `model`, not a `potential_fn`.")
        self._model = model
        self._potential_fn = potential_fn
        self._step_size = float(step_size)
        self._mdecay = float(mdecay)
        self._batch_size = batch_size
        self._v_hat = v_hat
        self._init_strategy = init_strategy
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
        return ("z",)

    def get_potential_fn(
        self,
        model_args: tuple = (),
        model_kwargs: dict | None = None,
        likelihood_scale: Any = 1.0,
    ) -> Callable[[Any], jax.Array]:
        """Potential energy of unconstrained values, likelihood times a scale.

        Args:
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.
            likelihood_scale: factor on the observed sites' log density.

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
        return self._potential_fn_gen(
            *model_args, likelihood_scale=likelihood_scale, **model_kwargs
        )

    def postprocess_fn(
        self, model_args: tuple, model_kwargs: dict | None
    ) -> Callable[[Any], Any]:
        """Map unconstrained ``z`` to constrained sites plus deterministic sites.

        Args:
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            ``z -> dict of site values`` for one sample; the identity in
            potential-function mode.

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
    ) -> SGHMCState:
        """Build the initial state (zero momentum), one chain per key.

        Args:
            rng_key: a PRNG key, or a batch of keys (one per vectorized chain).
            num_warmup: number of burn-in iterations during which ``V̂`` adapts.
            init_params: unconstrained initial values (with a leading chain axis
                when ``rng_key`` is batched); required with ``potential_fn``.
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            The initial :class:`SGHMCState` (batched like ``rng_key``).

        Raises:
            ValueError: if ``potential_fn`` is used without ``init_params``, or
                minibatches are asked of a model whose first argument is not a
                Dataset.
        """
        model_kwargs = {} if model_kwargs is None else model_kwargs
        if self._batch_size is not None and not (
            model_args and isinstance(model_args[0], Dataset)
        ):
            raise ValueError(
                "Minibatches need a ppbo.Dataset as the model's first argument."
            )
        rng_key, init_params, info, single_chain = _mcmc.initialize_chains(
            rng_key,
            None if self._model is None else _scaled_model(self._model),
            self._init_strategy,
            init_params,
            model_args,
            model_kwargs,
        )
        if info is not None:
            self._potential_fn_gen = info.potential_fn
            self._postprocess_fn_gen = info.postprocess_fn
        init_chain = partial(self._init_chain, num_warmup=num_warmup)
        if single_chain:
            return init_chain(init_params, rng_key)
        return jax.vmap(init_chain)(init_params, rng_key)

    def _init_chain(self, z, rng_key, *, num_warmup) -> SGHMCState:
        z = jax.tree.map(lambda a: jnp.asarray(a, jnp.result_type(a, float)), z)
        z_flat, _ = ravel_pytree(z)
        v_hat = jnp.broadcast_to(jnp.asarray(self._v_hat, z_flat.dtype), z_flat.shape)
        zeros = jnp.zeros_like(z_flat)
        return SGHMCState(
            i=jnp.int32(0),
            z=z,
            v=zeros,
            potential_energy=jnp.zeros((), z_flat.dtype),
            v_hat=v_hat,
            g_hat=zeros,
            tau=jnp.ones_like(z_flat),
            num_warmup=jnp.asarray(num_warmup, jnp.int32),
            rng_key=rng_key,
        )

    def sample(
        self, state: SGHMCState, model_args: tuple, model_kwargs: dict | None
    ) -> SGHMCState:
        """Take one SGHMC step (Algorithm 1 of Springenberg et al. 2016).

        Args:
            state: current state (batched for vectorized chains).
            model_args: positional arguments of the model.
            model_kwargs: keyword arguments of the model.

        Returns:
            The next :class:`SGHMCState`.
        """
        sample_chain = partial(
            self._sample_chain, model_args=model_args, model_kwargs=model_kwargs
        )
        if jnp.ndim(state.i) == 0:
            return sample_chain(state)
        return jax.vmap(sample_chain)(state)

    def _sample_chain(self, state, *, model_args, model_kwargs) -> SGHMCState:
        rng_key, key_batch, key_noise = random.split(state.rng_key, 3)
        if self._batch_size is None:
            potential_fn = self.get_potential_fn(model_args, model_kwargs)
        else:
            batch, scale = minibatch(key_batch, model_args[0], self._batch_size)
            potential_fn = self.get_potential_fn(
                (batch,) + tuple(model_args[1:]), model_kwargs, scale
            )
        z_flat, unravel = ravel_pytree(state.z)
        energy, grad = jax.value_and_grad(lambda x: potential_fn(unravel(x)))(z_flat)

        # Burn-in: moving averages with the adaptive window tau (Algorithm 1).
        tau = 1.0 + state.tau * (1.0 - state.g_hat**2 / state.v_hat)
        r = 1.0 / tau
        g_hat = (1.0 - r) * state.g_hat + r * grad
        v_hat = jnp.maximum((1.0 - r) * state.v_hat + r * grad**2, _MIN_V_HAT)
        adapting = state.i < state.num_warmup
        tau = jnp.where(adapting, tau, state.tau)
        g_hat = jnp.where(adapting, g_hat, state.g_hat)
        v_hat = jnp.where(adapting, v_hat, state.v_hat)

        # Chen et al. (2014) eq. (15) with eta = eps^2 V^-1/2, alpha = mdecay and
        # beta_hat = 0 (eq. (10) of Springenberg et al. without its eps^4 term).
        eps, mdecay = self._step_size, self._mdecay
        eta = eps**2 / jnp.sqrt(v_hat)
        noise = jnp.sqrt(2.0 * mdecay * eta) * random.normal(key_noise, z_flat.shape)
        v = state.v - eta * grad - mdecay * state.v + noise
        return SGHMCState(
            i=state.i + 1,
            z=unravel(z_flat + v),
            v=v,
            potential_energy=energy,
            v_hat=v_hat,
            g_hat=g_hat,
            tau=tau,
            num_warmup=state.num_warmup,
            rng_key=rng_key,
        )


@dataclass(frozen=True)
class _SGHMCKernelFactory:
    """Builds the kernel; hashed as the compiled driver's static argument."""

    step_size: float
    mdecay: float
    batch_size: int | None

    def __call__(self, model, warm):
        return SGHMCKernel(
            model,
            step_size=self.step_size,
            mdecay=self.mdecay,
            batch_size=self.batch_size,
            v_hat=warm["v_hat"],
        )


def _record(state: SGHMCState) -> dict:
    return {"lp": -state.potential_energy}


@dataclass(frozen=True)
class SGHMC:
    """Scale-adapted SGHMC (Springenberg et al. 2016) of a surrogate's parameters.

    A frozen config with one method, :meth:`fit`, running :class:`SGHMCKernel`
    under ppbo's compiled driver (the one NUTS and Slice use), for models too large
    for NUTS, such as Bayesian neural networks on many observations.

    Args:
        num_warmup: burn-in steps per chain, during which ``V̂`` adapts.
        num_samples: steps per chain after burn-in.
        thinning: keep every ``thinning``-th step.
        step_size: :math:`\\epsilon` of the update.
        mdecay: momentum decay per step (sets the friction ``C``).
        batch_size: rows per minibatch among the valid rows; ``None`` for the
            full data (use it for GPs, whose likelihood does not factorise).
        num_chains: chains, vmapped in one compiled function.
        warm_start: start from ``init``'s last positions and preconditioner.

    Example:
        >>> inference = SGHMC(num_warmup=10, num_samples=20)  # tiny, for the example
        >>> fitted = inference.fit(jax.random.key(0), posterior.surrogate, data)
        >>> fitted.num_samples, fitted.method
        (20, 'SGHMC')

    References:
        Springenberg, J. T., Klein, A., Falkner, S. and Hutter, F. (2016). Bayesian
        optimization with robust Bayesian neural networks. NeurIPS.
    """

    num_warmup: int = 500
    num_samples: int = 1000
    thinning: int = 1
    step_size: float = 0.1
    mdecay: float = 0.05
    batch_size: int | None = None
    num_chains: int = 1
    warm_start: bool = True

    def __post_init__(self) -> None:
        _mcmc.check_schedule(self)
        if not float(self.step_size) > 0:
            raise ValueError(f"step_size must be > 0, got {self.step_size!r}")
        if not 0 < float(self.mdecay) <= 1:
            raise ValueError(f"mdecay must be in (0, 1], got {self.mdecay!r}")
        if self.batch_size is not None and not (
            isinstance(self.batch_size, int) and self.batch_size >= 1
        ):
            raise ValueError(f"batch_size must be None or >= 1, got {self.batch_size}")

    def fit(
        self,
        key: jax.Array,
        surrogate: Surrogate,
        data: Dataset,
        *,
        init: Posterior | None = None,
    ) -> Posterior:
        """Sample the posterior of ``surrogate``'s parameters given ``data``.

        Returns:
            A :class:`~ppbo.Posterior` with ``num_chains * (num_samples //
            thinning)`` samples and per-draw ``lp`` (minibatch estimate).

        Example:
            >>> SGHMC(num_warmup=10, num_samples=20).fit(
            ...     key, posterior.surrogate, data
            ... ).samples["noise"].shape
            (20,)
        """
        return _mcmc.fit_mcmc(
            self,
            key,
            surrogate,
            data,
            init,
            cold_warm=lambda size: {
                "v_hat": jnp.ones((self.num_chains, size), dtype=jnp.float64)
            },
            warm_of=lambda last, draws: {"v_hat": last.v_hat},
            make_kernel=_SGHMCKernelFactory(
                float(self.step_size), float(self.mdecay), self.batch_size
            ),
            record=_record,
            method="SGHMC",
        )
