"""The joint evidence of the tempered preference model (``evidence="joint"``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize as scipy_minimize
from scipy.stats import norm

import ppbo
from ppbo.models import preference_gp as pgp

PARAMS = {
    "lengthscale": jnp.array([0.4, 0.7]),
    "outputscale": 1.3,
    "mean": 0.2,
    "preference_noise": 0.05,
    "noise": 0.02,
}


def _rbf(A, B, ell, scale):
    return scale * np.exp(-0.5 * (((A[:, None, :] - B[None, :, :]) / ell) ** 2).sum(-1))


def _mixed_data(seed=11):
    """9 rows, 7 weighted duels and 3 weighted anchors, in 2-D."""
    rng = np.random.default_rng(seed)
    n, m = 9, 7
    X = rng.random((n, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n)
    duels = np.array([rng.choice(n, 2, replace=False) for _ in range(m)])
    flags = np.zeros(n, bool)
    flags[[1, 4, 7]] = True
    data = ppbo.Dataset(
        X,
        y,
        duels=duels,
        anchor=flags,
        duel_weight=rng.uniform(0.2, 1.0, m),
        weight=rng.uniform(0.5, 1.0, n),
    )
    return data, n, m


def _dense_joint_evidence(params, data, n, m, beta):
    # Laplace's evidence of p(f) p(duels | f)^pd p(Y0 | f)^pa, the powers beta
    # and 1 - beta over the larger of the two, in the rows' space with dense
    # NumPy/SciPy algebra: the mode by BFGS, then
    # -(f - mu)^T K^-1 (f - mu) / 2 + log-likelihood - log|I + K W| / 2
    # (Rasmussen and Williams 2006, eq. (3.32)), W the likelihood's minus Hessian.
    p = {k: np.asarray(v) for k, v in params.items()}
    X, y = np.asarray(data.X)[:n], np.asarray(data.y)[:n]
    duels = np.asarray(data.duels)[:m]
    wd = np.asarray(data.duel_weight)[:m]
    flags = np.asarray(data.anchor)[:n]
    wa = np.where(flags, np.asarray(data.weight)[:n], 0.0)
    K = _rbf(X, X, p["lengthscale"], p["outputscale"])
    K = K + pgp.JITTER * p["outputscale"] * np.eye(n)
    D = np.zeros((m, n))
    D[np.arange(m), duels[:, 0]] = 1.0
    D[np.arange(m), duels[:, 1]] -= 1.0
    s = np.sqrt(2.0 * p["preference_noise"])
    r = p["noise"]
    K_inv = np.linalg.inv(K)
    pd, pa = beta / max(beta, 1 - beta), (1 - beta) / max(beta, 1 - beta)

    def negative(f):
        e = f - p["mean"]
        duel = pd * (wd * norm.logcdf(D @ f / s)).sum()
        anchor = pa * (wa * norm.logpdf(y, f, np.sqrt(r))).sum()
        return -duel - anchor + 0.5 * e @ K_inv @ e

    f = scipy_minimize(negative, np.full(n, p["mean"]), method="BFGS", tol=1e-12).x
    z = D @ f / s
    lam = np.exp(norm.logpdf(z) - norm.logcdf(z))
    W = D.T @ np.diag(pd * wd * lam * (z + lam) / s**2) @ D
    W = W + np.diag(pa * wa / r)
    _, logdet = np.linalg.slogdet(np.eye(n) + K @ W)
    return -negative(f) - 0.5 * logdet


@pytest.mark.parametrize("beta", [0.0, 0.3, 0.5, 1.0])
def test_joint_evidence_matches_dense_laplace(beta):
    data, n, m = _mixed_data()
    assert data.duels.shape[0] > m  # padded duels take part
    evidence = jax.jit(
        pgp.joint_log_evidence,
        static_argnames=("beta", "num_iterations", "num_anchors"),
    )
    value = float(evidence(PARAMS, data, beta=beta, num_iterations=50))
    expected = _dense_joint_evidence(PARAMS, data, n, m, beta)
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    # a tight static bound on the anchor slots gives the same value
    bounded = evidence(PARAMS, data, beta=beta, num_iterations=50, num_anchors=3)
    np.testing.assert_allclose(float(bounded), value, rtol=1e-12)


def test_joint_evidence_special_cases_are_the_separate_evidences():
    data, _, _ = _mixed_data()
    # beta = 1: the duels' evidence alone
    np.testing.assert_allclose(
        float(pgp.joint_log_evidence(PARAMS, data, beta=1.0)),
        float(pgp.preference_log_evidence(PARAMS, data)),
        rtol=1e-12,
    )
    # anchors only, beta = 0: Gaussian, so Laplace is exact and equals the
    # closed form (with the weights' constants)
    anchors = ppbo.Dataset(
        data.X[: data.n],
        data.y[: data.n],
        anchor=np.ones(data.n, bool),
        weight=data.weight[: data.n],
    )
    np.testing.assert_allclose(
        float(pgp.joint_log_evidence(PARAMS, anchors, beta=0.0)),
        float(pgp.anchor_log_evidence(PARAMS, anchors)),
        rtol=1e-10,
    )


def test_joint_evidence_gradient_matches_finite_differences():
    data, _, _ = _mixed_data()
    names = ("outputscale", "mean", "preference_noise", "noise")

    def evidence(z):
        p = {**PARAMS, "lengthscale": jnp.exp(z[:2])}
        for i, name in enumerate(names):
            p[name] = z[2 + i] if name == "mean" else jnp.exp(z[2 + i])
        return pgp.joint_log_evidence(p, data, beta=0.5, num_iterations=50)

    z = jnp.concatenate(
        [
            jnp.log(PARAMS["lengthscale"]),
            jnp.array([np.log(1.3), 0.2, np.log(0.05), np.log(0.02)]),
        ]
    )
    evidence = jax.jit(evidence)
    grad = np.asarray(jax.grad(evidence)(z))
    # central differences: error h^2 |f'''| / 6 ~ 1e-10 plus round-off
    # eps |value| / h ~ 1e-11
    h = 1e-5
    numeric = [
        (evidence(z.at[i].add(h)) - evidence(z.at[i].add(-h))) / (2 * h)
        for i in range(z.shape[0])
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


def _anchors_with_duels(sign, seed=0):
    """15 rows on [0, 1], exact anchors of f = sin(2 pi x) at three of them, and
    40 duels between all rows answered by ``sign * f``: -1 contradicts them."""
    rng = np.random.default_rng(seed)
    X = np.linspace(0.0, 1.0, 15)[:, None]
    f = np.sin(2 * np.pi * X[:, 0])
    pairs = np.array([rng.choice(15, 2, replace=False) for _ in range(40)])
    better = sign * f[pairs[:, 0]] > sign * f[pairs[:, 1]]
    duels = np.where(better[:, None], pairs, pairs[:, ::-1])
    flags = np.zeros(15, bool)
    flags[[2, 6, 10]] = True
    return ppbo.Dataset(X, np.where(flags, f, 0.0), duels=duels, anchor=flags)


def test_duels_inform_the_anchor_noise_only_under_the_joint_evidence():
    # The same anchors with duels that agree or disagree with them. The notes'
    # separate criterion scores the anchors by log p(Y0 | X0, theta) alone, so
    # its best noise cannot depend on the duels; the joint evidence must explain
    # both at the same latent values, and duels that contradict the anchors
    # make it choose a noise that discounts them.
    params = {
        "lengthscale": jnp.array([0.2]),
        "outputscale": 1.0,
        "mean": 0.0,
        "preference_noise": 0.01,
    }
    noises = np.exp(np.linspace(np.log(1e-4), np.log(1e2), 61))
    best = {}
    for evidence in ("separate", "joint"):
        for sign in (1, -1):
            data = _anchors_with_duels(sign)
            values = jax.jit(
                jax.vmap(
                    lambda r, data=data, evidence=evidence: pgp.criterion(
                        {**params, "noise": r}, data, evidence=evidence
                    )
                )
            )(jnp.asarray(noises))
            best[evidence, sign] = noises[int(np.argmax(np.asarray(values)))]
    assert best["separate", 1] == best["separate", -1], best
    # an order of magnitude at least (measured: 0.13 -> 4.0)
    assert best["joint", -1] > 10 * best["joint", 1], best


def test_evidence_is_validated_and_named():
    with pytest.raises(ValueError, match="evidence must be one of .* got 'both'"):
        pgp.surrogate(evidence="both")
    with pytest.raises(ValueError, match="evidence must be one of .* got 'both'"):
        pgp.criterion(PARAMS, _mixed_data()[0], evidence="both")
    assert pgp.surrogate(evidence="joint").name == (
        "preference_gp(rbf, beta=0.5, evidence=joint)"
    )
