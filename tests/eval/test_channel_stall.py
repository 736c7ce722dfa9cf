"""A candidate that never reads the replies it asks for cannot hold the supervisor.

The candidate shares its process with our child, so it can write requests to the worker's channel
that each earn a reply (``build``) while the child, busy importing it, reads none. Once the 64 KiB
pipe is full a blocking write would hold the supervisor's thread forever, and with it the device lock
and the engine's shutdown. The write side is bounded in time instead (``Channel.send_timeout_s``)."""

from __future__ import annotations

import concurrent.futures
import os
import secrets
import threading
import time

import pytest
from corpus_cases import SMOKE, processes_with

from pike_harness.worker.channel import Channel, ChannelStalled

FLOOD = '''
import json
import os
import sys
import time

import torch.nn as nn

_PROBE = "{probe}"  # in the sleeper's command line below: a process left alive shows it
_line = (json.dumps({{"event": "build", "spec": None}}) + "\\n").encode()
for _ in range(20000):  # each earns a reply; our child, inside this import, reads none of them
    os.write(int(sys.argv[2]), _line)
os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(3600)", _PROBE])


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def test_a_send_into_a_pipe_nobody_reads_stops_at_its_deadline():
    read_fd, write_fd = os.pipe()
    channel = Channel(os.open(os.devnull, os.O_RDONLY), write_fd, send_timeout_s=0.2)
    try:
        with pytest.raises(ChannelStalled):
            for _ in range(100_000):  # 64 KiB of pipe fills long before this ends
                channel.send({"build": {"fallback": True}})
    finally:
        channel.close()
        os.close(read_fd)


def test_a_send_with_room_in_the_pipe_is_whole():
    read_fd, write_fd = os.pipe()
    channel = Channel(os.open(os.devnull, os.O_RDONLY), write_fd, send_timeout_s=0.2)
    try:
        channel.send({"cmd": "warm", "pad": "x" * 1000})
        assert os.read(read_fd, 1 << 16).endswith(b"}\n")
    finally:
        channel.close()
        os.close(read_fd)


def test_a_first_message_larger_than_the_pipe_waits_for_a_peer_still_starting():
    """The request carries the sources and may exceed the 64 KiB pipe; a new process reads it only once
    it has imported torch. Its own longer limit lets it wait for that."""
    read_fd, write_fd = os.pipe()
    channel = Channel(os.open(os.devnull, os.O_RDONLY), write_fd, send_timeout_s=0.2)
    received = bytearray()

    def late_reader() -> None:
        time.sleep(0.5)  # longer than the default send deadline
        while not received.endswith(b"\n"):
            received.extend(os.read(read_fd, 1 << 16))

    reader = threading.Thread(target=late_reader)
    reader.start()
    try:
        channel.send({"request": "x" * (256 * 1024)}, timeout_s=60)
        reader.join(timeout=60)
        assert len(received) > 256 * 1024
    finally:
        channel.close()
        os.close(read_fd)


def test_a_candidate_flooding_the_channel_is_judged_and_leaves_nothing(tmp_path):
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    probe = f"pikeh-channel-flood-{secrets.token_hex(6)}"
    # No build cache: every build request earns a reply. No pre-started process: each request goes to a
    # process that is still importing torch, the case where a large request must wait for its reader.
    evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=tmp_path / "work",
                                                config=LocalEvaluator.Config(jobs=1, prestart=0)))
    try:
        task = SMOKE.task(1)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            # The bound only turns a hung supervisor into a failure; the verdict comes once the
            # 20 s send deadline passes.
            result = pool.submit(evaluator.evaluate, task.eval_request(FLOOD.format(probe=probe))).result(timeout=500)
        assert (result.category, result.check) == ("rejected", "protocol"), result.reason
        assert "stopped reading the worker's channel" in (result.reason or "")
        deadline = time.monotonic() + 10  # the kill is synchronous; this only absorbs /proc's lag
        while processes_with(probe.encode()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with(probe.encode()) == []
        # The engine was not left holding anything; and a request larger than the pipe (the source
        # padded past 64 KiB) goes through.
        padded = task.path.read_text(encoding="utf-8") + "\n# " + "x" * (200 * 1024) + "\n"
        honest = evaluator.evaluate(task.eval_request(padded))
        assert honest.category == "correct", honest.reason
    finally:
        evaluator.close()
