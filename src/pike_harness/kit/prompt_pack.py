"""Prompt packs: the wording of every prompt, kept in text files instead of Python strings.

A pack is a folder. Each ``NAME.txt`` is a template whose placeholders are written ``{{name}}``; any
other file (``example_reference.py``, say) is inserted verbatim where a template asks for it. The
strategy that uses a pack declares, per template, which placeholders it fills; a template that names
another placeholder, or a file the strategy needs that is missing, is a one-line ``UserError`` when the
pack is loaded, before any query is sent. So a user can run PIKE's exact wording from their own copy of
its prompt files (``--prompt-pack DIR``), and a run records the pack's hash (``digest``) so two runs'
prompts can be told apart without reading them.

Rendering rules, the only ones: ``{{name}}`` is replaced by its value; a line that holds nothing but a
placeholder whose value is empty is dropped, so optional pieces (an idea, a precision rule) leave no
blank line; each file's trailing newlines are removed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.errors import UserError

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
TEMPLATE_SUFFIX = ".txt"


@dataclass(frozen=True)
class PromptPack:
    """A loaded pack: every file's text, by file name, and the folders it came from."""

    files: Mapping[str, str]
    sources: tuple[Path, ...]
    digest: str = field(default="")

    def text(self, name: str) -> str:
        """A file's text as stored (without trailing newlines)."""
        return self.files[name]

    def render(self, template: str, **values: str) -> str:
        """``template`` (a file stem, ``optimize`` for ``optimize.txt``) with its placeholders filled."""
        lines = []
        for line in self.files[template + TEMPLATE_SUFFIX].split("\n"):
            names = PLACEHOLDER.findall(line)
            if names and not PLACEHOLDER.sub("", line).strip() and not any(values[n] for n in names):
                continue
            lines.append(PLACEHOLDER.sub(lambda m: values[m.group(1)], line))
        return "\n".join(lines)


def load_pack(folders: tuple[Path, ...], schema: Mapping[str, frozenset[str] | None]) -> PromptPack:
    """Load the files ``schema`` names from ``folders`` (the first folder holding a file wins).

    ``schema`` maps each file name to the placeholders its template may use (``None`` for a file
    inserted verbatim). Raises ``UserError`` naming the first missing file or unknown placeholder.
    """
    files: dict[str, str] = {}
    for name, allowed in schema.items():
        path = next((folder / name for folder in folders if (folder / name).is_file()), None)
        if path is None:
            where = " or ".join(str(f) for f in folders)
            raise UserError(f"prompt pack: {where} has no {name}")
        try:
            text = path.read_text(encoding="utf-8").rstrip("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"prompt pack: cannot read {path}: {exc}") from None
        if allowed is not None:
            unknown = sorted(set(PLACEHOLDER.findall(text)) - allowed)
            if unknown:
                known = ", ".join("{{" + a + "}}" for a in sorted(allowed)) or "none"
                raise UserError(
                    f"prompt pack: {path} uses unknown placeholder {{{{{unknown[0]}}}}} (known here: {known})"
                )
        files[name] = text
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return PromptPack(files, tuple(folders), digest.hexdigest())


def pack_folders(override: str | Path | None, defaults: tuple[Path, ...]) -> tuple[Path, ...]:
    """The folders a strategy reads its pack from: ``--prompt-pack DIR`` alone, else its defaults."""
    if not override:
        return defaults
    folder = Path(override).expanduser()
    if not folder.is_dir():
        raise UserError(f"--prompt-pack {override}: no such folder")
    return (folder,)


def pinned(pack: PromptPack, expected: str) -> PromptPack:
    """``pack``, unless a recorded hash (a resumed run's) says its prompts were other ones."""
    if expected and expected != pack.digest:
        where = ", ".join(str(f) for f in pack.sources)
        raise UserError(
            f"prompt pack {where} has changed since the run recorded it (sha256 {expected[:12]}..., "
            f"now {pack.digest[:12]}...): restore it, or start a new run"
        )
    return pack


def pack_option() -> Any:
    """The ``prompt_pack`` field of a strategy's Config (``--prompt-pack DIR``)."""
    return field(
        default="",
        metadata={
            "help": "folder of prompt templates to use instead of the shipped ones (docs/strategies.md, "
            '"Prompt packs"); every file must be there'
        },
    )


def hash_option() -> Any:
    """The ``prompt_pack_sha256`` field: filled in by ``attach``, so run.json records it."""
    return field(
        default="",
        metadata={
            "help": "the prompt pack's hash, recorded by the run; when given, a pack with other content is "
            "refused (a resumed run keeps its prompts)"
        },
    )


def attach(config: Any, load: Callable[[str | None], PromptPack]) -> None:
    """Load ``config.prompt_pack`` (the shipped pack when empty) into ``config.pack``, check it against a
    recorded ``config.prompt_pack_sha256`` and record its hash there. Call from ``__post_init__``."""
    config.pack = pinned(load(config.prompt_pack or None), config.prompt_pack_sha256)
    config.prompt_pack_sha256 = config.pack.digest


def of(config: Any) -> PromptPack:
    """The pack ``attach`` loaded into a strategy's ``config`` (kept off the dataclass's fields, so it
    is neither a command-line option nor part of the recorded config; typed here instead)."""
    pack: PromptPack = config.pack
    return pack
