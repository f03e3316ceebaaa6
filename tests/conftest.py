"""Shared pytest configuration."""

import os

from hypothesis import settings

pytest_plugins = ["tests.services"]

# "services" keeps property tests inside CI's budget on real stores (DESIGN
# section 10): no deadline, and at least 25 examples, never fewer. The tests
# themselves set neither, so the same assertions run under either profile.
# Hypothesis binds a test's settings when the test is defined, so the profile
# is chosen per pytest run: `make test` runs the fast layer under "default" and
# the `services` layer under "services" (REDSTRING_HYPOTHESIS_PROFILE).
settings.register_profile("services", deadline=None, max_examples=25)
settings.load_profile(os.environ.get("REDSTRING_HYPOTHESIS_PROFILE", "default"))
