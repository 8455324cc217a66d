"""DNGO: a neural network as a feature map, Bayesian linear regression on top.

Snoek et al. (2015), §3: a fully connected tanh network with a linear output
layer, on inputs standardised to zero mean and unit variance
(:func:`standardize_inputs`), is trained on the observations by least squares
(here full-batch Adam, Kingma and Ba 2015, with optax, for a fixed number of
steps under ``lax.scan`` so that a capacity bucket compiles once); its output
layer is then replaced by Bayesian linear regression (:mod:`ppbo.models.blr`) on
the last hidden layer ``phi(x)`` (with a constant feature appended for the bias):

.. math::
    f(x) = \\phi(x)^T w, \\quad w \\sim \\mathcal N(0, \\alpha^{-1} I), \\quad
    y = f(x) + \\varepsilon, \\quad \\varepsilon \\sim \\mathcal N(0, \\beta^{-1})

The precisions ``alpha`` and ``beta`` are either integrated out by slice
sampling their posterior, marginal likelihood (Bishop 2006, eq. 3.86) times
prior, as Snoek et al. (2015, §3) do (``precisions="slice"``:
:func:`ppbo.models.blr.sample_precisions`, ppbo's slice sampler), or set by
maximising the marginal likelihood (``precisions="evidence"``, the default:
:func:`ppbo.models.blr.maximize_evidence`), one sample at a fraction of the
acquisition's cost. The predictive of one sample is Gaussian with mean
``phi^T m_N`` and latent variance ``phi^T S_N phi`` (Bishop 2006, eq. 3.59); the
framework's mixture over the sampled precisions is the predictive of
Snoek et al. Its cost is linear in n (the network) plus O(k^3) with k features
per sample, against the GP's O(n^3).

With ``ensemble=M`` (an extension, not in Snoek et al.) M networks are trained
from independent initialisations, each with its own Bayesian last layer, and
the posterior is the equal-weight mixture of the M members (Lakshminarayanan,
Pritzel and Blundell 2017): one network that interpolates the data leaves its
last layer almost no variance off the data, while independently trained
networks disagree there.

Samples (leading axis ``s``: 1 with ``"evidence"``, the kept slice draws with
``"slice"``, times the ``ensemble`` members): ``w0, b0, w1, b1, ...`` the hidden
layers' weights (fan-in, fan-out) and biases (one network per member, the same in
each of its samples), ``alpha`` and ``beta``.
The weight posterior is recomputed from the data by ``prepare``, so appending
(fantasised) observations conditions the last layer (batches and pending
points), and the surrogate offers joint covariances, the observation noise
``1 / beta`` and exact posterior sample paths ``phi(x)^T w`` with
``w ~ N(m_N, S_N)`` (Thompson sampling).

References:
    Snoek, J., Rippel, O., Swersky, K., Kiros, R., Satish, N., Sundaram, N.,
    Patwary, M. M. A., Prabhat and Adams, R. P. (2015). Scalable Bayesian
    Optimization Using Deep Neural Networks. ICML.
    Bishop, C. M. (2006). Pattern Recognition and Machine Learning, §3.3, §3.5.
    Kingma, D. P. and Ba, J. (2015). Adam: A Method for Stochastic Optimization.
    Lakshminarayanan, B., Pritzel, A. and Blundell, C. (2017). Simple and
    Scalable Predictive Uncertainty Estimation using Deep Ensembles. NeurIPS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial

import jax
import jax.numpy as jnp
import optax

from ppbo.data import Dataset
from ppbo.models import blr
from ppbo.surrogate import PathSampler, Surrogate

__all__ = [
    "surrogate",
    "init_network",
    "features",
    "standardize_inputs",
    "INPUT_SCALE",
    "network_layers",
    "train_network",
    "PATHS",
    "PRECISIONS",
    "SLICE_SCHEDULE",
]

#: How the last layer's precisions are found: ``"evidence"`` (type-II maximum
#: likelihood, one sample) or ``"slice"`` (slice-sampled, Snoek et al. 2015).
PRECISIONS = ("evidence", "slice")
#: Slice schedule of ``precisions="slice"`` (:func:`ppbo.models.blr.sample_precisions`):
#: 16 draws kept from one chain, every 10th sweep after 100 sweeps of warm-up.
#: Each draw multiplies the acquisition's cost (one BLR head per draw).
SLICE_SCHEDULE = {"num_warmup": 100, "num_samples": 16, "thinning": 10}


def init_network(key: jax.Array, sizes: Sequence[int]) -> dict[str, jax.Array]:
    """Glorot-normal weights and zero biases for layer sizes ``(d, h1, ..., out)``.

    Glorot and Bengio (2010), "Understanding the difficulty of training deep
    feedforward neural networks": variance ``2 / (fan_in + fan_out)``.

    Returns:
        ``{"w0": (d, h1), "b0": (h1,), "w1": ...}``.

    Example:
        >>> import jax
        >>> net = init_network(jax.random.key(0), (2, 3, 1))
        >>> {k: v.shape for k, v in sorted(net.items())}
        {'b0': (3,), 'b1': (1,), 'w0': (2, 3), 'w1': (3, 1)}
    """
    net = {}
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (key, fan_in, fan_out) in enumerate(
        zip(keys, sizes[:-1], sizes[1:], strict=True)
    ):
        scale = jnp.sqrt(2.0 / (fan_in + fan_out))
        net[f"w{i}"] = scale * jax.random.normal(key, (fan_in, fan_out))
        net[f"b{i}"] = jnp.zeros(fan_out)
    return net


def network_layers(params: Mapping[str, jax.Array]) -> int:
    """Number of weight matrices ``w0, w1, ...`` in ``params``.

    Example:
        >>> network_layers({"w0": 0, "b0": 0, "w1": 0, "b1": 0, "alpha": 0})
        2
    """
    return sum(1 for name in params if name[0] == "w" and name[1:].isdigit())


#: Inputs in the unit cube enter the network as ``(x - 1/2) * sqrt(12)``: zero
#: mean and unit variance under the uniform distribution on the cube.
INPUT_SCALE = math.sqrt(12.0)


def standardize_inputs(X: jax.Array) -> jax.Array:
    """Map unit-cube inputs (m, d) to zero mean and unit variance per dimension.

    ``(x - 1/2) * sqrt(12)``: the uniform distribution on [0, 1] has mean 1/2
    and variance 1/12. Glorot and Bengio's initialisation (:func:`init_network`)
    assumes inputs of unit variance; on raw unit-cube inputs the first layer's
    pre-activations have a standard deviation of about 0.13 in d = 6, every tanh
    layer stays in its linear range, and the trained features span few
    directions, so the Bayesian last layer is overconfident away from the data
    (benchmarks/README.md, ``surrogates.py``). The DNGO implementation of RoBO
    (Klein et al. 2017) likewise standardises its inputs.

    Args:
        X: inputs in the unit cube, shape (m, d).

    Returns:
        The standardised inputs, shape (m, d).

    References:
        Glorot, X. and Bengio, Y. (2010). Understanding the difficulty of
        training deep feedforward neural networks. AISTATS.
        Klein, A., Falkner, S., Mansur, N. and Hutter, F. (2017). RoBO: A
        Flexible and Robust Bayesian Optimization Framework in Python. NIPS
        Bayesian Optimization Workshop.

    Example:
        >>> import jax.numpy as jnp
        >>> standardize_inputs(jnp.array([[0.0, 0.5, 1.0]])).round(4).tolist()
        [[-1.7321, 0.0, 1.7321]]
    """
    return (X - 0.5) * INPUT_SCALE


def features(
    params: Mapping[str, jax.Array], X: jax.Array, num_layers: int | None = None
) -> jax.Array:
    """The tanh layers ``w0, b0, ..., w{L-1}, b{L-1}`` applied to ``X`` (m, d),
    with a constant 1 appended: features of shape (m, h_L + 1).

    The unit-cube inputs are first standardised (:func:`standardize_inputs`).

    Args:
        params: network weights (extra entries are ignored).
        X: inputs (m, d) in the unit cube.
        num_layers: how many layers to apply (default: all of ``params``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> net = init_network(jax.random.key(0), (2, 4))
        >>> features(net, jnp.full((3, 2), 0.5)).tolist()[0]
        [0.0, 0.0, 0.0, 0.0, 1.0]
    """
    if num_layers is None:
        num_layers = network_layers(params)
    h = standardize_inputs(X)
    for i in range(num_layers):
        h = jnp.tanh(h @ params[f"w{i}"] + params[f"b{i}"])
    return jnp.concatenate([h, jnp.ones((h.shape[0], 1), h.dtype)], axis=1)


def _network_loss(net, data: Dataset, num_hidden: int, weight_decay: float):
    phi = features(net, data.X, num_hidden)[:, :-1]
    out = phi @ net[f"w{num_hidden}"][:, 0] + net[f"b{num_hidden}"][0]
    n = jnp.sum(data.mask)
    mse = jnp.sum(jnp.where(data.mask, (out - data.y) ** 2, 0.0)) / n
    decay = sum(jnp.sum(net[f"w{i}"] ** 2) for i in range(num_hidden + 1))
    return mse + weight_decay * decay


def train_network(
    key: jax.Array,
    data: Dataset,
    loss,
    net: dict[str, jax.Array],
    *,
    num_steps: int,
    learning_rate: float,
) -> dict[str, jax.Array]:
    """Minimise ``loss(net, data)`` from ``net`` by ``num_steps`` of full-batch Adam.

    A ``lax.scan`` of fixed length, so one bucket compiles once.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, ppbo
        >>> data = ppbo.Dataset(np.zeros((2, 1)), np.array([1.0, 1.0]))
        >>> loss = lambda net, data: jnp.sum((net["c"] - 1.0) ** 2)
        >>> out = train_network(jax.random.key(0), data, loss, {"c": jnp.zeros(())},
        ...                     num_steps=300, learning_rate=0.1)
        >>> bool(abs(out["c"] - 1.0) < 1e-2)
        True
    """
    del key  # full-batch training is deterministic given the initial network
    optimizer = optax.adam(learning_rate)
    grad = jax.grad(loss)

    def step(state, _):
        net, opt_state = state
        updates, opt_state = optimizer.update(grad(net, data), opt_state, net)
        return (optax.apply_updates(net, updates), opt_state), None

    (net, _), _ = jax.lax.scan(step, (net, optimizer.init(net)), None, num_steps)
    return net


def _member(
    key, data: Dataset, *, hidden, num_steps, learning_rate, weight_decay, precisions
):
    """One network trained from its own initialisation, with its BLR precisions."""
    sizes = (data.X.shape[1], *hidden, 1)
    init_key, train_key = jax.random.split(key)
    slice_key = jax.random.fold_in(key, 2)
    net = init_network(init_key, sizes)
    loss = partial(_network_loss, num_hidden=len(hidden), weight_decay=weight_decay)
    net = train_network(
        train_key, data, loss, net, num_steps=num_steps, learning_rate=learning_rate
    )
    # the trained output layer is replaced by Bayesian linear regression
    net = {
        k: v for k, v in net.items() if k not in (f"w{len(hidden)}", f"b{len(hidden)}")
    }
    Phi = features(net, data.X)
    if precisions == "slice":
        alpha, beta = blr.sample_precisions(
            slice_key, Phi, data.y, data.mask, **SLICE_SCHEDULE
        )
    else:
        alpha, beta = (v[None] for v in blr.maximize_evidence(Phi, data.y, data.mask))
    s = alpha.shape[0]
    net = {k: jnp.broadcast_to(v, (s, *v.shape)) for k, v in net.items()}
    return dict(net, alpha=alpha, beta=beta)


def _trainer(key, data: Dataset, *, ensemble, **options):
    if ensemble == 1:
        samples = _member(key, data, **options)
    else:
        # members one after another: a vmap would batch the BLR factorisations,
        # and batched LAPACK calls can deadlock XLA's two-thread CPU pool
        # (models/gaussian.py); the networks' training is not the cost here
        keys = jax.random.split(key, ensemble)
        stacked = jax.lax.map(lambda k: _member(k, data, **options), keys)
        samples = {k: v.reshape(-1, *v.shape[2:]) for k, v in stacked.items()}
    return {k: jnp.asarray(v, jnp.float64) for k, v in samples.items()}


def _prepare(params, data: Dataset) -> dict[str, jax.Array]:
    Phi = features(params, data.X)
    post = blr.weight_posterior(Phi, data.y, data.mask, params["alpha"], params["beta"])
    return post._asdict()


def _predict(params, data: Dataset, X, cache):
    mean, var = blr.predict(blr.WeightPosterior(**cache), features(params, X))
    return mean, jnp.maximum(var, 0.0)


def _predict_joint(params, data: Dataset, X, cache):
    Phi = features(params, X)
    V = Phi @ cache["chol_inv"].T
    return Phi @ cache["mean"], V @ V.T


def _noise(params, X):
    return jnp.full(X.shape[0], 1.0 / params["beta"], dtype=X.dtype)


def _draw_paths(key, params, data, cache, num_paths):
    # w = m_N + L^-T z has covariance L^-T L^-1 = A^-1 = S_N
    z = jax.random.normal(key, (num_paths, cache["mean"].shape[0]))
    weights = cache["mean"] + z @ cache["chol_inv"]
    net = {k: v for k, v in params.items() if k not in ("alpha", "beta")}
    return {"net": net, "weights": weights}


def _evaluate_paths(paths, X):
    return paths["weights"] @ features(paths["net"], X).T


#: Exact sample paths of the Bayesian last layer (shared with ABLR's single task).
PATHS = PathSampler(draw=_draw_paths, evaluate=_evaluate_paths)


def surrogate(
    hidden: Sequence[int] = (50, 50, 50),
    *,
    num_steps: int = 1000,
    learning_rate: float = 1e-2,
    weight_decay: float = 0.0,
    precisions: str = "evidence",
    ensemble: int = 1,
) -> Surrogate:
    """Build the DNGO surrogate (fitted by :class:`ppbo.Train`).

    Args:
        hidden: widths of the tanh hidden layers (Snoek et al. 2015 use three of
            50 units); the BLR features are the last of them plus a constant.
        num_steps: full-batch Adam steps that train the network.
        learning_rate: Adam's step size.
        weight_decay: coefficient of an L2 penalty on the network's weights.
        precisions: ``"evidence"`` (``alpha``, ``beta`` by type-II maximum
            likelihood, one sample) or ``"slice"`` (slice-sampled from evidence
            times :func:`ppbo.models.blr.log_precision_prior`, Snoek et al.
            2015; :data:`SLICE_SCHEDULE` draws).
        ensemble: number of networks trained from independent initialisations
            (1: DNGO as published). Each has its own Bayesian last layer; the
            samples of all members form one mixture, so where the networks
            disagree (away from the data) the predictive widens, as in deep
            ensembles (Lakshminarayanan et al. 2017). Costs ``ensemble`` times
            the training.

    Returns:
        A :class:`ppbo.Surrogate` with a ``trainer``, ``prepare`` (the weight
        posterior from the data), ``predict_joint``, ``noise`` (``1 / beta``),
        exact sample paths and conditioning.

    Raises:
        ValueError: for an empty ``hidden``, non-positive widths or steps, or
            an unknown ``precisions``.

    Example:
        >>> import jax, numpy as np, ppbo
        >>> small = surrogate(hidden=(8,), num_steps=50)
        >>> X = np.linspace(0, 1, 6)[:, None]
        >>> data = ppbo.Dataset(X, np.sin(6 * X[:, 0]))
        >>> posterior = ppbo.fit(small, data, ppbo.Train(), jax.random.key(0))
        >>> sorted(posterior.samples), posterior.num_samples
        (['alpha', 'b0', 'beta', 'w0'], 1)
        >>> surrogate(hidden=(8,), precisions="slice").name  # 16 slice draws
        'dngo(hidden=[8], steps=1000, precisions=slice)'
    """
    hidden = tuple(int(h) for h in hidden)
    if not hidden or min(hidden) < 1:
        raise ValueError(f"hidden must be a non-empty tuple of widths, got {hidden}")
    if int(num_steps) < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    if precisions not in PRECISIONS:
        raise ValueError(f"precisions must be one of {PRECISIONS}, got {precisions!r}")
    ensemble = int(ensemble)
    if ensemble < 1:
        raise ValueError(f"ensemble must be >= 1, got {ensemble}")
    trainer = partial(
        _trainer,
        ensemble=ensemble,
        hidden=hidden,
        num_steps=int(num_steps),
        learning_rate=float(learning_rate),
        weight_decay=float(weight_decay),
        precisions=precisions,
    )
    return Surrogate(
        trainer=trainer,
        predict=_predict,
        prepare=_prepare,
        predict_joint=_predict_joint,
        noise=_noise,
        paths=PATHS,
        name=f"dngo(hidden={list(hidden)}, steps={int(num_steps)}"
        + (", precisions=slice" if precisions == "slice" else "")
        + (f", ensemble={ensemble})" if ensemble > 1 else ")"),
    )
