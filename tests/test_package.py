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
