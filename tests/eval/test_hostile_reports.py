"""Nothing a candidate writes turns into the harness's failure: a crafted outputs file (an index whose
shape overflows torch's stride arithmetic, or nests past the JSON parser's recursion limit) and a
malformed message on the child's channel (nested past the recursion limit, or a report whose fields
have the wrong types, with or without the command's nonce) are the candidate's verdict, never an
infrastructure error (retried, and it stops a run) nor an exception of a trusted process.

The hostile candidates themselves are corpus files (``corpus/outputs_index_*``, ``corpus/channel_*``,
``corpus/forged_*_field_types``, ``corpus/forged_build_nested_flag``), judged by ``test_eval_corpus``;
here, the pieces each relies on, and ``pikeh eval`` end to end on a folder of them beside an honest one.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
import time

import pytest
import torch
from corpus_cases import CORPUS

from pike_harness.worker import output_file
from pike_harness.worker.channel import Channel, ProtocolViolation
from pike_harness.worker.json_depth import nests_within
from pike_harness.worker.output_file import MalformedOutputs, read_outputs, write_outputs
from pike_harness.worker.supervise import build_flags
from pike_harness.worker.supervise.reference import _Server
from pike_harness.worker.supervise.supervisor import report_problem

NO_POOL = ("--prestart", "0")


def _forge(path, index, data: bytes = b"\0" * 256) -> None:
    raw = index if isinstance(index, bytes) else json.dumps(index).encode()
    path.write_bytes(data + raw + struct.pack("<Q8s", len(raw), output_file.MAGIC))


# -- the outputs file: shapes are checked before torch sees them, the index's nesting before it is parsed --

@pytest.mark.parametrize("shape", [
    [0, 2**47, 2**47],  # empty, but its strides overflow 64 bits: torch raises "Stride calculation overflowed"
    [0, 2**40, 2**20],  # 2**60 elements of 4 bytes: 2**62, the bound itself
    [2**47, 0, 2**47, 2**47],
    [0] * 60 + [2**47, 2**47],
])
def test_an_empty_tensor_whose_shape_no_tensor_can_have_is_malformed(tmp_path, shape):
    _forge(tmp_path / "o", [[["float32", shape, 0, 0]]])
    with pytest.raises(MalformedOutputs, match="whose shape no tensor can have"):
        read_outputs(tmp_path / "o", 1)


def test_an_empty_tensor_just_inside_the_bound_reads(tmp_path):
    """2**59 elements of 4 bytes (2**61 bytes, were it not empty) are still a shape: read as it is."""
    _forge(tmp_path / "o", [[["float32", [0, 2**40, 2**19], 0, 0], ["uint8", [0] * 64, 0, 0]]])
    empty, zeros = read_outputs(tmp_path / "o", 1)[0]
    assert empty.shape == (0, 2**40, 2**19) and empty.dtype == torch.float32 and zeros.numel() == 0


@pytest.mark.parametrize("shape", [[-1], [4, -4], ["4"], [4.0], [True], [None], [2**48]])
def test_a_dimension_that_is_not_a_count_is_malformed(tmp_path, shape):
    _forge(tmp_path / "o", [[["float32", shape, 0, 16]]])
    with pytest.raises(MalformedOutputs, match="malformed entry"):
        read_outputs(tmp_path / "o", 1)


@pytest.mark.parametrize(("text", "depth", "within"), [
    (b'[[["float32",[4,8],0,128]],[]]', 4, True),
    (b'[[[[[1]]]]]', 4, False),
    (b'[[[[1]]]]', 4, True),
    (b"[" * 100_000 + b"]" * 100_000, 4, False),
    (b'[["[[[[[[[[", "\\"]]]]]]]]"]]', 2, True),  # brackets inside strings, an escaped quote among them
    (b'{"a": [{"b": [1]}]}', 4, True),
    (b'{"a": [{"b": [[1]]}]}', 4, False),  # objects count as levels too
    (b"[[[", 4, False),  # unbalanced: no JSON, and refused before the parser sees it
    (b"", 4, True),
])
def test_nesting_is_measured_without_recursion(text, depth, within):
    assert nests_within(text, depth) is within


def test_an_index_nested_past_the_parsers_recursion_limit_is_malformed(tmp_path):
    _forge(tmp_path / "o", b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(MalformedOutputs, match="nests deeper than 4 lists"):
        read_outputs(tmp_path / "o", 1)
    _forge(tmp_path / "shallow", [[["[[[[[[[[", [4], 0, 16]]])  # brackets in a string are no nesting
    with pytest.raises(MalformedOutputs, match="malformed entry"):
        read_outputs(tmp_path / "shallow", 1)


def test_any_error_the_files_content_causes_is_malformed_but_a_device_fault_propagates(tmp_path, monkeypatch):
    """Should some other content make the reader fail (here a parser that gives up), the file is malformed;
    out of device memory (others' models resident) and a CUDA error stay the reader's failure."""
    write_outputs(tmp_path / "o", [[torch.ones(4)]])
    for error in (RecursionError("maximum recursion depth exceeded"), RuntimeError("Stride calculation overflowed"),
                  TypeError("unhashable type: 'list'"), KeyError("x")):
        monkeypatch.setattr(output_file.json, "loads", lambda _text, error=error: (_ for _ in ()).throw(error))
        with pytest.raises(MalformedOutputs, match=f"unreadable outputs: {type(error).__name__}"):
            read_outputs(tmp_path / "o", 1)
    for fault in (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                  RuntimeError("CUDA error: an illegal memory access was encountered"), MemoryError()):
        monkeypatch.setattr(output_file.json, "loads", lambda _text, fault=fault: (_ for _ in ()).throw(fault))
        with pytest.raises(type(fault)):
            read_outputs(tmp_path / "o", 1)


# -- the reference process: reading or judging the candidate's outputs is the candidate's verdict ---------

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def server():
    """A reference process's state in this process; it sets torch's backend flags, restored after."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield _Server(1 << 20)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = saved


def _compare(server: _Server, path, source: str = TASK) -> dict:
    return server.handle({"op": "compare", "source": source, "weight_seed": 42, "precision": "fp32", "device": "cpu",
                          "seeds": [1, 2], "outputs": str(path), "labels": ["a", "b"], "atol": 1e-5, "rtol": 1e-5,
                          "plan": [[0, 0, False], [0, 1, False]]})


def test_a_crafted_outputs_file_is_the_candidates_verdict_in_the_reference_process(server, tmp_path):
    _forge(tmp_path / "stride", [[["float32", [0, 2**47, 2**47], 0, 0]]] * 2)
    reply = _compare(server, tmp_path / "stride")
    assert reply["ok"] is True and "whose shape no tensor can have" in reply["malformed"]
    _forge(tmp_path / "deep", b"[" * 100_000 + b"]" * 100_000)
    reply = _compare(server, tmp_path / "deep")
    assert reply["ok"] is True and "nests deeper" in reply["malformed"]


def test_an_error_judging_the_outputs_is_the_candidates_verdict_a_reference_failure_is_not(server, tmp_path,
                                                                                           monkeypatch):
    from pike_harness.worker.supervise import checked_calls

    write_outputs(tmp_path / "o", [[torch.zeros(4, 8)]] * 2)
    real_judge = checked_calls.judge

    def broken(*args, **kwargs):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(checked_calls, "judge", broken)
    reply = _compare(server, tmp_path / "o")
    assert reply == {"ok": True, "malformed": "the outputs could not be compared: IndexError: tuple index out of range"}

    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(checked_calls, "judge", no_memory)
    with pytest.raises(torch.OutOfMemoryError):  # serve() replies ok: false; the supervisor may retry alone
        _compare(server, tmp_path / "o")
    monkeypatch.setattr(checked_calls, "judge", real_judge)
    assert _compare(server, tmp_path / "o")["comparison"]["check"] == "allclose"  # the honest path is intact
    failing = TASK.replace("return x * 2", "raise ValueError('the task is broken')")
    with pytest.raises(ValueError, match="the task is broken"):  # the reference Model's own failure: infrastructure
        _compare(server, tmp_path / "o", failing)


# -- the child's channel: any undecodable line is a protocol violation, every field read is type-checked ---

def test_a_message_nested_past_the_channels_limit_is_refused_before_it_is_parsed():
    """A forged report may nest deep enough to pass json.loads and then crash a walk of the result
    (masking recursed through 700 levels of a free-form field): 32 levels pass, 33 do not."""
    from pike_harness.worker.channel import MAX_NESTING

    read_fd, write_fd = os.pipe()
    channel = Channel(read_fd, write_fd)
    try:
        inner: dict = {}
        for _ in range(MAX_NESTING - 2):  # with the message's own object: 32 levels
            inner = {"a": inner}
        os.write(write_fd, json.dumps({"event": "timed", "threads": inner}).encode() + b"\n")
        assert channel.receive(deadline=time.monotonic() + 60)["event"] == "timed"  # 32 levels, with the message
        os.write(write_fd, json.dumps({"event": "timed", "threads": {"a": inner}}).encode() + b"\n")
        with pytest.raises(ProtocolViolation, match="nested deeper than 32"):
            channel.receive(deadline=time.monotonic() + 60)
    finally:
        channel.close()


@pytest.mark.parametrize("line", [
    b"[" * 100_000 + b"]" * 100_000,  # RecursionError in json.loads
    b"{" * 100_000,
    b'{"event": "loaded", "seconds": 1}\xff\xfe',  # not UTF-8
    b"not json",
    b"9" * 5000,  # an integer past Python's digit limit (ValueError)
])
def test_a_line_that_cannot_be_decoded_is_a_protocol_violation(line):
    read_fd, write_fd = os.pipe()
    channel = Channel(read_fd, write_fd)
    # the line is larger than the pipe: written from a thread while receive() reads it
    writer = threading.Thread(target=lambda: os.write(write_fd, line + b"\n" + b'{"event": "next"}\n'), daemon=True)
    writer.start()
    try:
        with pytest.raises(ProtocolViolation, match="unreadable message|nested deeper than 32"):
            while channel.receive(deadline=time.monotonic() + 120, poll_s=0.5) is None:
                pass
    finally:
        writer.join(timeout=120)
        channel.close()


@pytest.mark.parametrize(("message", "problem"), [
    ({"event": "loaded", "seconds": "soon", "environment": 5}, "field seconds: type str, expected a finite number"),
    ({"event": "importing", "environment": [1]}, "field environment: type list, expected an object"),
    ({"event": "warmed", "seconds": -1}, "field seconds: -1, expected a finite number >= 0"),
    ({"event": "warmed", "seconds": True}, "field seconds: True, expected"),
    ({"event": "checked", "seconds": 5}, "field seconds: 5, expected an object"),
    ({"event": "checked", "seconds": {"calls": "1"}}, "field seconds.calls: type str"),
    ({"event": "checked", "notes": {"a": 1}}, "field notes: type dict, expected a list"),
    ({"event": "checked", "notes": ["ok", 3]}, "field notes[1]: 3, expected a string"),
    ({"event": "timed", "run": {"samples_ms": ["fast"]}}, "field run.samples_ms[0]: type str"),
    ({"event": "timed", "run": {"samples_ms": [1.0, float("nan")]}}, "field run.samples_ms[1]: nan"),
    ({"event": "timed", "run": {"host_ms": [float("inf")]}}, "field run.host_ms[0]: inf"),
    ({"event": "timed", "run": {"host_wall_ms": 10**400}}, "field run.host_wall_ms: type int"),
    ({"event": "timed", "run": [1.0]}, "field run: type list, expected an object"),
    ({"event": "timed", "canary_ms": 3}, "field canary_ms: 3, expected a list"),
    ({"event": "timed", "pin": "held"}, "field pin: type str, expected an object"),
    ({"event": "profiled", "profile": [1]}, "field profile: type list"),
    # a forged profile the report formats ("{:g}") and reloads from profiles.jsonl for every later report
    ({"event": "profiled", "profile": {"launches_per_call": "x"}}, "field profile.launches_per_call: type str"),
    ({"event": "profiled", "profile": {"kernels": ["str"]}}, "field profile.kernels[0]: type str, expected an obj"),
    ({"event": "profiled", "profile": {"share": {"custom": "all"}}}, "field profile.share"),
    ({"event": "failed", "category": ["correct"]}, "field category: type list, expected a string"),
    ({"event": "infra_error", "reason": {"a": 1}}, "field reason: type dict"),
    ({"event": "retry_alone", "reason": 7}, "field reason: 7"),
    ({"event": "build", "spec": ["x"]}, "field spec: type list, expected an object"),
])
def test_a_report_field_of_the_wrong_kind_is_named(message, problem):
    found = report_problem(message)
    assert found is not None and problem in found and found.startswith(f"the {message['event']!r} message's"), found


def _real_profile() -> dict:
    """What the child's profiler sends for a small model on the CPU (``worker/inside/profiling.py``)."""
    from pike_harness.worker.inside.profiling import profile

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    made = profile(model, [[torch.randn(4, 16)]], torch.device("cpu"), calls=3)
    assert made["kernels"] and made["share"], made
    return json.loads(json.dumps(made))


def test_honest_reports_and_unread_fields_pass():
    honest = [
        {"event": "loaded", "seconds": 0.5},
        {"event": "importing", "environment": {"torch": "2.x", "threads": {"a": 1}}},
        {"event": "warmed", "seconds": 0},
        {"event": "checked", "sets": 5, "seconds": {"inputs": 0.1, "calls": 2, "other": "x"}, "notes": [],
         "nonce": "n"},
        {"event": "timed", "nonce": "n", "threads": {"python_before": 1}, "notes": ["borrows_reference"],
         "backend_flags": {"allow_tf32": False}, "canary_ms": [0.2, 0.3], "pin": None,
         "run": {"samples_ms": [0.1] * 5, "host_ms": [0.1] * 5, "span_ms": [], "host_wall_ms": 0.5, "warmup": 1,
                 "reps": 5, "estimate_ms": 0.1, "mismatches": [0]}},
        {"event": "profiled", "profile": {"error": "none"}, "nonce": "n"},
        {"event": "profiled", "profile": _real_profile(), "nonce": "n"},
        {"event": "failed", "category": "runtime_error", "check": "forward", "reason": "boom"},
        {"event": "failed", "category": "rejected", "check": None, "reason": None},  # null counts as absent
        {"event": "importing"}, {"event": ["not", "a", "name"]}, {"no": "event"},  # not one of the reports
        {"event": "loaded", "seconds": 0.5, "environment": [1]},  # a field the supervisor does not read
    ]
    assert [report_problem(message) for message in honest] == [None] * len(honest)


def test_a_build_request_whose_flags_hold_lists_is_refused_not_raised():
    """The build request needs no nonce: its flags are the candidate's to write, lists and objects too."""
    for spec, problem in (({"extra_cflags": [["-O3"]]}, "extra_cflags: a list is not a string"),
                          ({"extra_cuda_cflags": ["-Xptxas", {"a": 1}]}, "extra_cuda_cflags: a dict is not a string"),
                          ({"extra_ldflags": [[[[["-lm"]]]] * 2]}, "extra_ldflags: a list is not a string"),
                          ({"extra_include_paths": [["/usr"]]}, "a list is not a plain absolute path")):
        assert problem in (build_flags.spec_problem(spec, "/tmp") or ""), spec
    assert build_flags.spec_problem({"extra_cflags": ["-O3", "-Xptxas", "-v"]}, "/tmp") is None


# -- end to end: pikeh eval judges each hostile candidate and goes on -------------------------------------

HONEST_LAYERNORM = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.norm = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.norm(x)
'''


# At import, a "loaded" report of the right types (it needs no nonce) claiming another host, CPU and GPU
# and a note the supervisor writes itself: the real report follows and is a protocol violation, and the
# forged one must have set nothing but the candidate process's own device keys.
FORGED_ENVIRONMENT = '''import json
import os
import sys

import torch.nn as nn

os.write(int(sys.argv[2]), (json.dumps({"event": "loaded", "seconds": 0.1, "environment": {
    "host": "forged host", "cpu": "forged cpu", "device": "cuda:7", "gpu": "forged gpu",
    "build_cache_error": "forged note"}}) + "\\n").encode())


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def test_pikeh_eval_judges_crafted_outputs_and_messages_and_goes_on(cli, tmp_path):
    """The auditor's reproductions as a folder: outputs whose empty shape overflows torch's strides
    (``pikeh eval`` printed "the evaluation could not run: ... Stride calculation overflowed"), a
    ``loaded`` report with the wrong field types and a line of 100,000 nested lists (both crashed it with
    a traceback), beside an honest candidate: every one has its verdict, none is an evaluator error."""
    folder = tmp_path / "solutions"
    folder.mkdir()
    # Rejected at import, the two channel attacks stand for any task; the outputs one needs its own.
    shutil.copy(CORPUS / "outputs_index_stride_overflow.py", folder / "task_5.py")
    shutil.copy(CORPUS / "forged_loaded_field_types.py", folder / "task_1.py")
    shutil.copy(CORPUS / "channel_deep_nesting.py", folder / "task_2.py")
    (folder / "task_3.py").write_text(HONEST_LAYERNORM, encoding="utf-8")
    (folder / "task_4.py").write_text(FORGED_ENVIRONMENT, encoding="utf-8")
    result = cli("eval", str(folder), "--suite", "smoke", "--device", "cpu", "--protocol", "quick", "--json", *NO_POOL)
    assert result.exit_code == 0 and result.exception is None, result.output
    records = {record["task"]: record for record in map(json.loads, result.output.strip().splitlines())}
    verdicts = {task: (record["category"], record.get("check")) for task, record in records.items()}
    assert verdicts == {"smoke/5": ("rejected", "outputs_file"), "smoke/1": ("rejected", "protocol"),
                        "smoke/2": ("rejected", "protocol"), "smoke/3": ("correct", None),
                        "smoke/4": ("rejected", "protocol")}, records
    assert "whose shape no tensor can have" in records["smoke/5"]["reason"]
    assert "the 'loaded' message's field seconds: type str" in records["smoke/1"]["reason"]
    assert "nested deeper than 32 lists and objects" in records["smoke/2"]["reason"]
    # A well-typed forged report sets nothing: not what the supervisor recorded, not a note it adds
    # later, not a device key (the child's own description came before the import)
    forged = records["smoke/4"]["environment"]
    assert forged["host"] == records["smoke/3"]["environment"]["host"] and forged["cpu"] != "forged cpu"
    assert "build_cache_error" not in forged and forged["device"] == "cpu" and "gpu" not in forged
    assert forged["torch"] == records["smoke/3"]["environment"]["torch"] == torch.__version__
