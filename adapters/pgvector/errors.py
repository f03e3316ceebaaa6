"""Which Postgres failures are worth retrying, and how.

Transient: the connection went away or could not be made, the server is
starting or shutting down, too many connections, a serialization failure
(40001) or a deadlock (40P01). Each of those says nothing about the data, so
the same work may succeed a moment later.

* A direct call (its own short transaction) is retried here, with exponential
  backoff and jitter, and raises ``TransientStoreError`` only when the retries
  are used up.
* Inside a unit of work nothing is retried: the transaction is lost with the
  error, and only the caller can redo the whole batch. The error surfaces as
  ``TransientStoreError`` at once (the agent retries the batch; the checkpoint
  fence makes the redo exact).

A retried write whose COMMIT was sent but whose answer was lost may have been
applied: every write of this adapter is idempotent (upserts, alias facts, an
equal checkpoint is a no-op), except that ``unhide`` may then answer False
and ``expire_applied_events`` may count fewer rows.

Permanent: a value Postgres refuses (SQLSTATE classes 22 and 23, or text it
cannot encode). Retrying cannot help; it becomes ``PermanentStoreError``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import asyncpg

from contracts.errors import PermanentStoreError, TransactionEndedError, TransientStoreError

__all__ = ["RetryPolicy", "breaks_connection", "is_transient", "translated", "with_retries"]

T = TypeVar("T")

# The server ended a session left idle in a transaction: its locks are free,
# and nothing of the transaction was committed (ADR 0021).
IDLE_IN_TRANSACTION_TIMEOUT = "25P03"
_TRANSIENT_STATES = frozenset({"40001", "40P01", "53300", "57P01", "57P02", "57P03"})
# asyncpg's client-side "invalid input for query argument": an InterfaceError
# that is a ValueError, raised before anything is sent.
_InputError = asyncpg.exceptions._base.DataError


def breaks_connection(error: BaseException) -> bool:
    """Whether the connection that raised ``error`` is no use any more."""
    if isinstance(error, asyncpg.PostgresError):
        state = getattr(error, "sqlstate", None) or ""
        return state.startswith("08") or state in {
            IDLE_IN_TRANSACTION_TIMEOUT,
            "57P01",
            "57P02",
            "57P03",
        }
    if isinstance(error, _InputError):
        return False
    if isinstance(error, asyncpg.exceptions._base.InternalClientError):
        # A backend killed while its connection sat idle in the pool leaves
        # asyncpg's protocol waiting to consume an error that never completes;
        # the next query on it fails like this before the loss is noticed.
        return True
    if isinstance(error, asyncpg.InterfaceError):
        # "connection is closed", "pool is closing", and "released back to the
        # pool" (the pool detaches a held connection whose server went away):
        # the connection is gone mid-call. Other interface errors are misuse,
        # and retrying would hide them.
        message = str(error)
        return "clos" in message or "released back to the pool" in message
    # Refused, reset, unreachable, timed out: before Postgres says anything.
    return isinstance(error, OSError | TimeoutError)


def is_transient(error: BaseException) -> bool:
    if isinstance(error, asyncpg.PostgresError):
        state = getattr(error, "sqlstate", None) or ""
        if state in _TRANSIENT_STATES:
            return True
    return breaks_connection(error)


def _is_permanent(error: BaseException) -> bool:
    if isinstance(error, UnicodeEncodeError | _InputError):
        return True
    if isinstance(error, asyncpg.PostgresError):
        state = getattr(error, "sqlstate", None) or ""
        return state[:2] in {"22", "23"}
    return False


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Turn a driver error into the port's error kinds; anything else (a bug,
    a missing table) passes through unchanged so that it is seen as such."""
    try:
        yield
    except (TransientStoreError, PermanentStoreError):
        raise
    except Exception as error:
        if getattr(error, "sqlstate", None) == IDLE_IN_TRANSACTION_TIMEOUT:
            raise TransactionEndedError(f"{where}: {type(error).__name__}: {error}") from error
        if is_transient(error):
            raise TransientStoreError(f"{where}: {type(error).__name__}: {error}") from error
        if _is_permanent(error):
            raise PermanentStoreError(f"{where}: {type(error).__name__}: {error}") from error
        raise


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    first_delay: float = 0.05
    max_delay: float = 2.0

    def delays(self) -> Iterator[float]:
        delay = self.first_delay
        for _ in range(self.attempts - 1):
            # Full jitter: workers that failed together do not retry together.
            yield random.uniform(0.0, delay)
            delay = min(delay * 2, self.max_delay)


async def with_retries(policy: RetryPolicy, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt`` until it does not fail transiently, or the policy is spent."""
    delays = policy.delays()
    while True:
        try:
            return await attempt()
        except TransientStoreError:
            delay = next(delays, None)
            if delay is None:
                raise
            await asyncio.sleep(delay)
