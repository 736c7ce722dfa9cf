"""Reference outputs, computed in a trusted process of their own: never where a candidate runs.

PIKE computed the reference in the candidate's process, right after it, which is how a candidate can
find the reference's output in a freed buffer or make the reference "match" by mutating the inputs
they share. Here one long-lived reference process per device (``ReferenceOracle``) builds each task's
``Model`` once, and for every evaluation computes the outputs for the public and the hidden seeds on
a fresh deep copy (a stateful model sees the same call sequence as the candidate's), with the same
backend flags, and writes them into the evaluator's private directory. Task code is trusted; it still
gets a scrubbed environment. Server side: torch and the standard library.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pike_harness.worker.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolViolation
from pike_harness.worker.records import EvalRequest
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.sandbox import marker_environment, scrubbed_environment, tail
from pike_harness.worker.supervise.spawn import visible_devices

MODELS_KEPT = 4


class ReferenceOracle:
    """Client of one reference process for one device; thread-safe, started on first use."""

    def __init__(self, device: str, workdir: Path, *, environ: Mapping[str, str] | None = None,
                 python: str = sys.executable):
        self.device = device
        self.workdir = Path(workdir)
        self.python = python
        self.environ = dict(os.environ if environ is None else environ)
        self._lock = threading.Lock()
        self._popen: subprocess.Popen | None = None
        self._channel: Channel | None = None
        self.log_path = self.workdir / f"reference-{device.replace(':', '')}.log"

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        visible = visible_devices(self.device, self.environ)
        # Marked like a candidate, so that the next sweep kills it if its harness dies without closing it.
        env = scrubbed_environment(self.environ, {"CUDA_VISIBLE_DEVICES": visible, "PYTHONUNBUFFERED": "1",
                                                  "HOME": str(self.workdir),
                                                  **marker_environment(secrets.token_hex(12))})
        with open(self.log_path, "ab") as log:
            self._popen = subprocess.Popen([self.python, "-m", "pike_harness.worker.supervise.reference"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                           cwd=self.workdir, env=env, start_new_session=True)
        assert self._popen.stdin is not None and self._popen.stdout is not None
        self._channel = Channel(self._popen.stdout.fileno(), self._popen.stdin.fileno())

    @property
    def pid(self) -> int | None:
        """The reference process's pid while it runs (it carries a sandbox marker, but is ours)."""
        popen = self._popen
        return popen.pid if popen is not None and popen.poll() is None else None

    def start(self) -> None:
        """Start the reference process now (idempotent, thread-safe): its torch import and device
        initialisation then happen before the first evaluation instead of under its device lock."""
        with self._lock:
            if self._popen is None or self._popen.poll() is not None:
                self._start()

    def outputs(self, request: EvalRequest, seeds: list[int], timeout_s: float) -> list[list[Any]]:
        """The reference's outputs for ``seeds`` (in order), as CPU tensors."""
        import torch

        with self._lock:
            if self._popen is None or self._popen.poll() is not None:
                self._start()
            assert self._channel is not None
            path = self.workdir / f"ref-{uuid.uuid4().hex}.pt"
            device = "cuda" if self.device.startswith("cuda") else "cpu"
            try:
                self._channel.send({"source": request.reference_source, "weight_seed": request.weight_seed,
                                    "seeds": seeds, "precision": request.precision, "device": device,
                                    "out": str(path)})
                deadline = time.monotonic() + timeout_s
                reply = None
                while reply is None:
                    reply = self._channel.receive(deadline)
            except (ChannelClosed, ChannelTimeout, ProtocolViolation, BrokenPipeError) as exc:
                self._stop()
                raise InfrastructureError(f"the reference process failed ({type(exc).__name__}); its log ends: "
                                          f"{tail(self.log_path, 2000)}") from None
            if not reply.get("ok"):
                raise InfrastructureError(f"the task's reference Model failed: {reply.get('error')}")
            try:
                return torch.load(path, weights_only=True, map_location="cpu")
            finally:
                path.unlink(missing_ok=True)

    def _stop(self) -> None:
        if self._popen is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, 9)
            self._popen.wait()
            for stream in (self._popen.stdin, self._popen.stdout):
                if stream is not None:
                    stream.close()
        self._popen = None
        self._channel = None

    def close(self) -> None:
        with self._lock:
            self._stop()


# -- the server: python -m pike_harness.worker.supervise.reference ------------------------------------------

def serve() -> None:
    # The protocol owns the real stdout; anything the task prints goes to the log instead.
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    import copy

    import torch

    from pike_harness.worker.inside import backend_flags, loading

    channel = Channel(0, protocol_out)
    models: OrderedDict[str, tuple[Any, torch.nn.Module]] = OrderedDict()
    while True:
        try:
            message = channel.receive(deadline=None, poll_s=5.0)
        except ChannelClosed:
            return
        if message is None:
            continue
        try:
            device = torch.device(message["device"])
            key = json.dumps([hashlib.sha256(message["source"].encode()).hexdigest(), message["weight_seed"],
                              message["precision"], message["device"]])
            if key not in models:
                module = loading.load_source(message["source"],
                                             loading.module_name_for(message["source"], "pikeh_reference"))
                backend_flags.apply(message["precision"])
                model = loading.build_model(loading.model_class(module, ("Model",)), loading.init_inputs(module),
                                            weight_seed=message["weight_seed"], device=device)
                models[key] = (module, model)
                while len(models) > MODELS_KEPT:
                    models.popitem(last=False)
            models.move_to_end(key)
            module, pristine = models[key]
            model = copy.deepcopy(pristine)
            backend_flags.apply(message["precision"])
            outputs = []
            for seed in message["seeds"]:
                inputs = loading.to_device(loading.make_inputs(module, seed), device)
                with torch.no_grad():
                    out = model(*inputs)
                items = list(out) if isinstance(out, tuple | list) else [out]
                outputs.append([item.detach().clone().cpu() for item in items])
            torch.save(outputs, message["out"])
            channel.send({"ok": True})
        except Exception as exc:
            traceback.print_exc()
            channel.send({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})


if __name__ == "__main__":
    serve()
    sys.exit(0)
