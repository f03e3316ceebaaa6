"""The one exception the local stack raises for a problem a person must fix."""

from __future__ import annotations


class DevstackError(Exception):
    """A problem with a one-line explanation (no Java 17, port taken, ...).

    The CLI prints ``str(error)`` alone, without a traceback, and exits 1.
    """
