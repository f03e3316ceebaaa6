"""The compliance suites: what each store port means, as tests an adapter runs.

PYTEST_DONT_REWRITE (this module holds no assertions; see below.)

Written once and run against every adapter, redstring's own and anyone else's
(docs/adr/0012-compliance-suites-and-coverage-gates.md; docs/adapters.md says
how to write a fourth adapter). An adapter's test module subclasses one class
per port it implements and provides the fixture the class names:

- :class:`GraphStoreCompliance`: an async fixture ``store`` yielding a
  ``ProjectedGraphStore``;
- :class:`VectorStoreCompliance`: an async fixture ``store`` yielding a
  ``ProjectedVectorStore`` of the ``dimension`` fixture's dimension;
- :class:`LedgerCompliance`: an async fixture ``store`` (the adapter's store, whose
  ledger this checks) and the hooks ``write_tenant_fact`` and ``has_tenant_fact``.

Needs pytest, pytest-asyncio in ``asyncio_mode = "auto"`` and hypothesis: the
``compliance`` extra (``pip install 'redstring-projector[compliance]'``).
"""

import pytest

# The suites are plain ``assert`` statements in an installed package, which pytest
# rewrites (to show both sides of a failing comparison) only in test modules and
# conftest files unless asked before the modules are imported. Asking here gives
# every adapter's run the same failure messages without a conftest line of its
# own. This module itself is imported by then, hence PYTEST_DONT_REWRITE above,
# which keeps pytest from warning that it cannot rewrite it.
pytest.register_assert_rewrite("adapters.compliance")

from adapters.compliance.graph_store import GraphStoreCompliance  # noqa: E402
from adapters.compliance.ledger import LedgerCompliance  # noqa: E402
from adapters.compliance.vector_store import VectorStoreCompliance  # noqa: E402

__all__ = ["GraphStoreCompliance", "LedgerCompliance", "VectorStoreCompliance"]
