"""In the candidate's process: ``load_inline`` served by the supervisor's content-addressed build cache.

Installed before the candidate is imported (only when the evaluator has a build cache). The
replacement sends the call's arguments to the supervisor, which keys them, builds them in a
separate process that never runs candidate code (or finds the finished build), and answers with the
path of a private, digest-checked copy of the library in this process's scratch directory. That
copy is imported exactly as ``load_inline`` would import it. A build failure raises the error torch
would raise, with the compiler's log. The supervisor may answer ``fallback`` (arguments it does not
cache, such as include paths into the candidate's own files): then torch's own ``load_inline``
builds privately here, as without a cache.

Importing ``torch.utils.cpp_extension`` costs a third of a second of CPU (it imports setuptools), about
a tenth of a CPU candidate's start, and most candidates never call ``load_inline``. So when the module
is not imported yet, ``install`` only puts a finder first on ``sys.meta_path`` that replaces
``load_inline`` the moment the module is imported (by the candidate, or by Inductor), and the
candidate's process pays for the import only if it uses it. A candidate that removes the finder
first gets torch's own ``load_inline``: the private build it could already ask for (by changing a
build variable), in its own sandbox. torch and the standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pike_harness.worker.channel import Channel

# load_inline arguments that decide what is built (and so enter the cache key); the others
# (build_directory, verbose, keep_intermediates, use_pch) change where or how loudly, not what.
CONTENT_ARGS = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
                "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "with_cuda",
                "with_sycl", "is_python_module", "with_pytorch_error_handling", "no_implicit_headers")
# Environment variables that change what torch's build or the compilers produce. A candidate that
# changed one before calling load_inline builds privately, except the architecture list, which is
# sent along (it enters the key, and the builder uses it): Hopper kernels often need "9.0a".
ARCH_ENV = "TORCH_CUDA_ARCH_LIST"
BUILD_ENV = ("CXX", "CC", "CUDA_HOME", "CUDA_PATH", "CUDNN_HOME", "CUDNN_PATH", "PYTORCH_NVCC", "CUDA_INC_PATH",
             "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_CCBIN", "CPATH", "C_INCLUDE_PATH",
             "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX", "TORCH_DONT_CHECK_COMPILER_ABI")


EXTENSION_MODULE = "torch.utils.cpp_extension"


def install(channel: Channel) -> None:
    """Route ``load_inline`` through the build cache: now if torch's extension module is imported, else
    as it is imported. The build variables are read now, before the candidate is imported: one it
    changes later makes its ``load_inline`` build privately, however late the module is imported."""
    initial = {name: os.environ.get(name) for name in BUILD_ENV + (ARCH_ENV,)}
    module = sys.modules.get(EXTENSION_MODULE)
    if module is not None:
        _replace_load_inline(module, channel, initial)
    else:
        sys.meta_path.insert(0, _ReplaceOnImport(channel, initial))


class _ReplaceOnImport(importlib.abc.MetaPathFinder):
    """Finds ``torch.utils.cpp_extension`` through the other finders and has its loader replace
    ``load_inline`` right after the module ran; then it leaves ``sys.meta_path``."""

    def __init__(self, channel: Channel, initial: dict[str, str | None]):
        self.channel, self.initial = channel, initial

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != EXTENSION_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ReplacingLoader(spec.loader, self)
                return spec
        return None


class _ReplacingLoader(importlib.abc.Loader):
    """Runs the module with torch's own loader, then replaces ``load_inline``; the module keeps torch's
    loader as its ``__loader__``."""

    def __init__(self, loader: Any, finder: _ReplaceOnImport):
        self.loader, self.finder = loader, finder

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        _replace_load_inline(module, self.finder.channel, self.finder.initial)


def _replace_load_inline(cpp_extension: Any, channel: Channel, initial: dict[str, str | None]) -> None:
    original = cpp_extension.load_inline
    signature = inspect.signature(original)

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        spec = {name: bound.arguments[name] for name in CONTENT_ARGS if name in bound.arguments}
        if any(os.environ.get(name) != initial[name] for name in BUILD_ENV):
            return original(*args, **kwargs)
        if os.environ.get(ARCH_ENV) != initial[ARCH_ENV]:
            spec["arch"] = os.environ.get(ARCH_ENV)
        reply = _ask(channel, spec)
        if reply.get("fallback"):
            return original(*args, **kwargs)
        if not reply.get("ok"):
            log = str(reply.get("log") or "")
            print(log, file=sys.stderr)
            raise RuntimeError(f"Error building extension '{spec.get('name')}': {log[-4000:]}")
        return _import_library(str(spec["name"]), Path(str(reply["path"])), bool(spec.get("is_python_module", True)))

    load_inline.__doc__ = original.__doc__
    load_inline.__wrapped__ = original  # type: ignore[attr-defined]
    cpp_extension.load_inline = load_inline


def _ask(channel: Channel, spec: dict[str, Any]) -> dict[str, Any]:
    try:
        channel.send({"event": "build", "spec": spec})
    except TypeError:  # arguments that are not plain JSON: not cacheable
        return {"fallback": True}
    while True:
        message = channel.receive(deadline=None, poll_s=1.0)
        if message is not None and "build" in message:
            return dict(message["build"])


def _import_library(name: str, path: Path, is_python_module: bool) -> Any:
    """What torch's loader does with a freshly built library: a Python module, or a library of ops."""
    if not is_python_module:
        import torch

        torch.ops.load_library(str(path))
        return str(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the built extension {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
