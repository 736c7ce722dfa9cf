"""Fixtures for the evaluator tests: one CPU evaluator per session, and the whole CPU corpus
evaluated once, concurrently, so each corpus test only reads its result."""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from corpus_cases import SMOKE, cases

SECRET_NAME = "PIKEH_TEST_API_KEY"
ESCAPE_ENV = "LC_PIKEH_ESCAPE_PROBE"  # LC_ passes the environment scrub: where sandbox_reach_out.py aims


@dataclass
class EscapeProbe:
    """A loopback listener and file paths outside any sandbox, for hostile candidates to aim at."""

    port: int
    files: list[Path]
    accepted: list[bytes] = field(default_factory=list)

    def description(self) -> str:
        return f"port={self.port};files={','.join(str(f) for f in self.files)}"


@pytest.fixture(scope="session")
def escape_probe(tmp_path_factory):
    """Listen on loopback and name files in the task folder, $HOME, /tmp and the evaluator's folder."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    token = secrets.token_hex(6)
    home = Path(os.environ.get("HOME") or tempfile.gettempdir())
    workdir = tmp_path_factory.getbasetemp()
    probe = EscapeProbe(port=server.getsockname()[1], files=[
        SMOKE.path / f"pikeh-escape-{token}", home / f"pikeh-escape-{token}",
        Path(tempfile.gettempdir()) / f"pikeh-escape-{token}", workdir / f"pikeh-escape-{token}"])

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    probe.accepted.append(conn.recv(100) or b"connected")
                except OSError:
                    probe.accepted.append(b"connected")

    threading.Thread(target=accept, daemon=True).start()
    yield probe
    server.close()
    for path in probe.files:
        path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def secret_value() -> str:
    return "sk-test-" + secrets.token_hex(16)


@pytest.fixture(scope="session")
def cpu_evaluator(tmp_path_factory, secret_value, escape_probe):
    """A real local evaluator on the CPU with the `quick` protocol; a fake API key in its environment."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    saved = {name: os.environ.get(name) for name in (SECRET_NAME, "OMP_NUM_THREADS", ESCAPE_ENV)}
    os.environ[SECRET_NAME] = secret_value
    os.environ[ESCAPE_ENV] = escape_probe.description()
    os.environ["OMP_NUM_THREADS"] = "1"  # small tensors on a shared 2-core runner: threads only contend
    workdir = tmp_path_factory.mktemp("evaluator")
    evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=workdir,
                                                config=LocalEvaluator.Config(jobs=4)))
    yield evaluator
    evaluator.close()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def corpus_results(cpu_evaluator):
    """Every CPU corpus candidate evaluated once, all submitted together: name -> (case, result, seconds)."""
    started = time.monotonic()
    all_cases = cases()
    futures = {case.name: (case, cpu_evaluator.submit(case.request())) for case in all_cases}
    results = {name: (case, future.result(timeout=600)) for name, (case, future) in futures.items()}
    print(f"\ncorpus: {len(results)} candidates in {time.monotonic() - started:.1f} s")
    return results
