"""A least-recently-used map with a cap on the bytes its values hold, for the reference process.

The reference process keeps what it computed for a task (its input sets, its reference outputs, on
the device when the device is a GPU) so that the next candidate of the same task is compared
against them without running the reference again: with hidden inputs from a per-run pool
(``reference.ReferenceOracle.hidden_seeds``), every candidate of a task uses the same input sets. The
cap bounds what a long run with many tasks can pin; a value larger than the cap is never kept.
Standard library only (sizes come from the caller).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0  # each one a computation
    evictions: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions}


class ByteLRU:
    """``get_or_make(key, make, size_of)``: the cached value, or ``make()`` kept under the byte cap."""

    def __init__(self, cap_bytes: int):
        self.cap_bytes = max(0, int(cap_bytes))
        self.held_bytes = 0
        self.stats = CacheStats()
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get_or_make(self, key: Hashable, make: Callable[[], Any], size_of: Callable[[Any], int]) -> tuple[Any, bool]:
        """``(value, made)``: ``made`` is True when ``make`` ran (a miss)."""
        if key in self._items:
            self._items.move_to_end(key)
            self.stats.hits += 1
            return self._items[key][0], False
        value = make()
        self.stats.misses += 1
        self.put(key, value, size_of(value))
        return value, True

    def put(self, key: Hashable, value: Any, size: int) -> None:
        if key in self._items:
            self.held_bytes -= self._items.pop(key)[1]
        if size > self.cap_bytes:
            return
        while self._items and self.held_bytes + size > self.cap_bytes:
            _, (_, freed) = self._items.popitem(last=False)
            self.held_bytes -= freed
            self.stats.evictions += 1
        self._items[key] = (value, size)
        self.held_bytes += size


def tensor_bytes(value: Any) -> int:
    """Bytes held by the tensors in a (nested) list or tuple; other values count nothing."""
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(item) for item in value)
    numel, element_size = getattr(value, "numel", None), getattr(value, "element_size", None)
    if callable(numel) and callable(element_size):
        return int(numel()) * int(element_size())
    return 0
