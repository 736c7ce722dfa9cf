"""Which compiler and linker flags a candidate may hand to a ``load_inline`` build: an allow-list of shapes.

torch writes ``extra_cflags``, ``extra_cuda_cflags``, ``extra_ldflags`` and ``extra_include_paths``
into ``build.ninja`` unquoted, and ninja runs every rule through ``/bin/sh``. A flag such as
``-O3;cat ~/.netrc`` or ``-DX=$(id)`` would therefore run as shell in the builder, and flags such as
``-o /elsewhere``, ``-Xlinker``, ``@file`` or ``-fplugin=`` make the compiler write or load files of
the candidate's choosing. So before a build is served, every flag must match one of the shapes
below, made of a character set with no shell meaning; anything else is the candidate's
``rejected/build_flags`` verdict naming the flag, and nothing is built. Paths (``-I``, ``-L``,
``-Wl,-rpath,``, a library file) must be absolute, plainly spelled (no empty, ``.`` or ``..`` part) and
lie inside the folders a build may use: the Python environment, the CUDA toolkit and the system's own
folders, both as written and where their links lead. The candidate names these paths, so the check never
hands one to ``os.path.realpath``: ``/proc/self/root`` followed by the candidate's ``$HOME`` names its
scratch folder under another spelling, and ``realpath`` on a maze of links planted there cost 800,000
``lstat`` calls a path (12.5 s) on the supervisor's thread, with no deadline and no policing, the device
lock held (an audit, 2026-12-01). A path under ``/proc``, ``/sys`` or ``/dev``, in the scratch folder,
or not spelled inside an allowed folder is refused from its text alone; any other is walked one part at a
time with ``os.lstat`` on prefixes that hold no link (so the kernel follows none either): at most
``MAX_LINKS`` links read and ``MAX_PATH_PARTS`` parts looked at for one path, at most ``MAX_SPEC_CALLS``
calls for all the paths of one call, never a step into ``/proc``, ``/sys``, ``/dev`` or the scratch
folder; past a bound the path is refused. ``realpath`` on a chain of 1,200 links had also raised ``RecursionError``,
which failed the task as the harness's error. Standard library only.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from typing import Any

FLAG_ARGS = ("extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags")
PATH_ARGS = ("extra_include_paths",)
# Every character of every flag: none of them means anything to a POSIX shell or to ninja.
SAFE_CHARS = re.compile(r"^[A-Za-z0-9_=.,:+/%-]+$")
MAX_FLAG_CHARS = 300
MAX_FLAGS = 200
# Shapes of one flag (the whole flag must match one). Paths are checked separately (``_PATH_FLAGS``).
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
SHAPES = tuple(
    re.compile(pattern)
    for pattern in (
        r"-O[0-3sgz]?|-Ofast",  # optimisation level
        r"-v|--verbose|-g[0-3]?|-G|-lineinfo|-w|-pthread|-fopenmp|-fPIC|-shared|-DNDEBUG",
        rf"-D{_NAME}(=[A-Za-z0-9_.,:+%/-]*)?|-U{_NAME}",  # macros, plain values only
        r"-std=[a-z0-9+]+|--std=[a-z0-9+]+",
        r"-W(no-)?[a-z0-9][a-z0-9=+-]*",  # warnings (-Wl, is a path flag)
        r"-f(no-)?(?!plugin|profile|dump|debug-prefix|file-prefix|macro-prefix|record)[a-z0-9][a-z0-9-]*"
        r"(=[A-Za-z0-9_.+-]+)?",
        r"-m(no-)?[a-z0-9][a-z0-9.=-]*",  # -march=native, -mavx2, -mfma
        r"-?-use_fast_math|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|"
        r"-res-usage|--resource-usage|-restrict|--restrict|-Xptxas=[A-Za-z0-9_=.,+-]+|"
        r"--ptxas-options=[A-Za-z0-9_=.,+-]+|-Xcompiler=[A-Za-z0-9_=.,+-]+|-Xnvlink=[A-Za-z0-9_=.,+-]+",
        r"-?-(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
        r"-?-maxrregcount=[0-9]+|-?-threads=[0-9]+|-?-diag-suppress=[0-9,]+|--default-stream=(per-thread|legacy|null)",
        r"-arch=(sm|compute)_[0-9]+[af]?|--gpu-architecture=(sm|compute)_[0-9]+[af]?|-code=[a-z0-9_,]+|"
        r"-gencode=arch=compute_[0-9]+[af]?,code=[a-z0-9_\[\],]+|--generate-code=arch=compute_[0-9]+[af]?,code=[a-z0-9_,]+",
        r"arch=compute_[0-9]+[af]?,code=[a-z0-9_,]+",  # the value after a separate -gencode
        r"-l[A-Za-z0-9_.+-]+",  # a library by name: -lcublas
    )
)
# Options whose value is the next list item (``["-Xptxas", "-v"]``); the value is checked as a flag.
TAKES_VALUE = frozenset(
    {"-Xptxas", "-Xcompiler", "-Xnvlink", "-gencode", "--generate-code", "--default-stream"}
)
# Flags that name a path: the path must be absolute, plain and inside an allowed root.
_PATH_FLAGS = (
    re.compile(r"-(I|isystem|L)(?P<path>/.*)"),
    re.compile(r"-Wl,-rpath,(?P<path>/.*)"),
    re.compile(r"(?P<path>/.*\.(so|a)(\.[0-9]+)*)"),
)


PSEUDO_ROOTS = ("/proc", "/sys", "/dev")  # /proc/self/root, /proc/PID/cwd, /dev/fd/N: any folder, renamed
MAX_LINKS = 16  # links read while walking one path (honest ones: /usr/local/cuda -> /etc/alternatives/cuda -> ...)
MAX_PATH_PARTS = 128  # parts of one path looked at, its links' included
MAX_SPEC_CALLS = 4096  # lstat and readlink calls for all the paths of one load_inline call
_MAX_PENDING_PARTS = 512  # parts of a path and of the links read into it, still to walk

OUTSIDE = "is outside the Python environment, the CUDA toolkit and the system folders"
SPELLING = f"is not a plain absolute path (an empty, '.' or '..' part, or over {MAX_FLAG_CHARS} characters)"
PSEUDO = ("goes through /proc, /sys or /dev, where a name such as /proc/self/root leads to any folder, the "
          "candidate's own among them")
OWN = "is in the candidate's own folder, which it writes while it runs (a link there can lead anywhere)"
TOO_DEEP = (f"leads through more links or parts than the check walks ({MAX_LINKS} links, {MAX_PATH_PARTS} parts "
            "a path): not followed further")
SPEC_SPENT = (f"is one path too many: the paths of one call may take at most {MAX_SPEC_CALLS} look-ups to check, "
              "and no more are made")


class _Budget:
    """File-system calls left to one ``spec_problem`` (or one root's resolution)."""

    def __init__(self, calls: int) -> None:
        self.left = calls

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


def allowed_roots(scratch: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The folders a build's paths may point into, as named and as resolved: Python's, the CUDA toolkit's,
    the system's. Never the candidate's ``scratch`` (see ``forbidden_roots``)."""
    source = os.environ if environ is None else environ
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/opt", "/lib", "/lib64"}
    roots.update(
        source[name] for name in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CONDA_PREFIX") if source.get(name)
    )
    roots.update(entry for entry in sys.path if entry.endswith("-packages"))
    return sorted({form for root in filter(None, roots) for form in _forms(root)})


def forbidden_roots(scratch: str | None) -> list[str]:
    """The candidate's scratch folder, as named and as resolved: it writes there while it runs, so the check
    never steps into it, and a path there may not be passed to a build (a link there can point anywhere)."""
    if not scratch:
        return []
    return sorted(_forms(scratch))


def _forms(folder: str) -> set[str]:
    """A folder of the harness's own (not the candidate's) as named and, where the bounded walk gets there,
    as resolved."""
    named = os.path.normpath(os.path.abspath(folder))
    resolved, _ = _walk(named, _Budget(MAX_PATH_PARTS), avoid=())
    return {named, *filter(None, [resolved])}


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


_MISSING = object()  # a part ``os.lstat`` could not look at
_UNREADABLE = object()  # a link ``os.readlink`` could not read


def _walk(path: str, budget: _Budget, avoid: Iterable[str],
          seen: dict[str, Any] | None = None) -> tuple[str | None, str | None]:
    """``path`` (absolute, plain) with its links resolved, or None and why: one part at a time, ``os.lstat``
    on a prefix already free of links (so the kernel follows none), ``os.readlink`` where a part is a link.
    At most ``MAX_LINKS`` links and ``MAX_PATH_PARTS`` parts looked at for one path, and no more calls than
    ``budget`` has left; a prefix under ``avoid`` is never looked at. ``seen`` keeps what each prefix was
    (a folder or file: None; a link: its target; absent: ``_MISSING``) for the paths of one call. A part
    that cannot be looked at (absent) ends the walk: the rest is taken as written, as ``realpath`` does."""
    avoid = list(avoid)
    seen = {} if seen is None else seen
    pending = [part for part in reversed(path.split("/")) if part]
    done, links, parts = "/", 0, 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":  # only from a link's target: the prefix holds no link, so its parent is its text's
            done = os.path.dirname(done)
            continue
        step = os.path.join(done, part)
        if _under(step, avoid):
            return None, PSEUDO if _under(step, PSEUDO_ROOTS) else OWN
        parts += 1
        if parts > MAX_PATH_PARTS:
            return None, TOO_DEEP
        if step not in seen:
            if not budget.spend():
                return None, SPEC_SPENT
            seen[step] = _look(step, budget)
        found = seen[step]
        if found is _MISSING:
            rest = [name for name in reversed(pending) if name != "."]
            return (None, OUTSIDE) if ".." in rest else (os.path.join(step, *rest), None)
        if found is None:
            done = step
            continue
        if found is budget:
            return None, SPEC_SPENT
        if found is _UNREADABLE:
            return None, OUTSIDE
        links += 1
        if links > MAX_LINKS:
            return None, TOO_DEEP
        if found.startswith("/"):
            done = "/"
        pending.extend(name for name in reversed(found.split("/")) if name)
        if len(pending) > _MAX_PENDING_PARTS:
            return None, TOO_DEEP
    return done, None


def _look(step: str, budget: _Budget) -> Any:
    """What ``step`` is, not following it: None (not a link), a link's target, ``_MISSING``,
    ``_UNREADABLE``, or ``budget`` where reading the link would pass it."""
    try:
        if not stat.S_ISLNK(os.lstat(step).st_mode):
            return None
    except (OSError, ValueError):
        return _MISSING
    if not budget.spend():
        return budget
    try:
        return os.readlink(step)
    except (OSError, ValueError):
        return _UNREADABLE


def _plain(path: str) -> str | None:
    """``path`` without a trailing slash where it is absolute and plainly spelled, else None."""
    if len(path) > MAX_FLAG_CHARS or not path.startswith("/"):
        return None
    body = path[:-1] if len(path) > 1 and path.endswith("/") else path
    if body != "/" and any(part in ("", ".", "..") for part in body[1:].split("/")):
        return None
    return body


class _PathCheck:
    """Judges the paths of one call: its allowed and forbidden folders, one budget of file-system calls,
    and each distinct path's answer kept (1,000 copies of a path are walked once)."""

    def __init__(self, roots: Iterable[str], forbidden: Iterable[str] = (), calls: int = MAX_SPEC_CALLS) -> None:
        self.roots, self.forbidden = list(roots), list(forbidden)
        self.budget = _Budget(calls)
        self.answers: dict[str, str | None] = {}
        self.seen: dict[str, Any] = {}

    def problem(self, path: str) -> str | None:
        """Why ``path`` may not be passed to a build (words for the verdict), or None."""
        if path not in self.answers:
            self.answers[path] = self._problem(path)
        return self.answers[path]

    def _problem(self, path: str) -> str | None:
        plain = _plain(path)
        if plain is None:
            return SPELLING
        if _under(plain, PSEUDO_ROOTS):
            return PSEUDO
        if _under(plain, self.forbidden):
            return OWN
        if not _under(plain, self.roots):  # judged from its text: nothing outside is ever looked at
            return OUTSIDE
        resolved, why = _walk(plain, self.budget, (*PSEUDO_ROOTS, *self.forbidden), self.seen)
        if resolved is None:
            return why
        if _under(resolved, self.forbidden):
            return OWN
        return None if _under(resolved, self.roots) else OUTSIDE


def flag_problem(flag: Any, roots: Iterable[str], forbidden: Iterable[str] = (),
                 paths: _PathCheck | None = None) -> str | None:
    """Why one flag may not be passed to a build (its own words for the verdict), or None. ``paths`` judges
    its path, if it names one (a fresh ``_PathCheck`` of ``roots`` and ``forbidden`` where none is given)."""
    if not isinstance(flag, str):  # by its type: its text could be huge, or nested past repr's recursion limit
        return f"a {type(flag).__name__} is not a string"
    shown = flag if len(flag) <= 80 else flag[:77] + "..."
    if not flag or len(flag) > MAX_FLAG_CHARS or not SAFE_CHARS.match(flag):
        return f"{shown!r} is empty, too long or holds a character with shell meaning (space, quote, $, ;, |, &, ...)"
    for pattern in _PATH_FLAGS:
        matched = pattern.fullmatch(flag)
        if matched:
            why = (paths or _PathCheck(roots, forbidden)).problem(matched.group("path"))
            return f"{shown!r} names a path that {why}" if why else None
    if any(shape.fullmatch(flag) for shape in SHAPES):
        return None
    return f"{shown!r} is not an allowed compiler or linker flag shape"


def _option_value_problem(value: Any, paths: _PathCheck) -> str | None:
    """The value after ``-Xptxas``/``-gencode``/...: one allowed flag, or allowed flags joined by commas."""
    if isinstance(value, str) and any(shape.fullmatch(value) for shape in SHAPES):
        return None
    if isinstance(value, str) and SAFE_CHARS.match(value):
        problems = (flag_problem(part, paths.roots, paths.forbidden, paths) for part in value.split(","))
        return next((problem for problem in problems if problem), None)
    return flag_problem(value, paths.roots, paths.forbidden, paths)


def _takes_value(value: Any) -> bool:
    """Whether ``value`` is a flag that takes the next one as its value (a list there is no flag: unhashable)."""
    return isinstance(value, str) and value in TAKES_VALUE


def spec_problem(spec: Any, scratch: str | None = None) -> str | None:
    """The first flag or include path of a ``load_inline`` call that may not be built, with why; None if all pass.
    Its paths share one ``_PathCheck``: at most ``MAX_SPEC_CALLS`` file-system calls for the whole call."""
    if not isinstance(spec, dict):
        return None
    paths = _PathCheck(allowed_roots(scratch), forbidden_roots(scratch))
    for arg in (*FLAG_ARGS, *PATH_ARGS):
        values = spec.get(arg)
        if values is None:
            continue
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list) or len(values) > MAX_FLAGS:
            return f"{arg}: not a list of at most {MAX_FLAGS} strings"
        expects_value = False
        for value in values:
            if arg in PATH_ARGS:
                if isinstance(value, str) and SAFE_CHARS.match(value) and value.startswith("/"):
                    why = paths.problem(value)
                    problem = f"{value[:80]!r} {why}" if why else None
                else:
                    shown = repr(value[:80]) if isinstance(value, str) else f"a {type(value).__name__}"
                    problem = (f"{shown} is not a plain absolute path inside the allowed folders (the "
                               "candidate's own folder is not one)")
            elif expects_value:
                problem = _option_value_problem(value, paths)
            else:
                problem = None if _takes_value(value) else flag_problem(value, paths.roots, paths.forbidden, paths)
            if problem:
                return f"{arg}: {problem}"
            expects_value = _takes_value(value) and not expects_value
        if expects_value:
            return f"{arg}: {values[-1]!r} needs a value after it"
    return None
