"""One local Ray cluster for the Ray tests of this folder (its start costs seconds)."""

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster with two CPUs, shut down after the last Ray test."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    yield ray
    if started:
        ray.shutdown()
