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

Anything in ``ROOT`` that is not a folder (left by an older version, or by hand) is removed, never
followed. Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

from pike_harness.worker.supervise import trusted_files
from pike_harness.worker.supervise.buildcache import jit_cache_key

MAX_FILES = 20_000
MAX_BYTES = 2 << 30
SUBFOLDERS = ("triton", "inductor")


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
                trusted_files.copy_tree(entry, folder_fd, max_files=MAX_FILES, max_bytes=MAX_BYTES)
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
        staging, staging_fd = trusted_files.make_private_folder(root_fd, ".staging-")
        try:
            source_fd = trusted_files.open_directory(folder)
            try:
                trusted_files.copy_tree(source_fd, staging_fd, max_files=MAX_FILES, max_bytes=MAX_BYTES)
            finally:
                os.close(source_fd)
            os.rename(staging, key, src_dir_fd=root_fd, dst_dir_fd=root_fd)
            return None
        except (OSError, trusted_files.UntrustedFile) as exc:
            trusted_files.remove_tree(root / staging)
            return f"the JIT cache was not shared: {exc}"
        finally:
            os.close(staging_fd)
    except (OSError, trusted_files.UntrustedFile) as exc:
        return f"the JIT cache was not shared: {exc}"
    finally:
        os.close(root_fd)


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
