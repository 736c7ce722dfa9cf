"""``safe_name``: every key and task ref becomes one path component inside the run, never ``.`` or ``..``
(task refs come from `pikeh import pike --suite` and from foreign journals), and every name an earlier
run's folders were made from keeps its folder (a resume finds them by this mapping)."""

from __future__ import annotations

import random
import re
from pathlib import PurePosixPath

import pytest

from pike_harness.contracts.journal import attempt_dir, safe_name, task_dir


def before(text: str, limit: int = 80) -> str:
    """The mapping as it was until dot-only names were made safe: what existing runs' folders are named by."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "_"


DOTS = [".", "..", "...", "../..", "./.", "/..", "../", "..\x00", " .. ", "\x00", "", "/", "." * 200, "_.._"]


@pytest.mark.parametrize("text", DOTS)
def test_a_name_of_dots_is_one_safe_component(text):
    name = safe_name(text)
    assert name not in (".", "..") and name.strip(".") and "/" not in name and "\x00" not in name
    assert len(name) <= 80 and PurePosixPath(name).name == name


def test_dot_names_stay_distinct_and_take_no_ordinary_name():
    assert [safe_name(t) for t in (".", "..", "...", "")] == ["_.", "_..", "_...", "_"]
    # no other text maps to a name that starts with "_" (but "_" itself)
    assert not any(before(t).startswith("_") and before(t) != "_" for t in ("_a", "__x__", "_._", " _.."))


def test_refs_of_dots_stay_inside_the_run():
    assert task_dir("../1") == PurePosixPath("tasks/_../1")
    assert task_dir("../../..") == PurePosixPath("tasks/.._../_..")
    for ref, key in (("../..", ".."), ("..", "."), ("suite/..", "../../x"), ("../../etc/passwd", "baseline/..")):
        for path in (task_dir(ref), attempt_dir(ref, key, 3), attempt_dir(ref, key, None)):
            assert ".." not in path.parts and "." not in path.parts and path.parts[0] == "tasks", path


def test_every_other_name_keeps_its_folder():
    ordinary = ["smoke", "level3-pike", "iter001_attempt002", "baseline/eager", "a b", "a/b", "a_b", "..x", ".hidden",
                "x..", "fix/p3/s2/f1", "openai:gpt-4o_best-of-n_seed0", "é", "a" * 300, "._.", "-", "--"]
    for text in ordinary:
        assert safe_name(text) == before(text), text
        assert safe_name(text, limit=140) == before(text, limit=140), text
    pieces = [".", "..", "/", "_", " ", "a", "Z", "9", "-", "\x00", "é", ":", "\\"]
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        old = before(text, limit=8)
        if old.strip("."):  # the old name was not dots alone: unchanged
            assert safe_name(text, limit=8) == old, text
        else:
            assert safe_name(text, limit=8) not in (".", ".."), text
