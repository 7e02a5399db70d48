"""Completion: the one asynchronous result below the request handlers.

Invariant: a Completion completes exactly once; callbacks run in the order they were
added, at completion, or at once when added to one already complete. It has no error
channel (a slow answer carries its error code in its value) and imports nothing: the
sans-IO coordinators, the replica manager and its purgatories return Completions, and
the request layer waits on them as they are, with a response or a Failure as the value of
its own (``broker/apis/context.py:settle``); a coroutine handler awaits one as a Deferred.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Iterable, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class Completion(Generic[T]):
    """A value that arrives later: ``c.add_callback(fn)``; ``c.done``/``c.result`` for the fast path."""

    __slots__ = ("_done", "_value", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._callbacks: list[Callable[[T], Any]] = []

    @classmethod
    def completed(cls, value: T) -> "Completion[T]":
        c: Completion[T] = cls.__new__(cls)   # complete from the start: nothing to call back
        c._done, c._value, c._callbacks = True, value, []
        return c

    @classmethod
    def all_of(cls, completions: Iterable["Completion[Any]"]) -> "Completion[None]":
        """Completes (with None) once every one of ``completions`` has."""
        waiting = list(completions)
        out: Completion[None] = Completion()
        left = [len(waiting)]

        def one_done(_: Any) -> None:
            left[0] -= 1
            if left[0] == 0:
                out.complete(None)
        if not waiting:
            out.complete(None)
        for c in waiting:
            c.add_callback(one_done)
        return out

    @property
    def done(self) -> bool:
        return self._done

    @property
    def result(self) -> T:
        if not self._done:
            raise RuntimeError("completion is still pending")
        return self._value

    def complete(self, value: T) -> None:
        if self._done:
            raise RuntimeError("completion completed twice")
        self._done, self._value = True, value
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(value)

    def add_callback(self, fn: Callable[[T], Any]) -> "Completion[T]":
        if self._done:
            fn(self._value)
        else:
            self._callbacks.append(fn)
        return self

    def map(self, fn: Callable[[T], U]) -> "Completion[U]":
        """A Completion of ``fn(value)``."""
        if self._done:
            return Completion.completed(fn(self._value))
        out: Completion[U] = Completion()
        self.add_callback(lambda value: out.complete(fn(value)))
        return out

    def __repr__(self) -> str:
        return f"Completion({self._value!r})" if self._done else "Completion(<pending>)"
