"""Shared Triton/Inductor caches, per candidate source, that no candidate can write or squat.

Compiling Triton kernels and Inductor graphs takes seconds to minutes, and identical sources come
back (an LLM repeating itself, a re-evaluation, a baseline re-timed), so their JIT caches are kept
in ``ROOT/<sha256 of the source and baseline mode>/`` between runs. If candidates wrote there
directly, one could plant a file where another source's folder will go (that source's evaluations,
in later runs too, would crash) or put its kernels into another source's cache. So:

* candidates never see ``ROOT`` (the sandbox hides it); each gets a fresh private JIT folder in its
  own scratch folder, made by the supervisor with an unguessable name before the candidate runs;
* ``prepare`` copies the source's shared entry (if any) into that folder, descriptor by descriptor;
* ``publish`` copies the folder back, after a correct verdict and only when the source has no
  entry yet, through the no-follow, size-capped ``trusted_files.copy_tree`` into a staging folder
  that is then renamed into place: what is shared is only ever read back by the same source.

Only the two folders Triton and Inductor write (``SUBFOLDERS``) travel, both ways. Sizes are apparent
sizes (``st_size``): a sparse file, which costs its candidate almost nothing on disk, is copied in
full, so it counts in full. One entry holds at most ``MAX_BYTES``; all entries together at most
``MAX_TOTAL_BYTES``, kept by removing the least recently used entries after each publication (an
entry's folder's modification time is set when it is published and each time ``prepare`` uses it).
An entry is removed by renaming it out of the way, then through ``trusted_files.discard``, which
never follows a link.

Anything in ``ROOT`` that is not a folder where a source's entry goes (left by an older version, or
by hand) is removed, never followed. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pike_harness.worker.supervise import cache_eviction, trusted_files
from pike_harness.worker.supervise.buildcache import jit_cache_key

MAX_FILES = 20_000
# One source's entry, in apparent bytes. Measured on an H200 (torch 2.11, Triton 3.6, 2026-11-30):
# one cache that had compiled a 4-block fp16 transformer with Inductor twice (default, then
# max-autotune) and two convolutions with max-autotune held 200 MB in 4,244 files (Inductor's
# FX-graph entries up to 41 MB; about 120 kB per Triton kernel in .llir, .cubin, .ptx, .source,
# .ttgir, .ttir and .json). 512 MiB is 2.5 times that; a larger folder is not shared (it was 2 GiB,
# and a 1 GiB sparse file, 12 kB on the candidate's disk, became 1 GiB here).
MAX_BYTES = 512 << 20
# All entries together (``cache_eviction.charge``: bytes, plus a block for each file and folder). Past
# it, the least recently used entries are removed (``cache_eviction.evict``). 8 GiB: 16 of the
# heaviest entries measured, thousands of the usual ones (a few Triton kernels: under 1 MB).
MAX_TOTAL_BYTES = 8 << 30
BLOCK = cache_eviction.BLOCK  # what a file or folder is charged beyond its bytes
SUBFOLDERS = ("triton", "inductor")  # TRITON_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR: all that is shared


def prepare(root: Path, scratch: Path, source: str, baseline_mode: str | None) -> tuple[Path, dict[str, str]]:
    """A fresh JIT folder in ``scratch`` holding a copy of the source's shared entry; the folder and
    the environment variables that point Triton and Inductor into it."""
    key = jit_cache_key(source, baseline_mode)
    scratch_fd = trusted_files.open_directory(scratch)
    try:
        name, folder_fd = trusted_files.make_private_folder(scratch_fd, "jit-")
    finally:
        os.close(scratch_fd)
    try:
        entry = _open_entry(root, key)
        if entry is not None:
            try:
                with contextlib.suppress(OSError):
                    os.utime(entry)  # used now: the last to go when the cache is full
                _copy_subfolders(entry, folder_fd)
            except (OSError, trusted_files.UntrustedFile):
                pass  # an incomplete copy is only a colder cache
            finally:
                os.close(entry)
    finally:
        os.close(folder_fd)
    folder = scratch / name
    return folder, {
        "TRITON_CACHE_DIR": str(folder / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
    }


def publish(root: Path, folder: Path, source: str, baseline_mode: str | None) -> str | None:
    """Share what a candidate's JIT folder holds for later evaluations of the same source; None when
    published or nothing to do, else why not (too large, a lying entry), in words. Never raises."""
    key = jit_cache_key(source, baseline_mode)
    try:
        root_fd = _open_root(root)
    except (OSError, trusted_files.UntrustedFile) as exc:
        return str(exc)
    try:
        if _exists(root_fd, key):
            return None  # the first correct evaluation of a source publishes; later ones reuse it
        staging, staging_fd = trusted_files.make_private_folder(root_fd, cache_eviction.STAGING)
        try:
            source_fd = trusted_files.open_directory(folder)
            try:
                charge = _copy_subfolders(source_fd, staging_fd)
            finally:
                os.close(source_fd)
            cache_eviction.write_charge(staging_fd, charge)
            os.rename(staging, key, src_dir_fd=root_fd, dst_dir_fd=root_fd)
        except (OSError, trusted_files.UntrustedFile) as exc:
            trusted_files.remove_tree(root / staging)
            return f"the JIT cache was not shared: {exc}"
        finally:
            os.close(staging_fd)
        evict(root, root_fd, keep=key)
        return None
    except (OSError, trusted_files.UntrustedFile) as exc:
        return f"the JIT cache was not shared: {exc}"
    finally:
        os.close(root_fd)


def _copy_subfolders(source_fd: int, target_fd: int) -> int:
    """Copy ``SUBFOLDERS`` (those that are folders) from one JIT folder into another, together within
    ``MAX_FILES`` and ``MAX_BYTES``; their charge (``cache_eviction.charge``). Anything else there is
    left behind."""
    files = size = 0
    for name in SUBFOLDERS:
        try:
            source = trusted_files.open_directory(name, dir_fd=source_fd)
        except trusted_files.UntrustedFile:
            continue  # missing, or a link or a file: nothing Triton or Inductor made
        try:
            os.mkdir(name, 0o700, dir_fd=target_fd)
            target = trusted_files.open_directory(name, dir_fd=target_fd)
            try:
                copied_files, copied = trusted_files.copy_tree(source, target, max_files=MAX_FILES - files,
                                                               max_bytes=MAX_BYTES - size)
            finally:
                os.close(target)
        finally:
            os.close(source)
        files, size = files + copied_files + 1, size + copied
    return cache_eviction.charge(files, size)


def evict(root: Path, root_fd: int, *, keep: str | None = None) -> None:
    """Remove the least recently used entries of ``root`` until the rest are within ``MAX_TOTAL_BYTES``
    (never ``keep``), what a crash left of removals, and publications abandoned a day ago
    (``cache_eviction.evict``). Never raises."""
    cache_eviction.evict(root, root_fd, max_total_bytes=MAX_TOTAL_BYTES, is_entry=_is_key, keep=keep)


def _is_key(name: str) -> bool:
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


def _open_root(root: Path) -> int:
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return trusted_files.open_directory(root)


def _exists(root_fd: int, key: str) -> bool:
    try:
        os.stat(key, dir_fd=root_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _open_entry(root: Path, key: str) -> int | None:
    """The source's shared entry, or None; an entry that is not a folder is removed, not followed."""
    try:
        root_fd = _open_root(root)
    except (OSError, trusted_files.UntrustedFile):
        return None
    try:
        return trusted_files.open_directory(key, dir_fd=root_fd)
    except trusted_files.UntrustedFile:
        if _exists(root_fd, key):  # not a folder this harness made (a file, a link): a cache loses nothing
            trusted_files.discard(root / key)
        return None
    finally:
        os.close(root_fd)
