"""A pure judgement of a request's string, remembered for short values only.

Some strings are judged on every request (the client's host, the body's content type);
clients send a few distinct short values, so their answers are worth remembering. Any
client may also send a long value: that one is judged and forgotten, so no client can
grow the memo by more than ``size`` short entries.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ShortMemo", "remember_short"]

_T = TypeVar("_T")


class ShortMemo(Generic[_T]):
    """``judge`` of a string, remembered (at most ``size``) when it is at most ``longest`` long."""

    def __init__(self, judge: Callable[[str], _T], *, longest: int, size: int) -> None:
        self.longest = longest
        self._judge = judge
        self._remembered = functools.lru_cache(maxsize=size)(judge)
        functools.update_wrapper(self, judge)

    def __call__(self, value: str) -> _T:
        if len(value) <= self.longest:
            return self._remembered(value)
        return self._judge(value)

    def cache_info(self) -> functools._CacheInfo:
        """How many answers are remembered (and how often one was used)."""
        return self._remembered.cache_info()


def remember_short(*, longest: int, size: int) -> Callable[[Callable[[str], _T]], ShortMemo[_T]]:
    """Decorate a pure ``str -> answer`` function as a :class:`ShortMemo`."""

    def decorate(judge: Callable[[str], _T]) -> ShortMemo[_T]:
        return ShortMemo(judge, longest=longest, size=size)

    return decorate
