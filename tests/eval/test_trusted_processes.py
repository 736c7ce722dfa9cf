"""Issue 26, processes and visibility: hostile candidates (corpus_trusted/) that attack from inside
their own sandbox what the trusted side does around it. Each test checks the side effect outside the
sandbox (no process left, the listener silent, the planted file and the harness's key absent from
every record and prompt, the shell never run), not only the verdict, and an honest candidate
evaluated together with them keeps its verdict."""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import stand_ins
from corpus_cases import processes_with

from pike_harness.kit.failure_reports import failure_report
from pike_harness.worker import redaction
from pike_harness.worker.inside.limits import OPEN_FILES
from pike_harness.worker.records import EvalResult
from pike_harness.worker.supervise import build_flags, isolation, seccomp

TRUSTED = Path(__file__).resolve().parent / "corpus_trusted"
PROBES = (b"pikeh-trusted-setsid-probe", b"pikeh-trusted-daemon-probe")
SHELL_RAN = "PIKEH_SHELL_RAN_42"  # only a shell evaluating $((6*7)) writes this


@pytest.mark.parametrize("name", sorted(p.stem for p in TRUSTED.glob("*.py")))
def test_each_hostile_candidate_gets_its_own_verdict(trusted_results, name):
    case, result = trusted_results[name]
    got = f"{result.category}/{result.check}" if case.check else result.category
    want = f"{case.category}/{case.check}" if case.check else case.category
    assert got == want, (
        f"{name}: {result.category}/{result.check}: {result.reason}\n{result.stderr_tail[-1500:]}"
    )
    assert result.isolation == "bwrap"


def test_an_honest_neighbour_keeps_its_verdict_and_timing(trusted_results):
    _, result = trusted_results["ok_plain"]
    assert result.category == "correct", result.reason
    assert result.runtime_ms is not None and result.runtime_ms > 0


def test_no_process_of_a_hostile_candidate_is_left(trusted_results):
    """setsid() and double-forked children with an empty environment died with their sandbox."""
    deadline = time.monotonic() + 10  # the kill is synchronous; this only absorbs /proc's lag
    while any(processes_with(probe) for probe in PROBES) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [probe for probe in PROBES if processes_with(probe)] == []


def test_resource_caps_held(trusted_results):
    fds = trusted_results["fd_exhaustion"][1].reason or ""
    assert "pikeh-fd-count=" in fds, fds
    assert int(fds.split("pikeh-fd-count=")[1].split()[0]) < OPEN_FILES
    shm = trusted_results["shm_fill"][1].reason or ""
    assert "pikeh-shm-mb=" in shm, shm
    assert int(shm.split("pikeh-shm-mb=")[1].split()[0]) <= isolation.SHM_MB
    assert int(shm.split("pikeh-tmp-mb=")[1].split()[0]) <= isolation.TMP_MB


def test_no_secret_reaches_a_record_or_a_prompt(trusted_results, home_token, secret_value):
    forms = [home_token, secret_value, base64.b64encode(secret_value.encode()).decode()[:20]]
    for name, (_, result) in trusted_results.items():
        text = result.to_json() + failure_report(result)
        assert not [form for form in forms if form in text], name
    # the candidate did print what it could read: its own scrubbed environment
    assert "pikeh-candidate" in trusted_results["secrets_echo"][1].stdout_tail


def test_a_shell_laden_flag_never_reaches_a_shell(trusted_results):
    for name in ("flags_shell_cflags", "flags_write_outside"):
        result = trusted_results[name][1]
        assert SHELL_RAN not in result.to_json(), name
        assert result.check == "build_flags" and "load_inline extra_" in (result.reason or ""), result.reason
    assert "-O3;echo" in (trusted_results["flags_shell_cflags"][1].reason or "")
    assert not Path("/tmp/pikeh-flags-out.so").exists()


# -- the sandbox itself, without an evaluator -------------------------------------------------------
def _sandboxed_python(
    code: str, *, writable: list[Path] = (), home: str | None = None
) -> subprocess.CompletedProcess:
    sandbox = isolation.choose(home=home)
    with seccomp.program_fd() as filter_fd:
        argv = sandbox.wrap(
            [sys.executable, "-c", code], cwd=Path("/"), writable=writable, seccomp_fd=filter_fd
        )
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            pass_fds=() if filter_fd is None else (filter_fd,),
        )


def test_a_named_unix_socket_outside_accepts_no_connection(tmp_path, monkeypatch):
    """Agent and daemon sockets live in $HOME, /run or the host's /tmp: none of them is visible inside
    (the filter cannot refuse connect() by path; the CUDA driver needs unix sockets of its own)."""
    home = Path(os.path.realpath(tmp_path)) / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    path = home / ".ssh" / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    accepted: list[bytes] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                accepted.append(conn.recv(100) or b"connected")

    threading.Thread(target=accept, daemon=True).start()
    try:
        done = _sandboxed_python(
            "import socket\n"
            f"for path in ({str(path)!r}, '/run/docker.sock', '/var/run/docker.sock'):\n"
            "    try:\n"
            "        s = socket.socket(socket.AF_UNIX)\n"
            "        s.connect(path); s.sendall(b'stolen'); print('connected', path)\n"
            "    except OSError as exc:\n"
            "        print('refused', exc.errno)\n"
            "a, b = socket.socketpair(); a.sendall(b'x'); print('pair', b.recv(1))\n",
        )
    finally:
        server.close()
    assert "connected" not in done.stdout, done.stdout + done.stderr
    assert done.stdout.count("refused 2") == 3, done.stdout + done.stderr  # ENOENT: not there at all
    assert "pair b'x'" in done.stdout  # unnamed pairs work (asyncio, multiprocessing need them)
    assert accepted == []


def test_home_is_invisible_except_python_folders(tmp_path, monkeypatch):
    """A fake $HOME with credentials and a Python folder on sys.path: only the Python folder shows."""
    base = Path(os.path.realpath(tmp_path))
    home = base / "home"
    site = home / ".local" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "pikeh_visible_module.py").write_text("VALUE = 'python-folder-visible'\n")
    (home / ".pypirc").write_text("[pypi]\npassword = s3cret-pypirc\n")
    (home / ".netrc").write_text("machine example.com password s3cret-netrc\n")
    (home / "registry-token").write_text("s3cret-token\n")
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text("oauth_token: s3cret-gh\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    done = _sandboxed_python(
        "import glob, os\n"
        f"print(open({str(site / 'pikeh_visible_module.py')!r}).read())\n"
        f"for path in glob.glob({str(home)!r} + '/**', recursive=True) + glob.glob({str(home)!r} + '/.*/**', "
        "recursive=True):\n"
        "    try:\n"
        "        print(open(path).read())\n"
        "    except OSError:\n"
        "        pass\n"
        "for folder in ('/run', '/var/run', '/home', '/var', '/mnt'):\n"
        "    print(folder, os.path.exists(folder))\n",
        home=str(home),
    )
    assert "python-folder-visible" in done.stdout, done.stderr
    assert "s3cret" not in done.stdout
    for folder in ("/run", "/var/run", "/home", "/var", "/mnt"):
        assert f"{folder} False" in done.stdout


# -- build flags --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arg", "flags"),
    [
        ("extra_cflags", ["-O3;id"]),
        ("extra_cflags", ["-DX=$(id)"]),
        ("extra_cflags", ["-DX=`id`"]),
        ("extra_cflags", ["-O3 -o /tmp/x"]),
        ("extra_cflags", ["-DX='a'"]),
        ("extra_cflags", ["-O3\nid"]),
        ("extra_cflags", ["@/etc/passwd"]),
        ("extra_cflags", ["-o/tmp/x.o"]),
        ("extra_cflags", ["-fplugin=/tmp/evil.so"]),
        ("extra_cflags", ["-B/tmp/evil"]),
        ("extra_cflags", ["-I/root/.ssh"]),
        ("extra_cflags", ["-I/usr/include/../../root"]),
        ("extra_cuda_cflags", ["-ccbin=/tmp/evil"]),
        ("extra_cuda_cflags", ["-Xcompiler", "-o/tmp/x"]),
        ("extra_cuda_cflags", ["-Xptxas"]),
        ("extra_ldflags", ["-lm|id"]),
        ("extra_ldflags", ["-Xlinker", "-o/tmp/x.so"]),
        ("extra_ldflags", ["-Wl,-o,/tmp/x.so"]),
        ("extra_ldflags", ["-L/home/someone/lib"]),
        ("extra_ldflags", ["-lm&&id"]),
        ("extra_include_paths", ["/usr/include;id"]),
        ("extra_include_paths", ["relative/include"]),
        ("extra_include_paths", ["/etc/../root"]),
        ("extra_include_paths", ["/scratch/eval-1/include"]),  # the candidate's own folder: links to anywhere
        ("extra_ldflags", ["-L/scratch/eval-1/lib"]),
        ("extra_ldflags", ["/scratch/eval-1/build/libx.so"]),
        ("extra_cuda_cflags", ["-Xcompiler", "-I/scratch/eval-1/include"]),
        ("extra_include_paths", ["/proc/self/root/scratch/eval-1/include"]),  # the scratch folder renamed
        ("extra_cflags", ["-I/proc/self/root/usr/include"]),
        ("extra_ldflags", ["-L/proc/1/cwd/lib"]),
        ("extra_ldflags", ["/dev/fd/3/libx.so"]),
        ("extra_include_paths", ["/usr//include"]),
        ("extra_include_paths", ["/usr/include/./x"]),
        ("extra_include_paths", ["/usr/" + "x" * 300]),
    ],
)
def test_a_rejected_flag_names_itself(arg, flags):
    problem = build_flags.spec_problem({"name": "x", arg: flags}, "/scratch/eval-1")
    assert problem is not None and problem.startswith(arg), problem


@pytest.mark.parametrize(
    ("arg", "flags"),
    [
        (
            "extra_cflags",
            [
                "-O3",
                "-O2",
                "-g",
                "-std=c++17",
                "-DNDEBUG",
                "-DBLOCK=128",
                "-UNDEBUG",
                "-fopenmp",
                "-ffast-math",
                "-fno-strict-aliasing",
                "-march=native",
                "-mavx2",
                "-Wall",
                "-Wno-sign-compare",
                "-w",
                "-pthread",
                "-fPIC",
            ],
        ),
        (
            "extra_cuda_cflags",
            [
                "-O3",
                "--use_fast_math",
                "-use_fast_math",
                "-arch=sm_90a",
                "--expt-relaxed-constexpr",
                "--extended-lambda",
                "-lineinfo",
                "-gencode=arch=compute_90a,code=sm_90a",
                "-gencode",
                "arch=compute_80,code=sm_80",
                "-Xptxas=-v",
                "-Xptxas",
                "-O3,-v",
                "--maxrregcount=64",
                "--ftz=true",
                "-Xcompiler",
                "-fopenmp",
                "-DTILE=16",
                "-std=c++17",
            ],
        ),
        (
            "extra_ldflags",
            [
                "-lcublas",
                "-lcublasLt",
                "-lcuda",
                "-lm",
                f"-L{sys.prefix}/lib",
                f"-Wl,-rpath,{sys.prefix}/lib",
                "/usr/lib/libfoo.so",
            ],
        ),
        ("extra_include_paths", ["/usr/include", sys.prefix]),
    ],
)
def test_ordinary_flags_pass(arg, flags, monkeypatch):
    monkeypatch.setattr(os.path, "realpath", lambda path: path)  # /scratch does not exist here
    assert build_flags.spec_problem({"name": "x", arg: flags}, "/scratch/eval-1") is None


def _link_chain(folder: Path, length: int, target: str) -> Path:
    """``folder/l0`` -> ``l1`` -> ... -> ``target``: resolving it recurses once per link."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"l{length - 1}").symlink_to(target)
    for index in range(length - 2, -1, -1):
        (folder / f"l{index}").symlink_to(f"l{index + 1}")
    return folder / "l0"


@pytest.mark.parametrize("form", ["extra_include_paths", "-I", "-L", "-Wl,-rpath,", ".so"])
def test_a_path_in_the_scratch_folder_is_refused_without_being_resolved(tmp_path, monkeypatch, form):
    """A chain of 1,200 links in the scratch folder made ``os.path.realpath`` raise RecursionError while
    the flags were checked: the task failed as the harness's error, and again on every resume. A path
    in the candidate's folder is refused (``rejected/build_flags``) and never resolved."""
    scratch = tmp_path / "scratch"
    head = _link_chain(scratch / "chain", 1200, "/usr/include")
    path = f"{head}/libx.so" if form == ".so" else str(head)
    arg = "extra_include_paths" if form == "extra_include_paths" else "extra_ldflags"
    flag = path if form in ("extra_include_paths", ".so") else f"{form}{path}"
    resolved: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda name, **kwargs: resolved.append(os.fspath(name)) or
                        real(name, **kwargs))
    problem = build_flags.spec_problem({"name": "x", arg: [flag]}, str(scratch))
    assert problem is not None and problem.startswith(arg), problem
    assert [name for name in resolved if name.startswith(str(scratch) + "/")] == [], "nothing in it was resolved"


def test_a_path_whose_resolution_fails_is_refused_not_raised(tmp_path, monkeypatch):
    """In an allowed folder the candidate may write (the docker evaluator without bubblewrap can let it
    write the Python environment), the same chain: resolving raises, and the path is refused."""
    toolkit = tmp_path / "cuda"
    head = _link_chain(toolkit / "include", 1200, "/usr/include")
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    with pytest.raises(RecursionError):
        os.path.realpath(head)
    problem = build_flags.spec_problem({"name": "x", "extra_include_paths": [str(head)]}, str(tmp_path / "scratch"))
    assert problem is not None and problem.startswith("extra_include_paths"), problem
    assert build_flags.spec_problem({"name": "x", "extra_include_paths": [str(toolkit)]}, None) is None


class _Lookups:
    """Counts ``os.lstat``/``os.readlink`` calls and the paths they were on; ``os.path.realpath`` fails."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[str] = []
        lstat, readlink = os.lstat, os.readlink

        def counted(real):
            return lambda path, *args, **kwargs: self.paths.append(os.fspath(path)) or real(path, *args, **kwargs)

        def never(path, *args, **kwargs):
            raise AssertionError(f"os.path.realpath({path!r}) called")

        monkeypatch.setattr(os, "lstat", counted(lstat))
        monkeypatch.setattr(os, "readlink", counted(readlink))
        monkeypatch.setattr(os.path, "realpath", never)

    def inside(self, folder: Path | str) -> list[str]:
        return [path for path in self.paths if path.startswith(f"{folder}/")]


def _maze(folder: Path, links: int = 400, parts: int = 2000) -> Path:
    """The audit's maze (2026-12-01): ``a -> .``, ``links`` links ``x<i> -> a/a/.../a`` (``parts`` parts
    each), ``u -> /usr/include`` and ``t -> x0/x1/.../u``: ``realpath`` of ``t`` looks at ``links`` *
    ``parts`` entries (800,000 ``lstat`` calls, 12.5 s, for the audit's) and ends in an allowed folder."""
    folder.mkdir(parents=True)
    (folder / "a").symlink_to(".")
    for index in range(links):
        (folder / f"x{index}").symlink_to("/".join(["a"] * parts))
    (folder / "u").symlink_to("/usr/include")
    (folder / "t").symlink_to("/".join(f"x{index}" for index in range(links)) + "/u")
    return folder / "t"


def _spec_of(path: str) -> dict:
    """1,000 paths, the most one call may pass: 200 in each list, in each form a path takes."""
    return {"name": "x", "extra_cflags": [f"-I{path}"] * 200, "extra_cuda_cflags": [f"-isystem{path}"] * 200,
            "extra_sycl_cflags": [f"-I{path}"] * 200,
            "extra_ldflags": [f"-L{path}", f"-Wl,-rpath,{path}", f"{path}/libx.so"] * 66,
            "extra_include_paths": [path] * 200}


@pytest.mark.parametrize("spelling", ["/proc/self/root{}", "/proc/1/root{}", "/proc/self/cwd/../../..{}", "{}"])
def test_a_maze_in_the_scratch_folder_is_refused_without_a_lookup_in_it(tmp_path, monkeypatch, spelling):
    """The audit's maze in the candidate's scratch folder, named through ``/proc/self/root`` (its folder
    under another spelling): ``realpath`` walked the maze on the supervisor's thread, 12.5 s a path,
    up to 1,000 paths a call, with the device lock held and no policing. The path is refused from its
    spelling: nothing under the scratch folder or ``/proc`` is looked at, and no more calls are made than
    finding the allowed and forbidden folders takes."""
    scratch = tmp_path / "scratch"
    head = _maze(scratch / "trap")
    path = spelling.format(head)
    lookups = _Lookups(monkeypatch)
    build_flags.allowed_roots(str(scratch)), build_flags.forbidden_roots(str(scratch))
    overhead, lookups.paths = len(lookups.paths), []
    problem = build_flags.spec_problem(_spec_of(path), str(scratch))
    assert problem is not None and problem.startswith("extra_cflags"), problem
    assert ("/proc" in problem) if path.startswith("/proc") else "own folder" in problem, problem
    assert lookups.inside(scratch) == [] and lookups.inside("/proc") == [], "nothing in the maze was looked at"
    assert len(lookups.paths) <= overhead, lookups.paths


def test_a_maze_inside_an_allowed_folder_is_walked_a_bounded_number_of_steps(tmp_path, monkeypatch):
    """Where the candidate can write an allowed folder (the docker evaluator without bubblewrap can let it
    write the Python environment) the maze is spelled inside it, and the check walks it: at most
    ``MAX_LINKS`` links and ``MAX_PATH_PARTS`` parts, then the path is refused."""
    toolkit = tmp_path / "cuda"
    head = _maze(toolkit / "trap")
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    lookups = _Lookups(monkeypatch)
    build_flags.allowed_roots(None)
    overhead, lookups.paths = len(lookups.paths), []
    problem = build_flags.spec_problem(_spec_of(str(head)), None)
    assert problem is not None and problem.startswith("extra_cflags"), problem
    assert "more links or parts than the check walks" in problem, problem
    walked = len(lookups.paths) - overhead
    assert 0 < walked <= build_flags.MAX_PATH_PARTS + build_flags.MAX_LINKS, walked


def test_the_paths_of_one_call_share_a_bounded_number_of_lookups(tmp_path, monkeypatch):
    """Distinct paths each a chain of links, all of them ending in an allowed folder: the lookups of one
    call stop at its budget, and the path that would pass it is refused."""
    toolkit = tmp_path / "cuda"
    toolkit.mkdir()
    heads = [_link_chain(toolkit / f"chain{index}", build_flags.MAX_LINKS, str(toolkit)) for index in range(40)]
    roots = build_flags.allowed_roots(None, {"CUDA_HOME": str(toolkit)})
    assert build_flags._PathCheck(roots).problem(str(heads[0])) is None  # one chain passes on its own
    lookups = _Lookups(monkeypatch)
    check = build_flags._PathCheck(roots, calls=200)
    problems = [check.problem(str(head)) for head in heads]
    assert len(lookups.paths) <= 200
    assert problems[0] is None and problems[-1] == build_flags.SPEC_SPENT, problems
    assert check.problem(str(heads[0])) is None  # each distinct path is judged once
    assert len(lookups.paths) <= 200


def test_honest_links_in_the_allowed_folders_are_followed(tmp_path, monkeypatch):
    """A toolkit reached through links (``/usr/local/cuda -> /etc/alternatives/cuda -> cuda-12``), a
    library linked to its versioned name: allowed. A link there leading out of the allowed folders, into
    ``/proc`` or into the scratch folder is refused, without a look into ``/proc`` or that folder."""
    real = tmp_path / "cuda-12.4"
    (real / "include").mkdir(parents=True)
    (real / "lib64").mkdir()
    (real / "lib64" / "libcublas.so.12").write_bytes(b"")
    (real / "lib64" / "libcublas.so").symlink_to("libcublas.so.12")
    (tmp_path / "alternatives").mkdir()
    (tmp_path / "alternatives" / "cuda").symlink_to(real)
    (tmp_path / "cuda").symlink_to(tmp_path / "alternatives" / "cuda")
    scratch = tmp_path / "scratch"
    (scratch / "include").mkdir(parents=True)
    (real / "out").symlink_to(tmp_path / "elsewhere")
    (real / "proc").symlink_to("/proc/self/root/usr")
    (real / "own").symlink_to(scratch / "include")
    (real / "up").symlink_to("../scratch/include")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    lookups = _Lookups(monkeypatch)
    for flags in ([f"-I{tmp_path}/cuda/include", f"-L{tmp_path}/cuda/lib64", f"{tmp_path}/cuda/lib64/libcublas.so"],
                  [f"-I{real}/include", f"-Wl,-rpath,{real}/lib64", f"{real}/lib64/libcublas.so.12"]):
        assert build_flags.spec_problem({"name": "x", "extra_ldflags": flags}, str(scratch)) is None, flags
    for name, words in (("out", "is outside"), ("proc", "/proc"), ("own", "own folder"), ("up", "own folder")):
        problem = build_flags.spec_problem({"name": "x", "extra_include_paths": [f"{real}/{name}"]}, str(scratch))
        assert problem is not None and words in problem, (name, problem)
    assert lookups.inside("/proc") == [] and lookups.inside(scratch) == [], lookups.paths


# -- failure reports -----------------------------------------------------------------------------------
def test_an_error_echoing_an_environment_value_is_masked(monkeypatch):
    key = "sk-live-" + secrets.token_hex(12)
    monkeypatch.setenv("PIKEH_SOME_BACKEND_API_KEY", key)
    encoded = base64.b64encode(key.encode()).decode().rstrip("=")
    result = EvalResult(
        request_id="r",
        task="t",
        category="runtime_error",
        reason=f"failed with {key}",
        stderr_tail=f"token {encoded}\n",
        stdout_tail=f"{key}{key}",
        environment={"build_cache_error": f"x {key}", "nested": [key]},
        flags=[key],
    )
    text = json.dumps(result.to_dict()) + failure_report(result)
    assert key not in text and encoded not in text
    assert redaction.MASK in result.reason
    again = EvalResult.from_dict(json.loads(json.dumps({**result.to_dict(), "reason": key})))
    assert key not in (again.reason or "")  # the host masks a record read from a remote worker too


# -- policing helpers ----------------------------------------------------------------------------------
def test_the_sandbox_is_its_whole_process_tree_whatever_sessions_it_made():
    from pike_harness.worker.supervise.sandbox import ProcessInfo, tree_members

    def info(pid: int, ppid: int, session: int) -> ProcessInfo:
        return ProcessInfo(pid=pid, ppid=ppid, session=session, state="S", rss_bytes=0, start=0)

    table = [
        info(10, 1, 10),
        info(11, 10, 10),  # outer bwrap, the namespace's init
        info(12, 11, 12),
        info(13, 12, 13),  # setsid child and its own setsid child
        info(14, 11, 14),  # a double-forked daemon, re-parented to the namespace's init
        info(20, 1, 20),
        info(21, 20, 20),
    ]  # a neighbour's sandbox
    assert sorted(member.pid for member in tree_members(10, table)) == [10, 11, 12, 13, 14]


def test_the_disk_walk_enters_no_folder_swapped_for_a_link_after_its_parent_was_listed(tmp_path, monkeypatch):
    """The candidate runs while its folders are measured: ``scratch/a`` listed as a folder can be a link
    to a host folder by the time the walk opens it. Each folder is opened relative to its parent's
    descriptor without following a link: what is behind the link is never listed or counted."""
    from pike_harness.worker.supervise import scratch_usage

    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    (outside / "b" / "host-file").write_bytes(os.urandom(1 << 20))
    scratch = tmp_path / "scratch"
    (scratch / "a" / "b").mkdir(parents=True)
    real_list = scratch_usage._list
    swapped = []

    def list_then_swap(level, *args):
        real_list(level, *args)
        if "a" in level.pending and not swapped:  # listed as a folder; swapped before the walk opens it
            (scratch / "a" / "b").rmdir()
            (scratch / "a").rmdir()
            (scratch / "a").symlink_to(outside, target_is_directory=True)
            swapped.append(True)

    monkeypatch.setattr(scratch_usage, "_list", list_then_swap)
    usage = scratch_usage.measure([scratch], max_entries=100)
    assert swapped and usage.entries == 1 and usage.uncounted is None  # "a", as listed; nothing behind it
    assert usage.bytes < (1 << 20)  # the host's megabyte was not counted


def test_the_disk_walk_survives_deep_trees_and_never_follows_links(tmp_path):
    from pike_harness.worker.supervise import scratch_usage

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(os.urandom(1 << 20))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    deep = scratch
    try:
        for _ in range(1200):  # deeper than Python's recursion limit, within PATH_MAX
            deep = deep / "d"
            deep.mkdir()
        (deep / "leaf").write_bytes(b"x" * 4096)
        before = scratch_usage.measure([scratch], max_entries=10_000)
        (scratch / "link").symlink_to(outside, target_is_directory=True)
        usage = scratch_usage.measure([scratch], max_entries=10_000)
        assert usage.entries == 1202 and not usage.over_entries
        assert usage.bytes - before.bytes < (1 << 20)  # the linked megabyte was not counted
        assert scratch_usage.measure([scratch], max_entries=100).over_entries
    finally:  # bottom up: pytest's own clean-up of tmp_path recurses and would fail on this tree
        (deep / "leaf").unlink(missing_ok=True)
        while deep != scratch:
            if deep.exists():
                deep.rmdir()
            deep = deep.parent


# What the walk is given to measure is made by a helper process that runs as a user the permission bits
# bind: this one without its capabilities when it is root (as CI is), as the candidate is never root.
_AS_OWNER = """
import ctypes, json, os, sys
if os.geteuid() == 0:  # keep the uid (and so the ownership) but drop CAP_DAC_OVERRIDE and the rest
    libc = ctypes.CDLL(None, use_errno=True)
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]
    header, data = Header(0x20080522, 0), (Data * 2)()
    assert libc.capget(ctypes.byref(header), data) == 0
    for part in data:
        part.effective = 0
    assert libc.capset(ctypes.byref(header), data) == 0, ctypes.get_errno()
from pike_harness.worker.supervise import scratch_usage
scratch = sys.argv[1]
os.makedirs(os.path.join(scratch, "open"))
with open(os.path.join(scratch, "open", "visible"), "wb") as handle:
    handle.write(os.urandom(1 << 20))
for name, mode in (("wx", 0o300), ("rw", 0o600), ("none", 0o000)):
    os.makedirs(os.path.join(scratch, name, "inner"))
    with open(os.path.join(scratch, name, "inner", "hidden"), "wb") as handle:
        handle.write(os.urandom(4 << 20))
    os.chmod(os.path.join(scratch, name), mode)
try:
    os.listdir(os.path.join(scratch, "wx"))
    print(json.dumps({"privileged": True}))
    sys.exit(0)
except PermissionError:
    pass
if sys.argv[2] == "no_chmod":  # the candidate locks each folder again right after it is opened up
    os.chmod = lambda *args, **kwargs: None
usage = scratch_usage.measure([scratch], max_entries=1000)
modes = {name: oct(os.stat(os.path.join(scratch, name)).st_mode & 0o777) for name in ("wx", "rw", "none")}
print(json.dumps({"bytes": usage.bytes, "uncounted": usage.uncounted, "modes": modes}))
"""


@pytest.mark.parametrize("how", ["opened_up", "no_chmod"])
def test_a_folder_the_candidate_locked_is_opened_up_and_counted_or_is_the_verdict(tmp_path, how):
    """Folders of mode 0o300 (its owner may still create files there; nobody may list it), 0o600 (listed,
    but no entry can be looked at) and 0o000, each holding 4 MB: the walk skipped them as "nothing to
    count" (50 MB went unseen). They are opened up by descriptor and counted; one that cannot be opened
    up leaves the walk ``uncounted``, which the supervisor judges ``disk_limit``."""
    scratch = tmp_path / "scratch"
    done = subprocess.run([sys.executable, "-c", _AS_OWNER, str(scratch), how], capture_output=True, text=True,
                          timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        if report.get("privileged"):
            pytest.skip("the permission bits do not bind a helper process here")
        if how == "opened_up":
            assert report["uncounted"] is None
            assert report["bytes"] >= (1 << 20) + 3 * (4 << 20), report  # the three locked folders' 12 MB too
            assert set(report["modes"].values()) == {"0o700"}, report
        else:
            assert report["uncounted"] and "unreadable" in report["uncounted"], report
    finally:
        from pike_harness.worker.supervise import trusted_files

        assert trusted_files.remove_tree(scratch) == []


def test_the_disk_walk_counts_a_tree_nested_past_path_max(tmp_path):
    """17 levels of 250-character names: every full path past the 4,096-character limit opened by its
    string fails (ENAMETOOLONG), and the walk skipped the whole tree. By descriptors it is counted."""
    from pike_harness.worker.supervise import scratch_usage, trusted_files

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    name = "n" * 250
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(17):
            os.mkdir(name, dir_fd=fd)
            deeper = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(leaf, os.urandom(2 << 20))
        os.close(leaf)
    finally:
        os.close(fd)
    try:
        usage = scratch_usage.measure([scratch], max_entries=1000)
        assert usage.entries == 18 and usage.uncounted is None
        assert usage.bytes >= 2 << 20
    finally:
        assert trusted_files.remove_tree(scratch) == []




def test_files_deleted_but_held_open_count_once_and_only_on_the_measured_file_systems(tmp_path):
    """Create, open, unlink, write: no folder lists the file, its blocks stay taken as long as it is
    open. The walk counts regular files with no link left that the given processes hold open (a stat
    on /proc/<pid>/fd/<n>), each inode once (a second descriptor of it adds nothing)."""
    from pike_harness.worker.supervise import sandbox, scratch_usage

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    holder = stand_ins.start(stand_ins.HOLDS_A_DELETED_FILE, scratch)
    try:
        start = sandbox.process_start(holder.pid)
        assert os.listdir(scratch) == []
        without = scratch_usage.measure([scratch], max_entries=100)
        assert without.bytes < (1 << 20)
        usage = scratch_usage.measure([scratch], max_entries=100, pids=[(holder.pid, start), (holder.pid, start)])
        assert usage.held_bytes >= 3 << 20 and usage.bytes - without.bytes == usage.held_bytes < 4 << 20, usage
        reused = scratch_usage.measure([scratch], max_entries=100, pids=[(holder.pid, start + 1)])
        assert reused.held_bytes == 0  # the pid's start time differs: another process, not looked at
        if os.path.isdir("/dev/shm") and os.stat("/dev/shm").st_dev != os.stat(scratch).st_dev:
            other = Path(tempfile.mkdtemp(dir="/dev/shm"))
            try:  # the measured folder is on another file system than the file held
                assert scratch_usage.measure([other], max_entries=100, pids=[(holder.pid, start)]).held_bytes == 0
            finally:
                other.rmdir()
    finally:
        holder.kill()
        holder.wait()
