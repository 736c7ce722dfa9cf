"""The quiet rule on its own: inside ``timing_quiet`` a registered process of ours is stopped and the
reference process writes no input set; both resume when the block ends. States and orders seen from
outside the processes, never durations."""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time

from perf_helpers import candidate, request

from pike_harness.worker.supervise import sandbox
from pike_harness.worker.supervise.engine.quiet_rule import timing_quiet


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _wait_state(pid: int, wanted: set[str]) -> str:
    for _ in range(200):
        state = _state(pid)
        if state in wanted:
            return state
        time.sleep(0.02)
    return _state(pid)


def test_inside_a_timing_our_processes_are_stopped_and_the_reference_writes_nothing(make_local, tmp_path):
    evaluator = make_local(jobs=1, prestart=0)
    engine = evaluator.engine
    marker = secrets.token_hex(12)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True,
                            env=sandbox.marker_environment(marker))
    token = engine.quiet.add(busy.pid, marker, "cpu")
    oracle = engine.oracle("cpu")
    oracle.start()
    req = request(candidate())
    written: list[float] = []

    def write() -> None:
        oracle.write_inputs(req, [7], tmp_path / "inputs.pt", timeout_s=120)
        written.append(time.monotonic())

    try:
        with timing_quiet(engine, "cpu", session=None):
            state = _wait_state(busy.pid, {"T", "t"})
            # Seen once in a parallel clean-clone run (state R): the process was registered while its exec
            # was still under way (its environ read empty, so it was not recognised as ours and not
            # stopped). ``QuietRegistry.add`` now waits for the environment (``await_environment``).
            assert state in {"T", "t"}, (f"a registered process ran during the timing: state {state}, "
                                         f"marker seen {sandbox.has_marker(busy.pid, f'{sandbox.MARKER_ENV}={marker}'.encode())}, "
                                         f"stopped tokens {sorted(engine.quiet._stopped)}, token {token}, "
                                         f"quiet windows {engine.quiet._quiet}, pauses {engine.quiet.pauses}")
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(timeout=1.0)
            assert writer.is_alive() and not written, "the reference wrote inputs during the timing"
            ended = time.monotonic()
        writer.join(timeout=120)
        assert written and written[0] > ended
        assert _wait_state(busy.pid, {"R", "S"}) in {"R", "S"}, "it was not resumed"
    finally:
        engine.quiet.remove(token)
        busy.kill()
        busy.wait()
