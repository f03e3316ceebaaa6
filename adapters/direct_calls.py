"""A store's direct calls, each made through a unit-of-work view.

Every backend writes a port method once, on its unit-of-work view, and its
store answers a direct call by running that same method on a view of its own
making: over committed state, one managed statement, or a pooled connection
with retries. How the store makes the view and what it wraps around the call
is the store's business (``DirectCalls``); ``reads`` and ``writes`` turn a
view's method into the store's method of the same name and signature, so a
store does not restate each one.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

__all__ = ["DirectCalls", "reads", "writes"]

P = ParamSpec("P")
T = TypeVar("T")
View = TypeVar("View")
View_co = TypeVar("View_co", covariant=True)

Method = Callable[Concatenate[View, P], Coroutine[Any, Any, T]]


class DirectCalls(Protocol[View_co]):
    """What a store wraps around one direct call; ``name`` is the method's."""

    async def _direct_read(self, name: str, call: Callable[[View_co], Awaitable[T]]) -> T: ...

    async def _direct_write(self, name: str, call: Callable[[View_co], Awaitable[T]]) -> T: ...


def _replayable(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    # A store may run the call again (a retry): an iterator must give the
    # same values the second time.
    for key, value in kwargs.items():
        if isinstance(value, Iterator):
            kwargs[key] = list(value)
    return tuple(list(a) if isinstance(a, Iterator) else a for a in args)


def _direct(
    method: Method[View, P, T], *, write: bool
) -> Callable[Concatenate[DirectCalls[View], P], Coroutine[Any, Any, T]]:
    name = method.__name__

    async def direct(store: DirectCalls[View], /, *args: P.args, **kwargs: P.kwargs) -> T:
        again = _replayable(args, kwargs)
        run = store._direct_write if write else store._direct_read
        return await run(name, lambda view: method(view, *again, **kwargs))

    # Callers that look at a method (help, a wrapper binding arguments by
    # name) see the view's signature, not ``*args, **kwargs``.
    direct.__name__ = direct.__qualname__ = name
    direct.__doc__ = method.__doc__
    direct.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return direct


def reads(
    method: Method[View, P, T],
) -> Callable[Concatenate[DirectCalls[View], P], Coroutine[Any, Any, T]]:
    """The store's ``method``: a read, run on the view the store makes for it."""
    return _direct(method, write=False)


def writes(
    method: Method[View, P, T],
) -> Callable[Concatenate[DirectCalls[View], P], Coroutine[Any, Any, T]]:
    """The store's ``method``: a write, run on the view the store makes for it."""
    return _direct(method, write=True)
