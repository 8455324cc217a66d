"""Test configuration: float64 JAX and a compilation counter."""

import contextlib

import jax
import pytest

jax.config.update("jax_enable_x64", True)

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_compiles = [0]


def _count(event, duration, **kwargs):
    if event == _COMPILE_EVENT:
        _compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count)


class CompileCounter:
    """Counts XLA backend compilations inside a ``with counter.measure():`` block."""

    def __init__(self):
        self.count = 0

    @contextlib.contextmanager
    def measure(self):
        start = _compiles[0]
        try:
            yield self
        finally:
            self.count = _compiles[0] - start


@pytest.fixture
def compile_counter():
    return CompileCounter()


@pytest.fixture(autouse=True, scope="module")
def _fresh_compilation_caches():
    """Drop compiled executables after each test module.

    The suite compiles thousands of programs in one process; jaxlib 0.10.2's CPU
    compiler crashed (segfault inside ``backend_compile``) late in the run once
    they had accumulated, while every module passes on its own. Compilation
    counts inside a module are unaffected.
    """
    yield
    jax.clear_caches()
