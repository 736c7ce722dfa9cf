"""The fresh sets' seeds cross to the candidate's process as a frame of their own, read into one buffer
and zeroed after use (``worker.inside.fresh_seeds``, ``Channel.receive_bytes``): no JSON text of them
is left in the process the candidate can read (an audit found all 40 there, 2026-12-01)."""

from __future__ import annotations

import os
import struct

import pytest

from pike_harness.worker.channel import Channel, ChannelTimeout
from pike_harness.worker.inside import fresh_seeds

SEEDS = [0x1234_5678_9ABC_DEF1, 0x7FFF_FFFF_FFFF_FFFF, 2**40 + 17]


def _pair() -> tuple[Channel, Channel]:
    a_read, b_write = os.pipe()
    b_read, a_write = os.pipe()
    return Channel(a_read, a_write), Channel(b_read, b_write)


def test_the_frame_follows_a_message_already_read_past_and_leaves_no_copy_in_the_buffer():
    child, supervisor = _pair()
    try:
        # The supervisor's frame can arrive in the same read as the message before it.
        supervisor.send({"request": "x" * 5000})
        supervisor.send_bytes(fresh_seeds.frame(SEEDS))
        assert child.receive(deadline=None, poll_s=1.0) == {"request": "x" * 5000}
        frame = child.receive_bytes(len(SEEDS) * fresh_seeds.SEED_BYTES, deadline=None)
        assert bytes(frame) == fresh_seeds.frame(SEEDS)
        assert fresh_seeds.frame(SEEDS)[:8] not in bytes(child._buffer)  # zeroed where it was read ahead
        supervisor.send({"cmd": "next"})  # the line after the frame is read as before
        assert child.receive(deadline=None, poll_s=1.0) == {"cmd": "next"}
    finally:
        child.close()
        supervisor.close()


def test_the_seeds_are_handed_out_in_order_and_wiped_with_their_frame():
    frame = bytearray(fresh_seeds.frame(SEEDS))
    seeds = fresh_seeds.FrameSeeds(frame)
    given = list(seeds)
    assert given == SEEDS and len(seeds) == 3
    seeds.wipe()
    assert frame == bytearray(len(frame))
    assert [value + 0 for value in given] == [0, 0, 0]  # the very ints handed out, their digits zeroed in place


def test_a_frame_short_of_its_size_times_out():
    child, supervisor = _pair()
    try:
        supervisor.send_bytes(struct.pack("<Q", SEEDS[0]))
        with pytest.raises(ChannelTimeout):
            import time
            child.receive_bytes(2 * fresh_seeds.SEED_BYTES, deadline=time.monotonic() + 0.2)
    finally:
        child.close()
        supervisor.close()
