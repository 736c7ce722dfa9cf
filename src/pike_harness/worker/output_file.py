"""The candidate's checked outputs, handed to the reference process as raw bytes in one shared-memory file.

``torch.save``/``torch.load`` cost a fresh host copy of every output on each side, plus pickling: for
a task whose outputs are about 1 GB per input set, that hand-off took longer than the timing. Here
the candidate's process streams each output from the device through one reused pinned buffer
straight into the file, and the reference process streams it back through its own pinned buffer onto
its device: no host copy of a whole output exists on either side, and nothing is unpickled.

Layout: the tensors' bytes, each at a 64-byte aligned offset; then a JSON index (one list per checked
call of ``[dtype, shape, offset, nbytes]``); then the index length (8 bytes, little-endian) and
``MAGIC``. The reader trusts nothing in the file: dtypes come from a fixed list, sizes must match
shapes and fit the file, and a read copies the bytes, so the writer changing the file meanwhile
changes nothing already read. torch and the standard library only (it runs in the candidate's process).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import struct
from collections.abc import Sequence
from typing import Any

import torch

from pike_harness.worker.json_depth import nests_within
from pike_harness.worker.supervise import trusted_files

MAGIC = b"PIKEOUT1"
ALIGN = 64
CHUNK = 64 * 1024 * 1024  # the pinned staging buffer: one per process, reused for every tensor
STAGE_CPU = False  # CPU tensors go straight to and from the file; True stages them too (tests, CPU-only hosts)
MAX_INDEX_BYTES = 16 * 1024 * 1024
MAX_TENSORS = 100_000
MAX_DIM = 1 << 48  # no real output has a longer dimension; bigger values are an index lying
# A shape whose elements (a 0 counted as 1), times the item size, reach this is refused before torch sees
# it: torch computes strides and storage sizes in 64-bit integers and raises (an empty tensor of shape
# [0, 2**47, 2**47] has strides past 2**63) instead of allocating nothing.
MAX_SPAN_BYTES = 1 << 62
MAX_INDEX_DEPTH = 4  # the index's lists: calls, a call's tensors, an entry, its shape


# The dtypes outputs can have and be compared in, by name: the reader accepts nothing else (no
# quantized or sub-byte types: they have no plain byte layout to hand over).
DTYPES = {name: getattr(torch, name) for name in (
    "float64", "float32", "float16", "bfloat16", "complex128", "complex64", "int64", "int32", "int16", "int8",
    "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz") if isinstance(getattr(torch, name, None), torch.dtype)}

# Captured at import, which happens before the candidate's code runs in its process.
_write, _open, _close, _fstat = os.write, os.open, os.close, os.fstat
_empty, _copy = torch.empty, torch.Tensor.copy_
_FOOTER = struct.Struct("<Q8s")


class MalformedOutputs(Exception):
    """The outputs file is missing, a link, unreadable or not one list of tensors per checked call."""


# What an error of the reader's own process or device says (out of memory, a failed CUDA call): no content
# of the file causes one (its messages quote none of it), so it propagates as the reader's failure.
_READER_FAULT_MARKS = ("CUDA error", "out of memory", "not enough memory", "allocate memory")


def reader_fault(exc: BaseException) -> bool:
    """Whether ``exc``, raised while reading or comparing a candidate's outputs, is the reading process's
    or its device's failure (out of memory, a CUDA error) rather than anything the file holds."""
    accelerator = getattr(torch, "AcceleratorError", None)
    return isinstance(exc, torch.OutOfMemoryError | MemoryError) \
        or (accelerator is not None and isinstance(exc, accelerator)) \
        or any(mark in str(exc) for mark in _READER_FAULT_MARKS)


class UnsupportedOutput(ValueError):
    """An output of a dtype outside ``DTYPES`` (quantized, sub-byte): it cannot be compared."""


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """The host memory of a contiguous CPU tensor, as a buffer (no copy; the tensor must stay alive)."""
    size = tensor.numel() * tensor.element_size()
    return memoryview((ctypes.c_char * size).from_address(tensor.data_ptr())).cast("B")


class _Staging:
    """A pinned host buffer for device tensors, made on first use (CPU-only runs never pin) and only as
    large as the largest tensor so far, up to ``CHUNK``: most tasks' outputs are a few MB."""

    def __init__(self) -> None:
        self.buffer: torch.Tensor | None = None

    def get(self, nbytes: int) -> torch.Tensor:
        want = min(CHUNK, max(nbytes, 1 << 20))
        if self.buffer is None or self.buffer.numel() < want:
            self.buffer = None  # the old one goes back to torch's pinned cache first
            try:
                self.buffer = _empty(want, dtype=torch.uint8, pin_memory=torch.cuda.is_available())
            except RuntimeError:  # pinning refused (a locked-memory limit): slower, never a verdict
                self.buffer = _empty(want, dtype=torch.uint8)
        return self.buffer


class OutputWriter:
    """Writes the outputs of each checked call as it returns; ``close`` adds the index.

    A failed write (the file size limit, shared memory full) raises ``OSError`` from the call that
    hit it, never a signal: every byte goes through ``write``, nothing through a mapping.

    The name must be new (``O_EXCL``): the exchange folder is writable by the candidate, whose code
    shares this process, so whatever stands there already (a link, a FIFO) was put there by it, and
    the create fails with ``FileExistsError``, which the child makes the candidate's verdict. With
    ``O_TRUNC`` a link made the open fail as "too many levels of symbolic links", which the child took
    for the harness's own failure: an infrastructure error that stopped the run, on every resume.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.fd = _open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        self.offset = 0
        self.index: list[list[list[Any]]] = []
        self.staging = _Staging()

    def add(self, tensors: Sequence[torch.Tensor]) -> None:
        """One checked call's outputs (on any device)."""
        row = []
        for index, tensor in enumerate(tensors):
            if str(tensor.dtype).removeprefix("torch.") not in DTYPES:
                raise UnsupportedOutput(f"output {index} has dtype {tensor.dtype}, which outputs cannot be compared "
                                        f"in (one of {', '.join(sorted(DTYPES))})")
            nbytes = tensor.numel() * tensor.element_size()
            self._pad()
            row.append([str(tensor.dtype).removeprefix("torch."), list(tensor.shape), self.offset, nbytes])
            if nbytes:
                self._stream(tensor.detach().contiguous().reshape(-1).view(torch.uint8))
        self.index.append(row)

    def close(self) -> None:
        try:
            index = json.dumps(self.index, separators=(",", ":")).encode()
            self._put(memoryview(index + _FOOTER.pack(len(index), MAGIC)))
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Close the file without its index (a reader then finds none); safe to call twice."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            _close(fd)

    def _pad(self) -> None:
        gap = -self.offset % ALIGN
        if gap:
            self._put(memoryview(bytes(gap)))

    def _stream(self, flat: torch.Tensor) -> None:
        if flat.device.type == "cpu" and not STAGE_CPU:
            self._put(_bytes_of(flat))
            return
        staging = self.staging.get(flat.numel())
        for start in range(0, flat.numel(), staging.numel()):
            part = flat[start:start + staging.numel()]
            buffer = staging[:part.numel()]
            _copy(buffer, part)  # synchronous: the pinned buffer is reused right after
            self._put(_bytes_of(buffer))

    def _put(self, data: memoryview) -> None:
        done = 0
        while done < len(data):
            done += _write(self.fd, data[done:])
        self.offset += len(data)


def write_outputs(path: str | os.PathLike, calls: Sequence[Sequence[torch.Tensor]]) -> None:
    """Every call's outputs at once (tests, tools); the child streams with ``OutputWriter``."""
    writer = OutputWriter(path)
    try:
        for tensors in calls:
            writer.add(tensors)
    except BaseException:
        writer.abandon()
        raise
    writer.close()


def read_outputs(path: str | os.PathLike, expected_calls: int, device: torch.device | str = "cpu", *,
                 max_total_bytes: int | None = None) -> list[list[torch.Tensor]]:
    """The outputs of ``expected_calls`` checked calls, copied onto ``device``; never follows a link.

    ``max_total_bytes`` caps what the index may ask to allocate, all entries together, checked before
    anything is allocated. Why: each entry must fit the file, but entries may overlap, so a sparse file
    of a few blocks could otherwise make the reader allocate (and fill) its size once per entry, up to
    MAX_TENSORS times: the reference process would take the whole device, or the host's memory."""
    try:  # no-follow, non-blocking (a FIFO never hangs the reader), a regular file by fstat
        fd = trusted_files.open_regular(path)
    except trusted_files.UntrustedFile as exc:
        raise MalformedOutputs(f"the outputs file {str(exc).removeprefix(os.fspath(path) + ' ')}") from None
    try:
        index, data_end = _read_index(fd, _fstat(fd).st_size)
        if len(index) != expected_calls:
            raise MalformedOutputs(f"the outputs file holds {len(index)} calls, expected {expected_calls}")
        if max_total_bytes is not None:
            asked = sum(_entry(entry, data_end)[3] for row in index for entry in row)
            if asked > max_total_bytes:
                raise MalformedOutputs(f"the outputs file's index asks for {asked} bytes in all, over the "
                                       f"{max_total_bytes}-byte cap (a few times the reference's outputs)")
        target = torch.device(device)
        staging = _Staging() if target.type != "cpu" or STAGE_CPU else None
        return [[_read_tensor(fd, entry, data_end, target, staging) for entry in row] for row in index]
    except MalformedOutputs:
        raise
    except Exception as exc:  # whatever else the file's content makes fail is the file's fault, too
        if reader_fault(exc):  # out of memory while others' models are resident: not the file's
            raise
        raise MalformedOutputs(f"unreadable outputs: {type(exc).__name__}: {exc}"[:500]) from None
    finally:
        _close(fd)


def _read_exact(fd: int, offset: int, size: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise MalformedOutputs("the outputs file is shorter than its index says")
    return data


def _read_index(fd: int, size: int) -> tuple[list[list[list[Any]]], int]:
    if size < _FOOTER.size:
        raise MalformedOutputs("the outputs file has no index")
    length, magic = _FOOTER.unpack(_read_exact(fd, size - _FOOTER.size, _FOOTER.size))
    if magic != MAGIC or length > min(MAX_INDEX_BYTES, size - _FOOTER.size):
        raise MalformedOutputs("the outputs file has no valid index")
    data_end = size - _FOOTER.size - length
    text = _read_exact(fd, data_end, length)
    if not nests_within(text, MAX_INDEX_DEPTH):  # json.loads recurses once per level: [[[[... is a RecursionError
        raise MalformedOutputs(f"the outputs file's index nests deeper than {MAX_INDEX_DEPTH} lists")
    try:
        index = json.loads(text)
    except ValueError:
        raise MalformedOutputs("the outputs file's index is not JSON") from None
    if type(index) is not list or not all(type(row) is list for row in index) \
            or sum(len(row) for row in index) > MAX_TENSORS:
        raise MalformedOutputs("the outputs file does not hold one list of tensors per checked call")
    return index, data_end


def _read_tensor(fd: int, entry: Any, data_end: int, device: torch.device, staging: _Staging | None) -> torch.Tensor:
    dtype, shape, offset, nbytes = _entry(entry, data_end)
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    flat = torch.empty(nbytes, dtype=torch.uint8, device=device)
    if staging is None:
        _fill(fd, _bytes_of(flat), offset)
    else:
        buffer = staging.get(nbytes)
        for start in range(0, nbytes, buffer.numel()):
            part = buffer[:min(buffer.numel(), nbytes - start)]
            _fill(fd, _bytes_of(part), offset + start)
            flat[start:start + part.numel()].copy_(part)
    return flat.view(dtype).reshape(shape)


def _entry(entry: Any, data_end: int) -> tuple[torch.dtype, list[int], int, int]:
    """``[dtype, shape, offset, nbytes]`` checked against the fixed dtypes and the file's data section."""
    ok = type(entry) is list and len(entry) == 4 and type(entry[0]) is str and type(entry[1]) is list \
        and len(entry[1]) <= 64 and all(type(v) is int and 0 <= v < MAX_DIM for v in entry[1]) \
        and all(type(v) is int for v in entry[2:])
    dtype = DTYPES.get(entry[0]) if ok else None
    if dtype is None:
        raise MalformedOutputs(f"the outputs file has a malformed entry: {str(entry)[:200]}")
    shape, offset, nbytes = entry[1], entry[2], entry[3]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if math.prod(max(v, 1) for v in shape) * itemsize >= MAX_SPAN_BYTES:
        raise MalformedOutputs(f"the outputs file has an entry whose shape no tensor can have: {str(entry)[:200]}")
    if nbytes != math.prod(shape) * itemsize or offset < 0 or offset % ALIGN or offset + nbytes > data_end:
        raise MalformedOutputs(f"the outputs file has an entry that does not fit it: {str(entry)[:200]}")
    return dtype, shape, offset, nbytes




def _fill(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise MalformedOutputs("the outputs file is shorter than its index says")
        done += got
