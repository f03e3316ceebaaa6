from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, runtime_checkable


@runtime_checkable
class AsyncClosable(Protocol):
    """A capability declares its own release
    (docs/adr/0014-store-ports-as-capabilities.md): ``aclose`` and an ``async
    with`` pair, so a caller holding one capability can release it."""

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class ClosingContext:
    """``async with`` for anything with an ``aclose``: enter returns the object,
    exit closes it. Mixed into adapters so each declares only its release."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
