"""A content-addressed cache of ``load_inline`` builds, shared by every candidate, that candidates cannot poison.

A one-kernel ``load_inline`` build takes about a minute on a GPU host, LLMs repeat themselves, and a
fix often leaves the kernel unchanged, so an identical build must happen once. Sharing builds
between untrusted candidates is only safe if no candidate can decide what another one loads, so:

* **The key is computed here, in the supervisor**, from the call's content arguments (sources,
  functions, flags, name, options), the toolchain (torch, CUDA, compiler, Python, C++ ABI) and the
  target GPU architecture. What a candidate claims is never a key: identical content is the only
  way to share an entry.
* **Builds run in a builder process that never runs candidate code** (``python -m
  pike_harness.worker.supervise.buildcache build``): torch's own ``load_inline`` with its final import
  disabled, so the compiler runs but no static initialiser of the built library does. The builder
  is sandboxed like a candidate (scrubbed environment, own session, marker, killed at the
  candidate's compile deadline) and sees no GPU.
* **Entries are published by the supervisor**: it hashes the built library, renames the staging
  directory into place (atomic), makes it read-only and records the digest in memory (and in the
  entry's ``meta.json`` for other harness processes sharing the cache).
* **Every hand-out is verified**: the library is copied into the requesting candidate's private
  scratch directory while being hashed; a digest that differs from the recorded one means the entry
  was tampered with: it is discarded, counted (``tampered``) and rebuilt. The candidate loads the
  verified copy, so changing the cache after the check changes nothing it loads.
* **A build is bounded** like a candidate: no file it writes grows past ``MAX_FILE_BYTES``
  (``RLIMIT_FSIZE``, set by the builder on itself before torch's build starts, so ninja, the compilers,
  the assembler and the linker inherit it), its processes together hold at most the request's
  ``memory_mb`` and its staging folder at most ``disk_mb`` (capped by the cache's own bounds), polled
  while it runs; a library over ``MAX_LIBRARY_BYTES`` is not published. A build stopped for a limit
  is the candidate's failure to build (``build_limit``), remembered, never retried as the machine's.
* **Entries are evicted**: past ``MAX_TOTAL_BYTES`` in all, the least recently used go
  (``cache_eviction``), never one that a build or hand-out holds (its key's lock).

What this cannot stop, and the container evaluator adds, is written in docs/evaluator.md ("Build
cache"). Standard library here; the builder and the probe import torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.worker import text_safety
from pike_harness.worker.supervise import cache_eviction, sandbox, scratch_usage, seccomp, trusted_files

KEY_SCHEMA = 1
# Flags that make a compiler run other programs or read a file of more flags. Builds that use them
# are not shared (they still build, privately, in the candidate's own process).
UNSHARED_FLAG_PARTS = ("-wrapper", "-fplugin", "-specs", "--compiler-bindir", "-ccbin", "-B", "@", "-load")
STRING_LIST_ARGS = ("cpp_sources", "cuda_sources", "sycl_sources", "extra_cflags", "extra_cuda_cflags",
                    "extra_sycl_cflags", "extra_ldflags", "extra_include_paths")
FLAG_ARGS = ("with_cuda", "with_sycl", "is_python_module", "with_pytorch_error_handling", "no_implicit_headers")
BUILD_FAILED_EXIT = 2
# A failed build is remembered (the same source fails the same way) unless its log says the machine,
# not the source, was the problem.
TRANSIENT_FAILURES = ("Killed signal", "out of memory", "Cannot allocate memory", "No space left", "[the builder exited")
# What one build may take. Measured on this repository's CPU host (g++ 12, torch 2.13, 2026-11-30), a
# one-function torch extension (torch/extension.h, a GELU loop): main.o 2.8 MB, the library 1.6 MB,
# 5 MB in the build folder, the compiler at 1.45 GB resident (1.56 GB of address space), 20 s; with
# -g, main.o 12 MB and the library 8 MB. A CUDA build adds an object with one cubin (or PTX) per
# architecture: a few MB more for one kernel. A top-level asm(".space N") needs no time to write N
# bytes (300 MB in 0.24 s), so each bound is a hard limit, not a timeout.
# Any one file a builder writes (objects, the library, nvcc's temporaries, the log): 40 times the
# largest measured (12 MB); a write past it kills the writer with SIGXFSZ.
MAX_FILE_BYTES = 512 << 20
# A built library larger than this is not published: 30 times the largest measured (8 MB with -g).
# It was 2 GiB: a 1.9 GB library of zeros was published, kept across runs, and one comment's
# difference in the source made another.
MAX_LIBRARY_BYTES = 256 << 20
# The staging folder (sources, objects, library, temporaries, log) at most, in MB, whatever disk a
# request allows its candidate's own folders: 100 times the 21 MB measured with -g.
BUILD_DISK_MB = 2048
BUILD_MAX_ENTRIES = 10_000  # files and folders in a staging folder (a build makes a dozen)
DISK_POLICE_S = 0.5  # how often the staging folder is measured while the builder runs
# All published entries together (``cache_eviction.charge``: apparent bytes plus a block per file),
# kept by least-recently-used eviction after each publication. 8 GiB, as for the JIT caches: thousands
# of the usual libraries (a few MB), 32 of the largest allowed.
MAX_TOTAL_BYTES = 8 << 30
BUILD_LIMIT_CHECK = "build_limit"
# How a toolchain reports a process killed for writing past RLIMIT_FSIZE: gcc ("File size limit
# exceeded signal terminated program as"), collect2 ("ld terminated with signal 25 [File size limit
# exceeded]"), Python's subprocess ("died with <Signals.SIGXFSZ: 25>").
FILE_SIZE_SIGNS = re.compile(rf"File size limit exceeded|signal {int(signal.SIGXFSZ)}\b|SIGXFSZ")
MAX_META_BYTES = 1 << 20
ARCH_LIST = re.compile(r"^[0-9A-Za-z.;+ ]{0,200}$")  # "9.0", "9.0a", "8.0;9.0+PTX", "Hopper"
# Folders of the evaluator's layout (engine/core.py) beside the build cache's root: CACHE/build's
# sibling CACHE/jit holds the shared JIT caches, which builders must not see (spawn.sandboxed hides
# them from candidates).
SIBLINGS_HIDDEN = ("jit",)


class HandOutRefused(Exception):
    """The candidate's scratch folder refused the hand-out of a built library (it planted something), or
    its file system had no room for it: ``errno`` then says so (``no_space.NO_SPACE``), and
    ``needed_bytes`` is the library's size, for the supervisor to measure whose that is."""

    def __init__(self, reason: str, *, errno: int | None = None, needed_bytes: int = 0):
        super().__init__(reason)
        self.errno, self.needed_bytes = errno, needed_bytes


class BuildTimeout(Exception):
    """The build ran past the candidate's compile deadline (the builder has been killed)."""


class ToolchainError(RuntimeError):
    """The toolchain probe failed: the cache cannot key builds here (calls fall back to private builds)."""


@dataclass
class BuildStats:
    hits: int = 0
    misses: int = 0
    failures: int = 0  # builds that failed to compile (cached in memory: the same source fails fast)
    tampered: int = 0  # entries whose library no longer matched its recorded digest
    limited: int = 0  # builds stopped for a limit (file size, memory, disk, library size): the candidate's
    evicted: int = 0  # entries removed to keep the cache within its total
    fallbacks: int = 0  # calls not cached (unusual arguments): built privately by the candidate
    build_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Entry:
    digest: str
    library: str  # file name inside the entry directory


@dataclass
class BuildCache:
    """The supervisor's side: keys, builds, publishes and hands out verified copies. Thread-safe."""

    root: Path
    environ: Mapping[str, str] | None = None
    python: str = sys.executable
    max_jobs: int = 2  # ninja jobs per build (a load_inline build has one or two sources)
    cpus: set[int] | None = None  # cores builders may run on (schedulers keep timing cores free)
    registry: Any = None  # optional: .add(pid, marker, scope) -> token / .remove(token) (quiet timing)
    isolation: Any = None  # optional isolation.Isolation: builders compile candidate code in the sandbox
    # Folders builders never see besides the cache root, the candidate's scratch root and
    # ``isolation.hidden`` (the work folder): those a candidate's sandbox hides too. None: the JIT
    # cache beside the cache root (SIBLINGS_HIDDEN).
    hidden: tuple[Path, ...] | None = None
    # Bounds of one build (a request's own memory_mb and disk_mb, given to ``serve``, can only lower the
    # last two): the largest file, the builder's processes' memory in MB (None: what a candidate gets
    # by default, half the host's memory) and the staging folder's disk in MB.
    max_file_bytes: int = MAX_FILE_BYTES
    memory_mb: int | None = None
    disk_mb: int = BUILD_DISK_MB
    max_total_bytes: int = MAX_TOTAL_BYTES  # all entries together (least recently used evicted past it)
    stats: BuildStats = field(default_factory=BuildStats)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if self.hidden is None:
            self.hidden = tuple(self.root.parent / name for name in SIBLINGS_HIDDEN)
        for sub in ("ext", "staging", "locks"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._mutex = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._entries: dict[str, _Entry] = {}  # published or verified by this process
        self._failed: dict[str, dict[str, str]] = {}  # key -> the failure's log (and check, reason)
        self._toolchains: dict[str, dict[str, Any]] = {}
        self._probe_locks: dict[str, threading.Lock] = {}

    # -- keys ----------------------------------------------------------------------------------
    def toolchain(self, device: str) -> dict[str, Any]:
        """Versions and target architecture for ``device``, probed once by a trusted subprocess."""
        kind = device if device.startswith("cuda") else "cpu"
        with self._mutex:
            probe_lock = self._probe_locks.setdefault(kind, threading.Lock())
        with probe_lock:  # one probe per device, however many builds ask at once
            known = self._toolchains.get(kind)
            if known is None:
                try:
                    known = probe_toolchain(kind, self.python, self._base_environ(), cwd=self.root)
                except ToolchainError as exc:
                    known = {"error": str(exc)}  # remembered: no build waits for a failing probe again
                self._toolchains[kind] = known
            if "error" in known:
                raise ToolchainError(str(known["error"]))
            return known

    def prefetch(self, devices: list[str]) -> None:
        """Probe the toolchains of ``devices`` now (in a background thread), not at the first build."""
        for device in devices:
            with contextlib.suppress(ToolchainError):
                self.toolchain(device)

    def _count(self, name: str, amount: float = 1) -> None:
        with self._mutex:
            setattr(self.stats, name, getattr(self.stats, name) + amount)

    def _base_environ(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ

    # -- serving one load_inline call ------------------------------------------------------------
    def serve(self, spec: Any, device: str, scratch: Path, *, deadline: float,
              tick: Callable[[], None] = lambda: None, memory_mb: int | None = None,
              disk_mb: int | None = None) -> dict[str, Any]:
        """The answer to one ``load_inline`` call of a candidate (see ``inline_hook``).

        ``tick`` is called while waiting (the supervisor polices the candidate there and may raise);
        BuildTimeout when ``deadline`` (monotonic) passes first. ``memory_mb``, ``disk_mb``: the
        request's limits, which bound a build too (within the cache's own). A build stopped for a
        limit fails with ``check`` (``BUILD_LIMIT_CHECK``) and ``reason`` besides its ``log``.
        """
        canonical = canonical_spec(spec)
        if canonical is None:
            self._count("fallbacks")
            return {"fallback": True}
        toolchain = self.toolchain(device)
        key = cache_key(canonical, toolchain)
        began = time.monotonic()
        with self._key_lock(key, deadline, tick):
            failed = self._failed.get(key)
            if failed is not None:
                self._count("hits")
                return {"ok": False, **failed, "hit": True, "key": key}
            entry = self._find(key)
            if entry is not None:
                path = self._hand_out(key, entry, scratch)
                if path is not None:
                    self._count("hits")
                    return {"ok": True, "path": str(path), "hit": True, "key": key}
            bounds = self._bounds(memory_mb, disk_mb)
            ok, log, paused, limit = self._build(key, canonical, toolchain, deadline, tick, Path(scratch).parent,
                                                 bounds)
            seconds = time.monotonic() - began
            self._count("build_seconds", seconds)
            if not ok:
                self._count("failures")
                failure = {"log": log}
                if limit is not None:  # the candidate's doing: remembered, whatever its log says
                    self._count("limited")
                    failure.update(check=BUILD_LIMIT_CHECK, reason=limit)
                if limit is not None or not any(sign in log for sign in TRANSIENT_FAILURES):
                    self._failed[key] = failure
                return {"ok": False, **failure, "hit": False, "key": key, "seconds": seconds, "paused_s": paused}
            self._count("misses")
            entry = self._entries[key]
            path = self._hand_out(key, entry, scratch)
            if path is None:  # tampered with between publishing and handing out
                return {"ok": False, "log": "the build cache entry changed while it was being handed out",
                        "hit": False, "key": key, "paused_s": paused}
            return {"ok": True, "path": str(path), "hit": False, "key": key, "seconds": seconds, "paused_s": paused}

    @contextlib.contextmanager
    def _key_lock(self, key: str, deadline: float, tick: Callable[[], None]):
        """One build per key: a lock for this process's threads, a file lock for other processes."""
        with self._mutex:
            lock = self._key_locks.setdefault(key, threading.Lock())
        while not lock.acquire(timeout=0.1):
            tick()
            if time.monotonic() > deadline:
                raise BuildTimeout()
        try:
            with open(self.root / "locks" / f"{key}.lock", "a+") as handle:
                while True:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        tick()
                        if time.monotonic() > deadline:
                            raise BuildTimeout() from None
                        time.sleep(0.1)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            lock.release()

    def _bounds(self, memory_mb: int | None, disk_mb: int | None) -> _Bounds:
        """One build's bounds: the cache's own, lowered by the request's where it gives lower ones."""
        own_memory = self.memory_mb
        if own_memory is None:
            from pike_harness.worker.supervise.supervisor import default_memory_mb

            own_memory = default_memory_mb()
        return _Bounds(file_bytes=self.max_file_bytes,
                       memory_mb=min(own_memory, memory_mb) if memory_mb else own_memory,
                       disk_mb=min(self.disk_mb, disk_mb) if disk_mb else self.disk_mb)

    def _find(self, key: str) -> _Entry | None:
        """An entry published by this process, or one another process published (meta.json's digest)."""
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        try:
            meta = json.loads(trusted_files.read_regular(self.root / "ext" / key / "meta.json", MAX_META_BYTES))
            entry = _Entry(digest=str(meta["digest"]), library=str(meta["library"]))
        except (OSError, ValueError, KeyError, TypeError, trusted_files.UntrustedFile):
            return None
        if "/" in entry.library or entry.library.startswith("."):
            return None
        self._entries[key] = entry
        return entry

    def _hand_out(self, key: str, entry: _Entry, scratch: Path) -> Path | None:
        """Copy the library into a fresh folder of the candidate's scratch while hashing it; None (and
        the entry discarded) when the bytes are not the ones recorded at publication, None too when
        the entry is gone (evicted). The entry's folder time is set: its last use, for eviction.

        The folder is made here with an unguessable name and written through its descriptor, the
        file created with ``O_EXCL``: a scratch folder full of links planted by the candidate (it
        learns earlier hand-outs' paths) can never turn the copy into a write anywhere else.
        """
        entry_path = self.root / "ext" / key
        try:
            entry_fd = trusted_files.open_directory(entry_path)
        except trusted_files.UntrustedFile:
            if os.path.lexists(entry_path):  # a file or a link where the entry was
                self._tampered(key)
            else:  # evicted (by this process or another sharing the cache): built again
                self._entries.pop(key, None)
            return None
        try:
            source = trusted_files.open_regular(entry.library, dir_fd=entry_fd, max_bytes=MAX_LIBRARY_BYTES)
            with contextlib.suppress(OSError):
                os.utime(entry_fd)  # used now: the last to be evicted
        except trusted_files.UntrustedFile:
            self._tampered(key)
            return None
        finally:
            os.close(entry_fd)
        try:
            scratch_fd = trusted_files.open_directory(scratch)
            try:
                name, folder = trusted_files.make_private_folder(scratch_fd, "extension-")
            finally:
                os.close(scratch_fd)
            try:
                target = trusted_files.create_exclusive(entry.library, dir_fd=folder, mode=0o500)
            finally:
                os.close(folder)
            try:
                digest = trusted_files.copy_regular(source, target, MAX_LIBRARY_BYTES)
            except OSError:  # no room, say: what was copied gives its room back (by the descriptor)
                with contextlib.suppress(OSError):
                    os.ftruncate(target, 0)
                raise
            finally:
                os.close(target)
        except (OSError, trusted_files.UntrustedFile) as exc:
            raise HandOutRefused(f"the built library could not be handed out into the scratch folder: {exc}",
                                 errno=exc.errno if isinstance(exc, OSError) else None,
                                 needed_bytes=_size(source)) from None
        finally:
            os.close(source)
        path = Path(scratch) / name / entry.library
        if digest != entry.digest:
            trusted_files.discard(path.parent)
            self._tampered(key)
            return None
        return path

    def _tampered(self, key: str) -> None:
        self._count("tampered")
        self._discard(key)

    def _discard(self, key: str) -> None:
        self._entries.pop(key, None)
        folder = self.root / "ext" / key
        if folder.exists():
            doomed = self.root / "staging" / f"discarded-{key[:16]}-{secrets.token_hex(4)}"
            with contextlib.suppress(OSError):
                os.chmod(folder, stat.S_IRWXU)  # the cache root: candidates never write there
            with contextlib.suppress(OSError):
                folder.rename(doomed)
                trusted_files.remove_tree(doomed)

    # -- building --------------------------------------------------------------------------------
    def _build(self, key: str, spec: dict[str, Any], toolchain: dict[str, Any], deadline: float,
               tick: Callable[[], None], scratch_root: Path, bounds: _Bounds) -> tuple[bool, str, float, str | None]:
        """Build in a fresh process: (ok, log, seconds the builder spent paused by quiet timing, the
        limit it was stopped for in words or None). ``scratch_root``: the folder of the candidates'
        scratch folders, hidden from the builder. The staging folder is removed whatever happens."""
        staging = self.root / "staging" / f"{key[:16]}-{secrets.token_hex(6)}"
        staging.mkdir(mode=0o700)
        (staging / "tmp").mkdir()
        marker = secrets.token_hex(12)
        env = sandbox.scrubbed_environment(self._base_environ(), {
            "HOME": str(staging), "TMPDIR": str(staging / "tmp"), "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "CUDA_VISIBLE_DEVICES": "",
            "MAX_JOBS": str(self._base_environ().get("MAX_JOBS") or self.max_jobs),
            "TORCH_EXTENSIONS_DIR": str(staging / "unused"), **sandbox.marker_environment(marker),
        })
        arch = spec.get("arch") or toolchain.get("arch")
        if arch:
            env["TORCH_CUDA_ARCH_LIST"] = str(arch)
        token = None
        paused = 0.0
        staging_fd = trusted_files.open_directory(staging)  # made just now: what the builder sees as its folder
        log = trusted_files.create_exclusive("build.log", dir_fd=staging_fd, readable=True)
        try:
            from pike_harness.worker.supervise.spawn import thread_affinity

            argv = [self.python, *sandbox.TRUSTED_PYTHON, "-m", "pike_harness.worker.supervise.buildcache", "build",
                    str(staging / "build"), str(bounds.file_bytes)]
            with thread_affinity(self.cpus), seccomp.program_fd() as filter_fd:
                if self.isolation is not None and self.isolation.active:
                    # writes only to its staging folder; sees no other build (entries, logs, other stagings),
                    # no JIT cache and no candidate's scratch folder: what a candidate's sandbox hides
                    hide = [self.root, *(self.hidden or ()), scratch_root]
                    argv = self.isolation.wrap(argv, cwd=staging, hide=hide, writable=[staging],
                                               seccomp_fd=filter_fd)
                popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=str(staging), env=env, start_new_session=True,
                                         pass_fds=() if filter_fd is None else (filter_fd,))
            if self.registry is not None:
                token = self.registry.add(popen.pid, marker, "host")
            assert popen.stdin is not None
            try:
                popen.stdin.write(json.dumps(spec).encode())
                popen.stdin.close()
            except BrokenPipeError:
                pass
            limit = None
            disk_measured = 0.0
            try:
                while popen.poll() is None:
                    tick()
                    paused = self.registry.paused_seconds(token) if token is not None else 0.0
                    if time.monotonic() > deadline + paused:  # time paused for a timing is not the build's
                        raise BuildTimeout()
                    limit = _over_memory(popen.pid, bounds)
                    if limit is None and time.monotonic() - disk_measured >= DISK_POLICE_S:
                        disk_measured = time.monotonic()
                        limit = _over_disk(staging, bounds)
                    if limit is not None:
                        break
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        popen.wait(timeout=0.1)
            finally:
                if token is not None:
                    paused = self.registry.paused_seconds(token)
                    self.registry.remove(token)
                sandbox.kill_all(popen, marker)
            if limit is None:  # once more as it ended: a build may end between two measurements
                limit = _over_disk(staging, bounds)
            log_text = trusted_files.tail_fd(log, 20_000)  # the descriptor: a swapped build.log is not read
            if limit is None and popen.returncode != 0 and (popen.returncode == -signal.SIGXFSZ
                                                             or FILE_SIZE_SIGNS.search(log_text)):
                limit = f"a file it wrote grew past the {bounds.file_bytes >> 20} MiB file-size limit"
            if limit is not None:
                return False, _limited(spec, limit, log_text), paused, _reason(spec, limit)
            if popen.returncode != 0:
                if popen.returncode != BUILD_FAILED_EXIT:
                    log_text += f"\n[the builder exited with {sandbox.signal_name(popen.returncode)}]"
                return False, log_text, paused, None
            try:
                library = _built_library(staging_fd, f"{spec['name']}.so")
            except trusted_files.UntrustedFile as exc:
                return False, f"{log_text}\n[the build left no usable library: {exc}]", paused, None
            try:
                size = os.fstat(library).st_size
                if size > MAX_LIBRARY_BYTES:
                    limit = (f"its library holds {size >> 20} MiB, over the {MAX_LIBRARY_BYTES >> 20} MiB "
                             "limit on a built library")
                    return False, _limited(spec, limit, log_text), paused, _reason(spec, limit)
                self._publish(key, library, f"{spec['name']}.so", spec, toolchain, log_text)
            finally:
                os.close(library)
            self._evict(keep=key)
            return True, log_text, paused, None
        finally:
            os.close(log)
            os.close(staging_fd)
            trusted_files.remove_tree(staging)

    def _publish(self, key: str, library: int, library_name: str, spec: dict[str, Any], toolchain: dict[str, Any],
                 log_text: str) -> None:
        """Copy the built library (an open descriptor) into a new entry folder the builder never saw,
        hashing while copying, then rename the folder into place: the entry holds only what this
        process wrote, and its digest is of exactly those bytes."""
        staging_root = trusted_files.open_directory(self.root / "staging")
        try:
            entry_name, entry_fd = trusted_files.make_private_folder(staging_root, "entry-")
            try:
                target = trusted_files.create_exclusive(library_name, dir_fd=entry_fd, mode=0o444)
                try:
                    digest = trusted_files.copy_regular(library, target, MAX_LIBRARY_BYTES)
                    size = os.fstat(target).st_size
                finally:
                    os.close(target)
                meta = {"schema": KEY_SCHEMA, "key": key, "digest": digest, "library": library_name,
                        "name": spec["name"], "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "toolchain": toolchain}
                for name, text in (("meta.json", json.dumps(meta, indent=1, sort_keys=True)),
                                   ("build.log", text_safety.printable(log_text[-20_000:]))):  # it echoes the source
                    data = text.encode()
                    size += len(data)
                    fd = trusted_files.create_exclusive(name, dir_fd=entry_fd, mode=0o444)
                    try:
                        trusted_files.write_all(fd, data)
                    finally:
                        os.close(fd)
                cache_eviction.write_charge(entry_fd, cache_eviction.charge(4, size))  # 3 files and .charge
                os.fchmod(entry_fd, 0o555)
            finally:
                os.close(entry_fd)
        finally:
            os.close(staging_root)
        if (self.root / "ext" / key).exists():  # published by another process meanwhile (or left by a crash)
            self._discard(key)
        os.rename(self.root / "staging" / entry_name, self.root / "ext" / key)
        self._entries[key] = _Entry(digest=digest, library=library_name)

    def _evict(self, *, keep: str) -> None:
        """Keep the entries within ``max_total_bytes``, least recently used first (never ``keep`` or an
        entry whose key's lock is held: a build or hand-out in progress), and remove staging folders
        a crash left a day ago. Never raises."""
        try:
            ext = trusted_files.open_directory(self.root / "ext")
        except trusted_files.UntrustedFile:
            return
        try:
            removed = cache_eviction.evict(self.root / "ext", ext, max_total_bytes=self.max_total_bytes,
                                           is_entry=_is_key, keep=keep, claim=self._unused)
        finally:
            os.close(ext)
        for name in removed:
            self._entries.pop(name, None)
        self._count("evicted", len(removed))
        stale = time.time() - cache_eviction.STALE_S
        with contextlib.suppress(OSError), os.scandir(self.root / "staging") as listing:
            for item in list(listing):
                with contextlib.suppress(OSError):
                    if item.stat(follow_symlinks=False).st_mtime < stale:
                        trusted_files.discard(item.path)

    @contextlib.contextmanager
    def _unused(self, key: str):
        """Whether no build or hand-out holds ``key`` (in this process or another); held while True."""
        try:
            handle = open(self.root / "locks" / f"{key}.lock", "a+")  # noqa: SIM115 - closed below
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            handle.close()


@dataclass(frozen=True)
class _Bounds:
    file_bytes: int
    memory_mb: int
    disk_mb: int


def _over_memory(root: int, bounds: _Bounds) -> str | None:
    """The builder's processes' memory (as a candidate's is judged: ``sandbox.memory_bytes``) in words
    when over its bound, else None."""
    limit = bounds.memory_mb << 20
    used = sandbox.memory_bytes(sandbox.sandbox_members(root), limit)
    if used <= limit:
        return None
    return f"its processes used {used >> 20} MB, over the {bounds.memory_mb} MB memory limit"


def _over_disk(staging: Path, bounds: _Bounds) -> str | None:
    """The staging folder's size (allocated bytes, ``scratch_usage.measure``) in words when over its bound."""
    usage = scratch_usage.measure([staging], BUILD_MAX_ENTRIES)
    if usage.over_entries:
        return f"its folder held more than {BUILD_MAX_ENTRIES} files"
    if usage.bytes > bounds.disk_mb << 20:
        return f"its folder held {usage.bytes >> 20} MB, over the {bounds.disk_mb} MB disk limit"
    return None


def _reason(spec: dict[str, Any], limit: str) -> str:
    return f"[{BUILD_LIMIT_CHECK}] the build of {spec['name']!r} was stopped: {limit}"


def _limited(spec: dict[str, Any], limit: str, log_text: str) -> str:
    """The log of a build stopped for a limit: the reason first, where the candidate's exception (which
    keeps the log's last 4,000 characters, and its verdict their first 2,000) shows it."""
    return f"{_reason(spec, limit)}\n{log_text[-1500:]}"


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


def _is_key(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def _built_library(staging_fd: int, name: str) -> int:
    """The built library in the builder's folder, opened without following anything it could have
    planted (``build`` or the library swapped for a link, a FIFO, a device): a descriptor. Its size is
    the caller's to judge (one over ``MAX_LIBRARY_BYTES`` is the candidate's ``build_limit``)."""
    build = trusted_files.open_directory("build", dir_fd=staging_fd)
    try:
        return trusted_files.open_regular(name, dir_fd=build)
    finally:
        os.close(build)


def canonical_spec(spec: Any) -> dict[str, Any] | None:
    """The call's content arguments in one canonical form, or None when they are not shareable.

    Not shared: non-string sources or flags, include paths (they point at files whose content is not
    in the key), and flags that make the compiler run other programs.
    """
    if not isinstance(spec, dict):
        return None
    name = spec.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        return None
    out: dict[str, Any] = {"name": name}
    for arg in STRING_LIST_ARGS:
        value = spec.get(arg)
        if value is None:
            value = []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return None
        out[arg] = value
    if out["extra_include_paths"]:
        return None
    flags = out["extra_cflags"] + out["extra_cuda_cflags"] + out["extra_sycl_cflags"] + out["extra_ldflags"]
    if any(part in flag for flag in flags for part in UNSHARED_FLAG_PARTS):
        return None
    functions = spec.get("functions")
    if isinstance(functions, str):
        functions = [functions]
    if functions is not None:
        if isinstance(functions, list) and all(isinstance(f, str) for f in functions):
            pass
        elif isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in functions.items()):
            functions = dict(sorted(functions.items()))
        else:
            return None
    out["functions"] = functions
    for arg in FLAG_ARGS:
        value = spec.get(arg)
        if value is not None and not isinstance(value, bool):
            return None
        out[arg] = value
    if out["is_python_module"] is None:
        out["is_python_module"] = True
    if out["with_pytorch_error_handling"] is None:
        out["with_pytorch_error_handling"] = True
    arch = spec.get("arch")  # the candidate's own TORCH_CUDA_ARCH_LIST, when it set one
    if arch is not None:
        if not isinstance(arch, str) or not ARCH_LIST.match(arch):
            return None
        out["arch"] = arch
    return out


def cache_key(spec: dict[str, Any], toolchain: dict[str, Any]) -> str:
    """sha256 of the canonical content arguments, the toolchain and the target architecture."""
    blob = json.dumps({"schema": KEY_SCHEMA, "spec": spec, "toolchain": toolchain}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def jit_cache_key(candidate_source: str, baseline_mode: str | None) -> str:
    """The per-source Triton/Inductor cache directory name: only identical sources share one."""
    blob = json.dumps({"schema": KEY_SCHEMA, "source": candidate_source, "mode": baseline_mode or ""})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def probe_toolchain(kind: str, python: str, environ: Mapping[str, str], *, cwd: Path) -> dict[str, Any]:
    """Run ``python -m pike_harness.worker.supervise.buildcache probe`` for ``cpu`` or ``cuda[:N]``, in
    ``cwd`` (a folder of the harness's own, never the caller's: docker's is /scratch, candidates'),
    with ``sandbox.TRUSTED_PYTHON``: what it prints keys every build and sets the builders' architecture."""
    from pike_harness.worker.supervise.spawn import visible_devices

    env = sandbox.scrubbed_environment(environ, {"CUDA_VISIBLE_DEVICES": visible_devices(kind, environ),
                                                 "PYTHONDONTWRITEBYTECODE": "1"})
    try:
        done = subprocess.run([python, *sandbox.TRUSTED_PYTHON, "-m", "pike_harness.worker.supervise.buildcache", "probe",
                               kind], env=env, cwd=cwd, capture_output=True, text=True, timeout=180,
                              start_new_session=True)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        raise ToolchainError(f"the toolchain probe failed: {exc}") from None
    if not isinstance(found, dict):
        raise ToolchainError("the toolchain probe printed no object")
    return found


# -- trusted subprocesses: python -m pike_harness.worker.supervise.buildcache {build DIR | probe KIND} ----------

def _first_line(argv: list[str], *, last: bool = True) -> str | None:
    """One identifying line of a tool's ``--version`` (nvcc puts it last, compilers first)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    if not lines:
        return None
    return lines[-1] if last else lines[0]


def _probe(kind: str) -> dict[str, Any]:
    import platform

    import torch
    import torch.utils.cpp_extension as cpp_extension

    info: dict[str, Any] = {
        "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
        "machine": platform.machine(), "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)),
        "cxx": _first_line([os.environ.get("CXX", "c++"), "--version"], last=False), "arch": None, "gpu": None,
    }
    home = getattr(cpp_extension, "CUDA_HOME", None)
    if home:
        info["nvcc"] = _first_line([os.path.join(home, "bin", "nvcc"), "--version"])
    if kind.startswith("cuda"):
        arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
        if not arch and torch.cuda.is_available():
            # what load_inline picks by itself: the device's capability, clamped to the newest this
            # torch build supports, with PTX (see torch.utils.cpp_extension._get_cuda_arch_flags)
            capability = torch.cuda.get_device_capability(0)
            supported = [int("".join(c for c in a.split("_")[1] if c.isdigit()))
                         for a in torch.cuda.get_arch_list() if a.startswith("sm_")]
            if supported:
                capability = min(max((sm // 10, sm % 10) for sm in supported), capability)
            arch = f"{capability[0]}.{capability[1]}+PTX"
        info["arch"] = arch
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _limit_files(max_file_bytes: int) -> None:
    """No file this process or any it starts (ninja, compilers, assembler, linker) writes grows past
    ``max_file_bytes`` (the writer dies of SIGXFSZ), and no core dump: set before the build starts."""
    import resource

    for kind, value in ((resource.RLIMIT_FSIZE, max_file_bytes), (resource.RLIMIT_CORE, 0)):
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))


def _build(build_dir: Path, max_file_bytes: int = MAX_FILE_BYTES) -> int:
    """Build one extension with torch's ``load_inline`` minus its final import: no candidate code runs."""
    import inspect
    import traceback

    _limit_files(max_file_bytes)
    import torch.utils.cpp_extension as cpp_extension

    spec = json.loads(sys.stdin.read())
    cpp_extension._import_module_from_library = lambda *args, **kwargs: None  # never load what we build
    build_dir.mkdir(parents=True, exist_ok=True)
    accepted = set(inspect.signature(cpp_extension.load_inline).parameters)
    kwargs = {name: value for name, value in spec.items() if name in accepted}
    kwargs.update(build_directory=str(build_dir), verbose=True)
    if "use_pch" in accepted:
        kwargs["use_pch"] = False
    try:
        cpp_extension.load_inline(**kwargs)
    except Exception:
        traceback.print_exc()
        return BUILD_FAILED_EXIT
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        sys.stdout.flush()
        sys.exit(_build(Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) >= 4 else MAX_FILE_BYTES))
    if len(sys.argv) >= 3 and sys.argv[1] == "probe":
        print(json.dumps(_probe(sys.argv[2]), sort_keys=True))
        sys.exit(0)
    print("usage: python -m pike_harness.worker.supervise.buildcache {build DIR [MAX_FILE_BYTES] | probe cpu|cuda}",
          file=sys.stderr)
    sys.exit(64)
