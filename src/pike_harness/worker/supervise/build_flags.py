"""Which compiler and linker flags a candidate may hand to a ``load_inline`` build: an allow-list of shapes.

torch writes ``extra_cflags``, ``extra_cuda_cflags``, ``extra_ldflags`` and ``extra_include_paths``
into ``build.ninja`` unquoted, and ninja runs every rule through ``/bin/sh``. A flag such as
``-O3;cat ~/.netrc`` or ``-DX=$(id)`` would therefore run as shell in the builder, and flags such as
``-o /elsewhere``, ``-Xlinker``, ``@file`` or ``-fplugin=`` make the compiler write or load files of
the candidate's choosing. So before a build is served, every flag must match one of the shapes
below, made of a character set with no shell meaning; anything else is the candidate's
``rejected/build_flags`` verdict naming the flag, and nothing is built. Paths (``-I``, ``-L``,
``-Wl,-rpath,``, a library file) must be absolute and lie inside the folders a build may use: the
Python environment, the CUDA toolkit and the system's own folders. The candidate's scratch folder is
not one: it writes there while it runs, so a path there is never resolved (``realpath`` on a chain of
1,200 links raised ``RecursionError``, which failed the task as the harness's error) and is refused,
as is any path whose resolution fails. Standard library only.
"""

from __future__ import annotations

import os
import re
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


def allowed_roots(scratch: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The folders a build's paths may point into: Python's, the CUDA toolkit's, the system's. Never the
    candidate's ``scratch`` (see ``forbidden_roots``)."""
    source = os.environ if environ is None else environ
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/opt", "/lib", "/lib64"}
    roots.update(
        source[name] for name in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CONDA_PREFIX") if source.get(name)
    )
    roots.update(entry for entry in sys.path if entry.endswith("-packages"))
    return sorted({real for real in map(_resolved, filter(None, roots)) if real is not None})


def forbidden_roots(scratch: str | None) -> list[str]:
    """The candidate's scratch folder, as named and as resolved: it writes there while it runs, so a path
    in it is never resolved (a chain of 1,200 links made ``realpath`` raise ``RecursionError``) and may
    not be passed to a build (a link there can point anywhere)."""
    if not scratch:
        return []
    return sorted({os.path.abspath(scratch), *filter(None, [_resolved(scratch)])})


def _resolved(path: str) -> str | None:
    """``os.path.realpath``, or None where resolving fails (a loop, a chain past the recursion limit)."""
    try:
        return os.path.realpath(path)
    except (RecursionError, OSError, ValueError):
        return None


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _inside(path: str, roots: Iterable[str], forbidden: Iterable[str] = ()) -> bool:
    """Whether ``path`` lies inside ``roots`` once resolved, and neither names nor resolves into a
    ``forbidden`` folder; a path in one is never resolved, and one that cannot be resolved is outside."""
    if "/../" in path + "/" or "/./" in path + "/" or "//" in path:
        return False
    forbidden = list(forbidden)
    if _under(path, forbidden):
        return False
    real = _resolved(path)
    return real is not None and not _under(real, forbidden) and _under(real, roots)


def flag_problem(flag: Any, roots: Iterable[str], forbidden: Iterable[str] = ()) -> str | None:
    """Why one flag may not be passed to a build (its own words for the verdict), or None."""
    if not isinstance(flag, str):  # by its type: its text could be huge, or nested past repr's recursion limit
        return f"a {type(flag).__name__} is not a string"
    shown = flag if len(flag) <= 80 else flag[:77] + "..."
    if not flag or len(flag) > MAX_FLAG_CHARS or not SAFE_CHARS.match(flag):
        return f"{shown!r} is empty, too long or holds a character with shell meaning (space, quote, $, ;, |, &, ...)"
    for pattern in _PATH_FLAGS:
        matched = pattern.fullmatch(flag)
        if matched:
            if not _inside(matched.group("path"), roots, forbidden):
                return (f"{shown!r} names a path outside the Python environment, the CUDA toolkit and the system "
                        "folders (or in the candidate's own folder)")
            return None
    if any(shape.fullmatch(flag) for shape in SHAPES):
        return None
    return f"{shown!r} is not an allowed compiler or linker flag shape"


def _option_value_problem(value: Any, roots: list[str], forbidden: list[str]) -> str | None:
    """The value after ``-Xptxas``/``-gencode``/...: one allowed flag, or allowed flags joined by commas."""
    if isinstance(value, str) and any(shape.fullmatch(value) for shape in SHAPES):
        return None
    if isinstance(value, str) and SAFE_CHARS.match(value):
        problems = [flag_problem(part, roots, forbidden) for part in value.split(",")]
        return next((problem for problem in problems if problem), None)
    return flag_problem(value, roots, forbidden)


def _takes_value(value: Any) -> bool:
    """Whether ``value`` is a flag that takes the next one as its value (a list there is no flag: unhashable)."""
    return isinstance(value, str) and value in TAKES_VALUE


def spec_problem(spec: Any, scratch: str | None = None) -> str | None:
    """The first flag or include path of a ``load_inline`` call that may not be built, with why; None if all pass."""
    if not isinstance(spec, dict):
        return None
    roots, forbidden = allowed_roots(scratch), forbidden_roots(scratch)
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
                ok = (
                    isinstance(value, str)
                    and bool(SAFE_CHARS.match(value))
                    and value.startswith("/")
                    and _inside(value, roots, forbidden)
                )
                shown = repr(value[:80]) if isinstance(value, str) else f"a {type(value).__name__}"
                problem = None if ok else (f"{shown} is not a plain absolute path inside the allowed folders (the "
                                           "candidate's own folder is not one)")
            elif expects_value:
                problem = _option_value_problem(value, roots, forbidden)
            else:
                problem = None if _takes_value(value) else flag_problem(value, roots, forbidden)
            if problem:
                return f"{arg}: {problem}"
            expects_value = _takes_value(value) and not expects_value
        if expects_value:
            return f"{arg}: {values[-1]!r} needs a value after it"
    return None
