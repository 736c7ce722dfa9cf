"""JSON-lines messages over a pair of pipe file descriptors, with deadlines on the reading side and,
for the trusted end of a candidate's channel, on the writing side too.

The supervisor talks to a candidate's process and to the reference process this way. Reads are
bounded in time (a hung peer is a timeout, not a hung evaluator) and in size (a peer that floods the
pipe is a protocol violation, not an out-of-memory supervisor). Writes to a candidate's process are
bounded in time (``send_timeout_s``): the candidate shares its process with our child, so it can send
requests that each earn a reply and never read the replies; once the pipe is full a blocking write
would hold the supervisor's thread (and the device lock it may hold) forever. Messages nested deeper
than ``MAX_NESTING`` are refused unread. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import time
from typing import Any

from pike_harness.worker.json_depth import nests_within

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# Lists and objects in one message, at most: the harness's own nest 5 deep. A deeper one (from a
# candidate sharing a process with our child) is refused before json.loads, which recurses per level,
# and before the walks of a result that would recurse through it (masking, field checks).
MAX_NESTING = 32


class ChannelClosed(Exception):
    """The peer closed its end (it exited or crashed)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


class ProtocolViolation(Exception):
    """The peer sent something that is not a message of the protocol."""


class ChannelStalled(Exception):
    """The peer left the pipe full past the send deadline: it stopped reading its messages."""


class Channel:
    """One reading fd and one writing fd; ``receive`` polls so callers can watch the peer meanwhile.

    With ``send_timeout_s`` the writing fd is made non-blocking and ``send`` waits at most that long for
    room in the pipe (a peer that reads its messages leaves the pipe nearly empty, so only one that
    stopped reading ever makes it wait); without it a write blocks as a plain pipe write does."""

    def __init__(self, read_fd: int, write_fd: int, *, send_timeout_s: float | None = None):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.send_timeout_s = send_timeout_s
        # Read but not yet returned: ``_buffer[_start:]``. An offset, not a slice per message: re-slicing
        # a 1 MB read of tiny messages copied it once per message (quadratic: a candidate flooding the
        # channel kept the supervisor's thread busy, an audit of 2026-12-01).
        self._buffer = bytearray()
        self._start = 0
        if send_timeout_s is not None:
            os.set_blocking(write_fd, False)

    def send(self, message: dict[str, Any], timeout_s: float | None = None) -> None:
        """Write one message; ``timeout_s`` replaces ``send_timeout_s`` for it (a first message larger
        than the pipe waits for a peer that is still starting up)."""
        self.send_bytes((json.dumps(message) + "\n").encode(), timeout_s)

    def send_bytes(self, data: bytes | bytearray, timeout_s: float | None = None) -> None:
        """Write ``data`` as it is, bounded in time as ``send`` is: a frame the peer asked for and reads
        with ``receive_bytes`` (the fresh sets' seeds), never a message of its own."""
        view = memoryview(data)
        limit = timeout_s if timeout_s is not None else self.send_timeout_s
        deadline = None if self.send_timeout_s is None or limit is None else time.monotonic() + limit
        while view:
            try:
                written = os.write(self.write_fd, view)
            except BlockingIOError:
                assert deadline is not None  # only a non-blocking fd raises it
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelStalled(f"the peer left its pipe full for {limit:g} s") from None
                select.select([], [self.write_fd], [], min(remaining, 0.1))
                continue
            view = view[written:]

    def receive(self, deadline: float | None, poll_s: float = 0.1) -> dict[str, Any] | None:
        """The next message; None when ``poll_s`` passed without one (so the caller can check on the peer).

        Raises ChannelTimeout once ``deadline`` (a ``time.monotonic`` value) has passed.
        """
        while True:
            newline = self._buffer.find(b"\n", self._start)
            if newline >= 0:
                line = bytes(self._buffer[self._start:newline])
                self._start = newline + 1
                if not nests_within(line, MAX_NESTING):
                    raise ProtocolViolation(f"message nested deeper than {MAX_NESTING} lists and objects: "
                                            f"{line[:200]!r}")
                try:
                    message = json.loads(line)
                except Exception as exc:  # not JSON, not UTF-8, nested past the recursion limit ([[[[...)
                    raise ProtocolViolation(f"unreadable message ({type(exc).__name__}): {line[:200]!r}") from None
                if not isinstance(message, dict):
                    raise ProtocolViolation(f"message is not an object: {line[:200]!r}")
                return message
            wait = poll_s
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ChannelTimeout()
                wait = min(wait, remaining)
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise ChannelClosed()
            del self._buffer[:self._start]
            self._start = 0
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE_BYTES:
                raise ProtocolViolation("message larger than the protocol allows")

    def receive_bytes(self, size: int, deadline: float | None) -> bytearray:
        """The next ``size`` bytes as they are (a frame the peer sends after a message of this side's asks
        for it), read into one buffer that the caller can wipe, with no other copy left in this process:
        what was already read past the last message is moved out of ``_buffer`` and zeroed there, the
        rest is read straight into the frame. Why: a secret sent inside a JSON line stays readable in
        the reader's memory (the line, its decoded text, the numbers' text), and the child's memory is
        the candidate's to read (the fresh sets' seeds, found there by an audit, 2026-12-01)."""
        frame = bytearray(size)
        have = min(size, len(self._buffer) - self._start)
        frame[:have] = self._buffer[self._start:self._start + have]
        self._buffer[self._start:self._start + have] = bytes(have)
        self._start += have
        view = memoryview(frame)
        while have < size:
            wait = None
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise ChannelTimeout()
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if not ready:
                continue
            got = os.readv(self.read_fd, [view[have:]])
            if not got:
                raise ChannelClosed()
            have += got
        return frame

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
