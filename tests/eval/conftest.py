"""Fixtures for the evaluator tests: one CPU evaluator per session, and the whole CPU corpus and the
trusted side's hostile cases evaluated once, concurrently, in one batch, so each test only reads its
result."""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from corpus_cases import CORPUS, HERE, SMOKE, cases, load_case

SECRET_NAME = "PIKEH_TEST_API_KEY"
ESCAPE_ENV = "LC_PIKEH_ESCAPE_PROBE"  # LC_ passes the environment scrub: where sandbox_reach_out.py aims
TRUSTED = HERE / "corpus_trusted"
FILES = HERE / "corpus_files"


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


@dataclass
class FilePlants:
    """What the file attacks (corpus_files/) aim at, set up around the session's evaluator: a secret and
    a target file in its (hidden) work folder, a canary in the harness's environment, its cache root."""

    secret: str
    canary: str
    workdir: Path
    cache: Path


FILES_CANARY_NAME = "PIKEH_FILES_CANARY"  # not secret-looking: never masked, so any leak of the environment shows


@pytest.fixture(scope="session")
def file_plants(tmp_path_factory) -> FilePlants:
    """The session evaluator's work folder (with the secret and the target planted) and cache root."""
    base = tmp_path_factory.mktemp("evaluator")
    plants = FilePlants(secret="pikeh-secret-" + secrets.token_hex(12), canary=secrets.token_hex(12),
                        workdir=base / "work", cache=base / "cache")
    plants.workdir.mkdir()
    (plants.workdir / "pikeh-secret.txt").write_text(plants.secret)
    (plants.workdir / "pikeh-target.txt").write_text("untouched")
    return plants


@pytest.fixture(scope="session")
def cpu_evaluator(secret_value, escape_probe, file_plants):
    """A real local evaluator on the CPU with the `quick` protocol; a fake API key and the file
    attacks' canary in its environment, their secret and target in its work folder, a build cache of
    its own (cold, as in a fresh clone)."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    names = {SECRET_NAME: secret_value, ESCAPE_ENV: escape_probe.description(),
             "OMP_NUM_THREADS": "1",  # small tensors on a shared 2-core runner: threads only contend
             FILES_CANARY_NAME: file_plants.canary, "LC_PIKEH_FILES_HONEST": str(FILES / "files_honest.py"),
             "LC_PIKEH_FILES_JIT_ROOT": str(file_plants.cache / "jit")}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    evaluator = LocalEvaluator(EvaluatorOptions(
        device="cpu", protocol="quick", workdir=file_plants.workdir,
        config=LocalEvaluator.Config(jobs=4, build_cache=str(file_plants.cache))))
    yield evaluator
    evaluator.close()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def home_token():
    """A token file in the harness user's real $HOME, where a credentials file would be (the
    trusted-side cases look for it; test_trusted_processes.py checks no record holds it)."""
    home = Path(os.environ.get("HOME") or "/nonexistent")
    if not home.is_dir() or not os.access(home, os.W_OK):
        yield None
        return
    path = home / f"pikeh-planted-{secrets.token_hex(6)}"
    value = "planted-" + secrets.token_hex(16)
    path.write_text(value)
    yield value
    path.unlink(missing_ok=True)


# The groups of candidates the session batch can hold: the fixture that reads a group's results, and
# its cases. The CPU corpus; the hostile cases of the trusted side (test_trusted_processes.py), whose
# honest neighbour is the corpus's ok_plain; the file attacks (test_trusted_files.py), with theirs.
BATCH_GROUPS = {"corpus_results": lambda: cases(), "trusted_results": lambda: cases(TRUSTED),
                "files_results": lambda: cases(FILES)}


@pytest.fixture(scope="session")
def sandboxed_batch(request, cpu_evaluator, home_token):
    """Every candidate of the groups this session's tests read, submitted at once to the one CPU
    evaluator and all finished: name -> (case, result). One batch keeps both cores busy to its end,
    where batches one after the other would each end on a tail of single slow candidates (timeouts,
    a torch.compile) and each evaluator of its own would start its own reference process. A group no
    collected test reads is left out, so a run of one test file evaluates only its own. Every result
    is in before any test reads one: a test that looks for leftovers sees the whole batch done."""
    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    group_cases = [case for group, make in BATCH_GROUPS.items() if group in wanted for case in make()]
    if "trusted_results" in wanted and not any(case.name == "ok_plain" for case in group_cases):
        group_cases.append(load_case(CORPUS / "ok_plain.py"))
    futures = {case.name: (case, cpu_evaluator.submit(case.request())) for case in group_cases}
    return {name: (case, future.result(timeout=900)) for name, (case, future) in futures.items()}


@pytest.fixture(scope="session")
def corpus_results(sandboxed_batch):
    """Every CPU corpus candidate evaluated once, in the session batch: name -> (case, result)."""
    return {case.name: sandboxed_batch[case.name] for case in cases()}


@pytest.fixture(scope="session")
def trusted_results(sandboxed_batch, home_token):
    """Every hostile case of the trusted side and an honest one beside them, in the session batch."""
    if home_token is None:
        pytest.skip("no writable $HOME to plant a token file in")
    return {name: sandboxed_batch[name] for name in [case.name for case in cases(TRUSTED)] + ["ok_plain"]}
