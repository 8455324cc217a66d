"""Test configuration: float64 JAX and a compilation counter."""

import contextlib
import os

# Compile with LLVM's light optimisation level: the suite runs tiny MCMC settings,
# where compiling costs more than running (measured alone on 2 cores: notebook 03
# in 33 s instead of 39 s, a NUTS transfer campaign test in 28 s instead of 31 s).
# Level 0 is not used: its code gave NaN gradients of the knowledge gradient that
# levels 1 and up do not. Set before JAX creates its CPU backend, and inherited by
# the processes the tests start (CLI runs, notebook kernels). Users' programs keep
# XLA's defaults; PPBO_TEST_FAST_COMPILE=0 restores them here.
if os.environ.get("PPBO_TEST_FAST_COMPILE", "1") != "0":
    _flag = "--xla_backend_optimization_level=1"
    if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

# A persistent compilation cache shared by the test modules and xdist workers of a
# run: modules drop their in-memory executables (below), and later modules that
# compile the same programs then load them from disk instead of compiling again.
if os.environ.get("PPBO_TEST_COMPILATION_CACHE", "1") != "0":
    _cache = os.environ.get("PPBO_TEST_COMPILATION_CACHE_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        ".pytest_cache",
        "jax-compilation",
    )
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    # The processes the tests start (CLI runs, killed-and-resumed campaigns, Ray
    # workers, notebook kernels) read JAX's configuration from the environment,
    # so they share the cache too: a resumed process loads what the killed one
    # compiled.
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.2"

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


def _ask_tell(make, load, value, steps, stop_at=None):
    """Ask/tell ``steps`` times on ``make()``; with ``stop_at``, the process is
    "killed" after ask ``stop_at`` (not told), the campaign reloaded with
    ``load()``, its RUNNING trials told, and the loop goes on. Returns the trials."""
    import warnings

    import ppbo

    opt = make()
    for step in range(steps):
        if step == stop_at:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ppbo.CampaignWarning)
                opt = load()
            for trial in opt.get_trials("RUNNING"):
                opt.tell(trial, value(trial))
            continue
        trial = opt.ask()
        if stop_at is not None and step == stop_at - 1:
            continue  # "killed" after the ask, before the tell
        opt.tell(trial, value(trial))
    return opt.get_trials()


@pytest.fixture
def interrupted_campaign():
    """The ask/tell loop of the exact-resume tests, optionally interrupted."""
    return _ask_tell
