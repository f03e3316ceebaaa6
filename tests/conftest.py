"""Shared pytest configuration."""

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

pytest_plugins = ["tests.services"]

# "services" keeps property tests inside CI's budget on real stores
# (docs/design.md 10): no deadline, and at least 25 examples, never fewer. The tests
# themselves set neither, so the same assertions run under either profile.
# Hypothesis binds a test's settings when the test is defined, so the profile
# is chosen per pytest run: `make test` runs the fast layer under "default" and
# the `services` layer under "services" (REDSTRING_HYPOTHESIS_PROFILE).
settings.register_profile("services", deadline=None, max_examples=25)
# "fuzz" (`make fuzz`): the fast layer's properties with many more examples
# (REDSTRING_FUZZ_EXAMPLES, 1000 by default), fresh ones each run.
settings.register_profile(
    "fuzz",
    deadline=None,
    max_examples=int(os.environ.get("REDSTRING_FUZZ_EXAMPLES", "1000")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
settings.load_profile(os.environ.get("REDSTRING_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session", autouse=True)
def _hypothesis_character_tables() -> None:
    """Hypothesis builds its UTF-8 character table the first time a text
    strategy is validated: seconds in a fresh clone, cached under .hypothesis/
    after. Paying it here keeps it out of whichever property draws text first,
    where the too_slow health check would count it against that test. (Not at
    import time: hypothesis warns against slow work during conftest loading.)"""
    st.text().validate()
