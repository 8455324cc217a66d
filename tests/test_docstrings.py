"""Every public module's docstring examples run (doctest), in float64."""

import doctest
import importlib
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppbo
import ppbo.models
from ppbo.models import gp

MODULES = sorted(
    {
        info.name
        for package in (ppbo, ppbo.models)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    }
    | {"ppbo", "ppbo.models"}
)


@pytest.fixture(scope="module")
def context():
    """Names the examples may use without defining them: a small 2-D dataset and a
    one-sample posterior of the default GP (``posterior.surrogate``)."""
    X = np.random.default_rng(0).random((8, 2))
    data = ppbo.Dataset(X, np.sin(3 * X[:, 0]) + X[:, 1])
    surrogate = gp.surrogate()
    params = {"lengthscale": [0.3, 0.4], "outputscale": 1.0, "noise": 1e-2, "mean": 0.0}
    posterior = ppbo.fit(surrogate, data, ppbo.Fixed(params), jax.random.key(0))
    return {
        "np": np,
        "jnp": jnp,
        "jax": jax,
        "ppbo": ppbo,
        "data": data,
        "posterior": posterior,
        "key": jax.random.key(0),
    }


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, context):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, extraglobs=context, optionflags=doctest.ELLIPSIS, verbose=False
    )
    assert result.failed == 0, f"{result.failed} doctest failures in {name}"
