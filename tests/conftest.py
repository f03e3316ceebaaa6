"""Shared pytest configuration."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

pytest_plugins = ["tests.services"]

# "services" keeps property tests inside CI's budget on real stores (DESIGN
# section 10): no deadline, and at least 25 examples, never fewer. The tests
# themselves set neither, so the same assertions run under either profile.
# Tests marked `services` run under it automatically; everything else runs
# under the default profile (or REDSTRING_HYPOTHESIS_PROFILE, if set).
settings.register_profile("services", deadline=None, max_examples=25)
_BASE_PROFILE = os.environ.get("REDSTRING_HYPOTHESIS_PROFILE", "default")
settings.load_profile(_BASE_PROFILE)


@pytest.fixture(autouse=True)
def _hypothesis_profile_for_real_services(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("services") is None:
        yield
        return
    settings.load_profile("services")
    try:
        yield
    finally:
        settings.load_profile(_BASE_PROFILE)
