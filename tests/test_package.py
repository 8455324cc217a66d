"""Package-level contracts: the public API and no import-time side effects."""

import subprocess
import sys

import ppbo


def test_import_changes_no_jax_config():
    code = (
        "import jax; before = jax.config.jax_enable_x64; import ppbo, ppbo.models.gp, "
        "ppbo.models.multitask_gp; assert jax.config.jax_enable_x64 == before; "
        "print(before)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_public_api_and_positional_order():
    for name in ppbo.__all__:
        assert getattr(ppbo, name).__doc__, name
    assert ppbo.NUTS(10, 20, 2, 1, True, 5) == ppbo.NUTS(
        num_warmup=10,
        num_samples=20,
        thinning=2,
        num_chains=1,
        dense_mass=True,
        max_tree_depth=5,
    )
    assert ppbo.Slice(10, 20, 2, 0.5).width == 0.5
    assert ppbo.MAP(3).num_restarts == 3


def test_models_are_installed_as_ppbo_models():
    import ppbo.models.gp as gp
    import ppbo.models.multitask_gp as multitask_gp

    assert gp.surrogate().name.startswith("gp(")
    assert multitask_gp.surrogate(2).name.startswith("multitask_gp(")


# A notebook's usual import order: ArviZ first (under ArviZ 1.x it registers NumPyro
# as a lazily loaded module), then NumPyro's distributions, then ppbo.
_FIT_AFTER_ARVIZ = """
import arviz
import numpyro.distributions as dist
import jax
import numpy as np
import ppbo
from ppbo.models import gp

jax.config.update("jax_enable_x64", True)
X = np.linspace(0.0, 1.0, 6)[:, None]
data = ppbo.Dataset(X, np.sin(6.0 * X[:, 0]))
surrogate = gp.surrogate(priors={"noise": dist.LogNormal(-4.0, 1.0)})
posterior = ppbo.fit(surrogate, data, ppbo.NUTS(5, 5), jax.random.key(0))
print(posterior.num_samples)
"""


def test_fit_after_importing_arviz_and_numpyro_distributions():
    out = subprocess.run(
        [sys.executable, "-c", _FIT_AFTER_ARVIZ], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "5"


def test_bind_submodules_restores_a_lost_submodule_attribute():
    import numpyro.distributions
    import numpyro.distributions.distribution as distribution

    from ppbo._compat import bind_submodules

    del numpyro.distributions.distribution
    try:
        assert bind_submodules() == ["numpyro.distributions.distribution"]
    finally:
        numpyro.distributions.distribution = distribution
    assert numpyro.distributions.distribution is distribution
    assert bind_submodules() == []
