"""Every doc page against the repository and the CLI: links resolve inside the repository, every option
in an options table exists in its command's ``--help``, and no page cites a file outside the repository.

An options table is one whose header's first cell is ``option``; the line above it names the command
whose ``--help`` must list each option: ``<!-- options of: pikeh run --strategy pike-b -->``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]
IDS = [str(p.relative_to(REPO)) for p in PAGES]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
MARKER = re.compile(r"<!-- options of: (pikeh [^>]*?) -->")
OPTION = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")
# Files of the project's own working notes, which users never see.
OUTSIDE = re.compile(r"\.\./shared/|shared/(specs|suite-facts)/|shared/[\w-]+\.md|shared/fidelity/")


def _prose(page: Path) -> str:
    """The page without its code blocks (commands there are checked by test_docs_examples.py)."""
    return re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_link_resolves_inside_the_repository(page: Path):
    broken = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor on this page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(REPO) or not path.exists():
            broken.append(target)
    assert not broken, f"{page.name}: links that do not resolve inside the repository: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_page_cites_a_file_outside_the_repository(page: Path):
    cited = [m.group(0) for m in OUTSIDE.finditer(page.read_text(encoding="utf-8"))]
    assert not cited, f"{page.name} cites files users do not have: {cited}"


def test_no_report_or_source_file_cites_a_file_outside_the_repository():
    """Reports, benchmarks and the package's sources are read by users too (docstrings, help texts)."""
    files = [*(REPO / "reports").rglob("*.md"), *(REPO / "benchmarks").glob("*.py"),
             *(REPO / "benchmarks").glob("*.sh"), *(REPO / "src").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]
    cited = {str(f.relative_to(REPO)): [m.group(0) for m in OUTSIDE.finditer(f.read_text(encoding="utf-8"))]
             for f in files}
    assert not {name: found for name, found in cited.items() if found}


def _options_tables(page: Path) -> list[tuple[int, str | None, list[str]]]:
    """(line, command named above it or None, option names in its first column) for each options table."""
    lines = page.read_text(encoding="utf-8").splitlines()
    tables = []
    for number, line in enumerate(lines):
        if not re.match(r"\|\s*option\s*\|", line):
            continue
        marker = MARKER.search(lines[number - 1]) if number else None
        options = []
        for row in lines[number + 2:]:
            if not row.startswith("|"):
                break
            first = row.split("|")[1]
            options += OPTION.findall(re.sub(r"--\[?no-?\]?", "--", first.split(" and the ")[0]))
        tables.append((number + 1, marker.group(1) if marker else None, options))
    return tables


TABLES = [(page, *table) for page in PAGES for table in _options_tables(page)]


def test_the_options_tables_are_found():
    assert len(TABLES) >= 7 and all(options for *_, options in TABLES)


@pytest.mark.parametrize(("page", "line", "command", "options"), TABLES,
                         ids=[f"{p.name}:{line}" for p, line, *_ in TABLES])
def test_every_option_in_an_options_table_exists(cli, page, line, command, options):
    assert command, f"{page.name}:{line}: name the command above the table: <!-- options of: pikeh ... -->"
    result = cli(*shlex.split(command)[1:], "--help")
    assert result.exit_code == 0, f"{page.name}:{line}: `{command} --help` failed:\n{result.output}"
    listed = set(OPTION.findall(result.output))
    missing = sorted(set(options) - listed)
    assert not missing, f"{page.name}:{line}: not options of `{command}`: {missing}"
