"""A harness killed with SIGKILL leaves the processes it had paused for quiet timing stopped forever;
the next evaluator to start kills them, and leaves the processes of a live harness alone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

from pike_harness.worker.supervise import sandbox

# A stand-in harness: starts a marked process in its own session, pauses it as quiet timing does,
# reports its pid, then waits to be killed.
HARNESS = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from pike_harness.worker.supervise import sandbox
    env = {**os.environ, **sandbox.marker_environment(sys.argv[1])}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env,
                             start_new_session=True)
    os.killpg(child.pid, signal.SIGSTOP)
    print(child.pid, flush=True)
    time.sleep(600)
""")


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()[0]


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_paused_candidates_of_a_killed_harness_are_swept_and_a_live_harness_is_spared(tmp_path, caplog, monkeypatch):
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    orphan_harness = subprocess.Popen([sys.executable, "-c", HARNESS, "orphan"], stdout=subprocess.PIPE, text=True)
    live_harness = subprocess.Popen([sys.executable, "-c", HARNESS, "live"], stdout=subprocess.PIPE, text=True)
    try:
        orphan = int(orphan_harness.stdout.readline())
        live = int(live_harness.stdout.readline())
        assert _wait_for(lambda: _state(orphan) == "T" and _state(live) == "T"), "both start paused"
        orphan_harness.kill()
        orphan_harness.wait(timeout=10)

        # Starting an evaluator sweeps (what `pikeh run --resume` does after the crash). Any engine
        # on this host sweeps when it starts, and other test workers start engines at any moment: the
        # orphan's state is read as this evaluator's sweep begins, and its log is asserted only if
        # the orphan was still there for it to kill.
        at_sweep: list[str | None] = []
        real_sweep = sandbox.sweep_orphans

        def sweep_orphans(**kwargs):
            at_sweep.append(_state(orphan))
            return real_sweep(**kwargs)

        monkeypatch.setattr(sandbox, "sweep_orphans", sweep_orphans)
        evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=tmp_path / "work",
                                                    config=LocalEvaluator.Config(prestart=0, build_cache="off")))
        evaluator.close()
        assert at_sweep, "starting an evaluator sweeps"
        if at_sweep[0] == "T":  # it outlived its harness paused, as it would with no sweep at all
            assert re.search(r"killed [1-9]\d* process\(es\) left by an earlier harness", caplog.text)
        assert _wait_for(lambda: _state(orphan) in (None, "Z")), "the orphan is killed"
        assert _state(live) == "T", "a live harness's paused process is left alone"
    finally:
        for harness in (orphan_harness, live_harness):
            harness.kill()
            harness.wait(timeout=10)
        for pid in (locals().get("orphan"), locals().get("live")):
            if pid and _state(pid) not in (None, "Z"):
                os.killpg(pid, signal.SIGKILL)


def test_an_owner_in_another_pid_namespace_is_never_judged_dead():
    assert not sandbox._owner_gone("pid:[1]/1/1"), "a container's pids mean other processes here"
    assert not sandbox._owner_gone("garbage")
    own = sandbox.marker_environment("x")[sandbox.OWNER_ENV]
    assert not sandbox._owner_gone(own), "this process is alive"
    namespace, pid, started = own.rsplit("/", 2)
    assert sandbox._owner_gone(f"{namespace}/{pid}/{int(started) + 1}"), "a reused pid is a different owner"
