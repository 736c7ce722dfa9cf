"""The outputs hand-off file: what a candidate's process writes arrives bit for bit, whatever the dtype or
shape, and a file that lies about itself is malformed (never a crash, never an allocation it asks for)."""

from __future__ import annotations

import json
import os
import struct

import pytest
import torch

from pike_harness.worker import output_file
from pike_harness.worker.output_file import MalformedOutputs, OutputWriter, read_outputs, write_outputs

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _cases(device: str) -> list[list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [
        [torch.randn(3, 5, generator=gen).to(device), torch.tensor(7, dtype=torch.int64, device=device)],
        [torch.randn(4, 6, generator=gen).t().to(device),  # not contiguous
         torch.randn(2, 3, generator=gen, dtype=torch.float64).to(device)[:, 1],
         torch.tensor([True, False, True], device=device),
         torch.randn(5, generator=gen).to(torch.bfloat16).to(device),
         torch.randn(2, 2, dtype=torch.complex64, generator=gen).to(device),
         torch.empty(0, 4, device=device),
         torch.tensor([float("nan"), float("inf"), -0.0], dtype=torch.float16, device=device)],
        [],
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_round_trip_bit_for_bit(tmp_path, device):
    calls = _cases(device)
    path = tmp_path / "outputs.bin"
    write_outputs(path, calls)
    back = read_outputs(path, len(calls), device)
    assert [len(row) for row in back] == [len(row) for row in calls]
    for row, got_row in zip(calls, back, strict=True):
        for want, got in zip(row, got_row, strict=True):
            assert (got.dtype, got.shape, got.device.type) == (want.dtype, want.shape, want.device.type)
            assert got.is_contiguous()
            assert torch.equal(got.reshape(-1).view(torch.uint8), want.contiguous().reshape(-1).view(torch.uint8))


def test_tensors_larger_than_the_staging_buffer_stream_in_pieces(tmp_path, monkeypatch):
    """The staged path (a device's tensors) on CPU tensors: a buffer of 1000 bytes carries 40 kB in pieces."""
    monkeypatch.setattr(output_file, "CHUNK", 1000)
    monkeypatch.setattr(output_file, "STAGE_CPU", True)
    calls = [[torch.arange(10_007, dtype=torch.float32), torch.ones(3, dtype=torch.int8)], [torch.randn(999)]]
    writer = OutputWriter(tmp_path / "o")
    for tensors in calls:
        writer.add(tensors)
    assert writer.staging.buffer is not None and writer.staging.buffer.numel() == 1000  # the pieces went through it
    writer.close()
    back = read_outputs(tmp_path / "o", 2)
    assert all(torch.equal(a, b) for row, got in zip(calls, back, strict=True) for a, b in zip(row, got, strict=True))


def test_the_writer_reports_where_it_stopped_and_a_file_without_index_is_malformed(tmp_path):
    writer = OutputWriter(tmp_path / "o")
    writer.add([torch.ones(100)])
    assert writer.offset == 400
    writer.abandon()
    writer.abandon()  # twice is harmless (an error path closes, then the caller's cleanup)
    with pytest.raises(MalformedOutputs, match="no valid index"):
        read_outputs(tmp_path / "o", 1)


def _forge(path, index, data: bytes = b"\0" * 256) -> None:
    raw = json.dumps(index).encode()
    path.write_bytes(data + raw + struct.pack("<Q8s", len(raw), output_file.MAGIC))


@pytest.mark.parametrize(("index", "message"), [
    ({"not": "a list"}, "one list of tensors per checked call"),
    ([[["float32", [4], 0, 16]], "x"], "one list of tensors per checked call"),
    ([[["Tensor", [4], 0, 16]]], "malformed entry"),  # not a dtype of the fixed list
    ([[["float32", [-1], 0, 16]]], "malformed entry"),
    ([[["float32", [4], 0, 15]]], "does not fit"),  # size does not match the shape
    ([[["float32", [4], 8, 16]]], "does not fit"),  # unaligned
    ([[["float32", [1 << 40], 0, 1 << 42]]], "does not fit"),  # past the data: no 4 TB allocation
    ([[["float32", [4], 0, 16, 1]]], "malformed entry"),
])
def test_a_lying_index_is_malformed(tmp_path, index, message):
    _forge(tmp_path / "o", index)
    with pytest.raises(MalformedOutputs, match=message):
        read_outputs(tmp_path / "o", len(index) if isinstance(index, list) else 1)


def test_overlapping_entries_cannot_make_the_reader_allocate_past_its_cap(tmp_path):
    """Every entry fits the file, but 1,000 of them point at the same 1 MiB: 1 GiB to allocate. With the
    reference's cap the index is refused before anything is allocated; one honest entry still reads."""
    entry = ["uint8", [1 << 20], 0, 1 << 20]
    _forge(tmp_path / "o", [[entry] * 1000], data=b"\0" * (1 << 20))
    with pytest.raises(MalformedOutputs, match="over the"):
        read_outputs(tmp_path / "o", 1, max_total_bytes=64 << 20)
    _forge(tmp_path / "one", [[entry]], data=b"\1" * (1 << 20))
    (tensor,) = read_outputs(tmp_path / "one", 1, max_total_bytes=64 << 20)[0]
    assert tensor.numel() == 1 << 20 and int(tensor[0]) == 1


def test_an_oversized_index_length_and_links_are_refused(tmp_path):
    (tmp_path / "o").write_bytes(b"\0" * 8 + struct.pack("<Q8s", 1 << 40, output_file.MAGIC))
    with pytest.raises(MalformedOutputs, match="no valid index"):
        read_outputs(tmp_path / "o", 1)
    write_outputs(tmp_path / "real", [[torch.ones(2)]])
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(MalformedOutputs, match="is a link"):
        read_outputs(tmp_path / "link", 1)
    os.mkfifo(tmp_path / "fifo")  # opened without blocking: no writer is ever waited for
    with pytest.raises(MalformedOutputs, match="is a FIFO"):
        read_outputs(tmp_path / "fifo", 1)


def test_a_write_past_the_file_size_limit_is_an_error_not_a_signal(tmp_path):
    """RLIMIT_FSIZE in a child process: the writer raises OSError (the candidate's verdict), the process lives."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import resource, signal, torch
        from pike_harness.worker.output_file import OutputWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        writer = OutputWriter({str(tmp_path / 'o')!r})
        try:
            writer.add([torch.ones(10_000)])
        except OSError as exc:
            print("refused", writer.offset, exc.errno)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused")


@pytest.mark.parametrize("name", sorted(output_file.DTYPES))
def test_every_accepted_dtype_round_trips(tmp_path, name):
    dtype = output_file.DTYPES[name]
    tensor = torch.arange(64, dtype=torch.uint8).view(dtype).reshape(2, -1)  # 64 bytes: any item size divides it
    write_outputs(tmp_path / "o", [[tensor]])
    got = read_outputs(tmp_path / "o", 1)[0][0]
    assert got.dtype == dtype and got.shape == tensor.shape
    assert torch.equal(got.reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8))


def test_a_quantized_output_is_refused_by_the_writer(tmp_path):
    quantized = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8)
    writer = OutputWriter(tmp_path / "o")
    with pytest.raises(output_file.UnsupportedOutput, match="dtype torch.qint8"):
        writer.add([torch.ones(2), quantized])
    writer.abandon()


def test_a_device_error_while_reading_is_not_the_files_fault(tmp_path, monkeypatch):
    """Out of memory on the reference's device (others' models resident) propagates, so the supervisor
    retries alone; only a file that lies about itself is ``MalformedOutputs`` (the candidate's rejection)."""
    write_outputs(tmp_path / "o", [[torch.ones(1000)]])
    real_empty = torch.empty

    def no_memory(*args, **kwargs):
        if args and args[0] == 4000:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4000 bytes")
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", no_memory)
    with pytest.raises(torch.OutOfMemoryError):
        read_outputs(tmp_path / "o", 1)
