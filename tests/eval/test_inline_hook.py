"""The candidate-side build hook (worker/inside/inline_hook.py): ``load_inline`` goes to the supervisor's
build cache, and torch's extension module is imported only by a candidate that uses it.

In this process, with ``torch.utils.cpp_extension`` taken out of ``sys.modules`` for the test (as in a
fresh candidate process) and put back afterwards; the supervisor's end of the channel is a real pipe.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import sys

import pytest

from pike_harness.worker.channel import Channel
from pike_harness.worker.inside import inline_hook

torch = pytest.importorskip("torch", reason="the hook replaces torch's load_inline")
NAME = inline_hook.EXTENSION_MODULE


@pytest.fixture
def fresh(monkeypatch):
    """No extension module imported yet; sys.meta_path and the environment restored afterwards.
    Yields (channel the hook talks on, the supervisor's read fd, the supervisor's write fd)."""
    import torch.utils

    monkeypatch.delitem(sys.modules, NAME, raising=False)
    monkeypatch.delattr(torch.utils, "cpp_extension", raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    for name in inline_hook.BUILD_ENV:
        monkeypatch.delenv(name, raising=False)
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    yield Channel(to_child_r, from_child_w), from_child_r, to_child_w
    for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
        os.close(fd)


def _sent(fd: int) -> list[dict]:
    """What the hook sent the supervisor so far."""
    if not select.select([fd], [], [], 0)[0]:
        return []
    return [json.loads(line) for line in os.read(fd, 1 << 16).decode().splitlines()]


def test_the_module_is_imported_only_when_a_candidate_uses_it_and_then_serves_from_the_cache(fresh, tmp_path):
    channel, from_child, to_child = fresh
    inline_hook.install(channel)
    assert NAME not in sys.modules  # a candidate that never builds never pays for the import

    cpp_extension = importlib.import_module(NAME)
    assert cpp_extension.load_inline.__wrapped__ is not None  # replaced as it was imported
    assert not isinstance(cpp_extension.__loader__, inline_hook._ReplacingLoader)  # torch's own loader again
    assert not isinstance(cpp_extension.__spec__.loader, inline_hook._ReplacingLoader)
    assert not [f for f in sys.meta_path if isinstance(f, inline_hook._ReplaceOnImport)]  # the finder left

    os.write(to_child, json.dumps({"build": {"ok": False, "log": "pikeh-log-line"}}).encode() + b"\n")
    with pytest.raises(RuntimeError, match="Error building extension 'pikeh_hooked'.*pikeh-log-line"):
        cpp_extension.load_inline(name="pikeh_hooked", cpp_sources=["int f() { return 1; }"],
                                  build_directory=str(tmp_path))
    (message,) = _sent(from_child)
    assert message["event"] == "build" and message["spec"]["name"] == "pikeh_hooked"


def test_a_build_variable_changed_before_the_late_import_still_means_a_private_build(fresh, tmp_path, monkeypatch):
    """The variables are read at install, before the candidate runs: one it sets at its top, before it
    imports the module, sends its load_inline to torch's own (private) build, never to the cache."""
    channel, from_child, to_child = fresh
    os.write(to_child, json.dumps({"build": {"ok": False, "log": "served by the cache"}}).encode() + b"\n")
    inline_hook.install(channel)
    monkeypatch.setenv("CXX", "pikeh-candidates-own-compiler")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(blocker))  # torch's own build fails at once here
    cpp_extension = importlib.import_module(NAME)
    with pytest.raises(OSError):
        cpp_extension.load_inline(name="pikeh_private", cpp_sources=["int f() { return 1; }"])
    assert _sent(from_child) == []


def test_an_already_imported_module_is_replaced_at_once(fresh):
    channel, _, _ = fresh
    cpp_extension = importlib.import_module(NAME)
    original = cpp_extension.load_inline
    inline_hook.install(channel)
    assert cpp_extension.load_inline.__wrapped__ is original
