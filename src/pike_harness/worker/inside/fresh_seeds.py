"""The fresh sets' seeds in the candidate's process: read as one binary frame, handed out one by one,
then wiped.

The fresh sets (``timing.FreshCalls``) are made from seeds the supervisor draws, before the candidate
is imported; whoever knows a seed can make its set and answer it from a cache. The candidate cannot
ask the supervisor, but it can read its own process's memory (``/proc/self/mem``, ``ctypes``, native
code), and an audit (2026-12-01) found all 40 seeds there by searching for the JSON text that had
carried them (``"fresh": {"seeds": [``): the message's line, its decoded text and each number's text
outlive the parse, and Python cannot wipe them. So the seeds come in a frame of their own, 8 bytes
each, that this process asks for before the import (``Channel.receive_bytes``: no copy but the
frame), each becomes an ``int`` only when its set is made, and the frame and those ints are zeroed
once the sets exist.

What is left is documented, not defended: the RNGs' own seeding leaves freed allocator blocks that
can hold a seed or part of one (Python's ``random.seed`` key buffer, numpy's 32-bit seed), with
nothing to tell them from any other freed block; a candidate that tried every such word as a seed
could still find it. Standard library only.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterator

SEED_BYTES = 8
_FORMAT = "<Q"


def frame(seeds: list[int]) -> bytes:
    """The supervisor's side: ``seeds`` as the frame the child reads (``FrameSeeds``)."""
    return b"".join(struct.pack(_FORMAT, seed) for seed in seeds)


def _wipe_int(value: int) -> None:
    """Zero an ``int``'s digits in place. Only for an int this module made (``struct.unpack_from``) and
    past its use: CPython shares the small ones, never these (above 256)."""
    if type(value) is int and value > 256:
        digits = (value.bit_length() + 29) // 30  # CPython's digits are 30 bits
        ctypes.memset(id(value) + int.__basicsize__, 0, digits * int.__itemsize__)


class FrameSeeds:
    """The seeds in ``frame`` (``SEED_BYTES`` each, little-endian), one int at a time; ``wipe`` zeroes
    the frame and every int handed out. Use: ``try: ... for seed in seeds ... finally: seeds.wipe()``."""

    def __init__(self, frame: bytearray):
        self._frame = frame
        self._given: list[int] = []

    def __len__(self) -> int:
        return len(self._frame) // SEED_BYTES

    def __iter__(self) -> Iterator[int]:
        for offset in range(0, len(self) * SEED_BYTES, SEED_BYTES):
            (seed,) = struct.unpack_from(_FORMAT, self._frame, offset)
            self._given.append(seed)
            yield seed

    def wipe(self) -> None:
        for seed in self._given:
            _wipe_int(seed)
        self._given.clear()
        self._frame[:] = bytes(len(self._frame))
