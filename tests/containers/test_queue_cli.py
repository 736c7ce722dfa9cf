"""`pikeh eval` / `pikeh run` with `--evaluator queue`, `pikeh worker` itself (as users start it), its
clear errors, and `pikeh worker image build`'s command line."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from queue_helpers import worker_env

from pike_harness.host.store import read_journal
from pike_harness.worker import queue_channel as qc

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus"


def test_eval_through_the_queue(cli, shared_queue):
    io_dir, workers = shared_queue
    result = cli("eval", str(CORPUS / "wrong_values.py"), "--task", "smoke/5", "--evaluator", "queue",
                 "--io-dir", str(io_dir), "--protocol", "quick", "--json", env={"OMP_NUM_THREADS": "1"})
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["category"] == "incorrect" and record["check"] == "allclose"
    assert record["environment"]["worker"]["id"] in {w.worker_id for w in workers}
    assert record["protocol"]["name"] == "quick"


def test_run_through_the_queue(cli, shared_queue, tmp_path):
    io_dir, workers = shared_queue
    # Seed 2's one answer is a plain correct program (seed 0's adds torch.compile: a minute of C++ builds
    # on a 2-core CPU, twice with the final re-timing, for nothing this test checks).
    result = cli("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "offline:mutate",
                 "--seed", "2", "--parallel", "1", "--max-fix-attempts", "0", "--query-budget", "1", "--evaluator", "queue",
                 "--io-dir", str(io_dir), "--protocol", "quick", "--output-dir", str(tmp_path), "--run-name", "q",
                 env={"OMP_NUM_THREADS": "1"})
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "q" / "run.json").read_text())
    assert meta["config"]["evaluator"] == "queue"
    assert meta["environment"]["evaluator"]["io_dir"] == str(io_dir)
    evals = [e for e in read_journal(tmp_path / "q" / "journal.jsonl") if e["type"] in ("eval", "attempt")]
    workers_seen = {e["result"]["environment"]["worker"]["id"] for e in evals if e.get("result")}
    assert evals and workers_seen <= {w.worker_id for w in workers} and workers_seen
    assert "torch.compile" not in next((tmp_path / "q").rglob("code.py")).read_text()


def test_queue_evaluator_errors_are_one_clear_line(cli, tmp_path):
    candidate = str(CORPUS / "ok_plain.py")
    no_dir = cli("eval", candidate, "--task", "smoke/1", "--evaluator", "queue")
    assert no_dir.exit_code == 1 and "needs --io-dir DIR" in no_dir.output
    device = cli("eval", candidate, "--task", "smoke/1", "--evaluator", "queue", "--io-dir", str(tmp_path / "q"),
                 "--device", "cpu")
    assert device.exit_code == 1 and "give --device to `pikeh worker`" in device.output
    started = time.monotonic()
    nobody = cli("eval", candidate, "--task", "smoke/1", "--evaluator", "queue", "--io-dir", str(tmp_path / "q"),
                 "--queue-wait", "0.5")
    assert nobody.exit_code == 1, nobody.output
    assert f"no worker answers on the queue folder {tmp_path / 'q'}" in nobody.output
    assert "pikeh worker --io-dir" in nobody.output and time.monotonic() - started < 30
    usage = cli("worker")
    assert usage.exit_code == 2 and "--io-dir DIR is required" in usage.output


def test_pikeh_worker_with_a_key_serves_signed_requests_only(pikeh_exe, cli, tmp_path):
    """`pikeh worker --io-dir DIR` as users run it: a shared key on both sides works, a host with another
    key gets a clear error (its request is refused, not evaluated), and Ctrl-C stops the worker cleanly."""
    io_dir, key, wrong = tmp_path / "io", tmp_path / "key", tmp_path / "wrong"
    key.write_text("k" * 40)
    wrong.write_text("w" * 40)
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen([pikeh_exe, "worker", "--io-dir", str(io_dir), "--device", "cpu", "--key-file",
                                   str(key), "--heartbeat", "0.2", "--worker-id", "keyed", "--prestart", "0"],
                                  stdout=log,
                                  stderr=subprocess.STDOUT, env=worker_env())
    try:
        # The host waits 60 s (--queue-wait's default) for a heartbeat; the worker first imports torch, which
        # can take longer on a loaded runner: wait for its heartbeat here, as long as that takes.
        beat = io_dir / "workers" / "keyed.json"
        deadline = time.monotonic() + 180
        while not beat.exists():
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "no heartbeat after 180 s:\n" + (tmp_path / "worker.log").read_text()
            time.sleep(0.05)
        common = ["eval", str(CORPUS / "ok_plain.py"), "--task", "smoke/1", "--evaluator", "queue", "--io-dir",
                  str(io_dir), "--protocol", "quick", "--json"]
        good = cli(*common, "--queue-key-file", str(key), env={"OMP_NUM_THREADS": "1"})
        assert good.exit_code == 0, good.output + (tmp_path / "worker.log").read_text()
        assert json.loads(good.output)["category"] == "correct"
        bad = cli(*common, "--queue-key-file", str(wrong))
        assert bad.exit_code == 1 and "refused the request" in bad.output, bad.output
        assert "not signed with this worker's key" in bad.output
        assert len(qc.names(io_dir / "bad")) == 2, "the refused request is kept for a look, with a note"
    finally:
        worker.send_signal(signal.SIGINT)
        code = worker.wait(timeout=60)
    log_text = (tmp_path / "worker.log").read_text()
    assert code == 0, log_text
    assert "worker keyed stopped after" in log_text and qc.names(io_dir / "workers") == []


def test_image_build_stages_only_the_worker_and_maps_gpu_generations(cli):
    cpu = cli("worker", "image", "build", "--kind", "cpu", "--no-torch", "--base", "pikeh-base:local",
              "--tag", "t:cpu", "--dry-run")
    assert cpu.exit_code == 0, cpu.output
    assert "src/pike_harness/worker/supervise/service.py" in cpu.output and "src/pike_harness/worker/queue_channel.py" in cpu.output
    assert "cli/" not in cpu.output and ".venv" not in cpu.output
    assert "build -t t:cpu -f containers/Dockerfile.cpu --build-arg BASE=pikeh-base:local --build-arg " \
           "INSTALL_TORCH=0 --network none ." in cpu.output
    for arch, archs in (("ampere", "8.0;8.6"), ("hopper", "9.0"), ("blackwell", "10.0;12.0")):
        cuda = cli("worker", "image", "build", "--kind", "cuda", "--gpu-arch", arch, "--dry-run")
        assert cuda.exit_code == 0 and f"TORCH_CUDA_ARCH_LIST={archs}" in cuda.output, cuda.output
        assert "-t pikeh-worker:cuda -f containers/Dockerfile.cuda" in cuda.output
    apptainer = cli("worker", "image", "build", "--kind", "apptainer", "--dry-run", "--output", "w.sif")
    assert apptainer.exit_code == 0 and "apptainer build --force" in apptainer.output
    assert "containers/pikeh-worker.def" in apptainer.output
    misuse = cli("worker", "image", "build", "--kind", "cuda", "--no-torch", "--dry-run")
    assert misuse.exit_code == 2 and "--no-torch is for --kind cpu only" in misuse.output


def test_the_worker_options_are_declared_once(cli):
    """`pikeh worker` and `python -m pike_harness.worker.supervise.service` (what the images run) take their
    options from one click declaration; the service keeps no parser of its own."""
    import sys

    import pike_harness.worker.supervise.service as service
    from pike_harness.cli.worker_cmd import worker
    from pike_harness.worker.supervise.command import standalone

    def options(command) -> list[tuple[str, ...]]:
        return sorted(tuple(p.opts) for p in command.params if p.name != "help")

    assert options(worker) == options(standalone) and ("--stale-after",) in options(worker)
    source = Path(service.__file__).read_text()
    assert "argparse" not in source and "add_argument" not in source
    shown = subprocess.run([sys.executable, "-m", "pike_harness.worker.supervise.service", "--help"], capture_output=True,
                           text=True, timeout=60, env=worker_env())
    assert shown.returncode == 0 and "python -m pike_harness.worker.supervise.service" in shown.stdout
    assert all(opt in shown.stdout for (opt,) in options(worker) if opt != "--help"), shown.stdout
    misuse = subprocess.run([sys.executable, "-m", "pike_harness.worker.supervise.service", "--key-stdin", "--key-file",
                             __file__, "--io-dir", "/tmp/x"], capture_output=True, text=True, timeout=60,
                            env=worker_env())
    assert misuse.returncode == 2 and "give --key-file or --key-stdin, not both" in misuse.stderr
    assert "Traceback" not in misuse.stderr
