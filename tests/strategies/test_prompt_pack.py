"""Prompt packs: templates in files, ``{{name}}`` placeholders, one-line errors, a hash per pack."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pikeh_pike_b import PikeBConfig
from pikeh_pike_o import PikeOConfig
from pikeh_pike_o import prompts as pike_o_prompts

from pike_harness.api import UserError, prompt_pack, prompt_templates
from pike_harness.testing.context import make_task


def copy_of_pike_pack(tmp_path: Path) -> Path:
    folder = tmp_path / "pack"
    shutil.copytree(prompt_templates.PIKE_PACK, folder)
    return folder


def test_the_shipped_pack_has_every_file_and_placeholders_render_with_empty_lines_dropped(tmp_path):
    pack = prompt_templates.load()
    assert set(pack.files) == set(prompt_templates.SCHEMA)
    optimize = prompt_templates.optimize_messages(make_task(tmp_path), pack=pack)[1]["content"]
    assert "{{" not in optimize and not optimize.endswith("\n")
    assert len(pack.digest) == 64 and pack.digest == prompt_templates.load().digest


def test_a_copied_pack_with_an_edit_changes_the_prompt_and_the_hash(tmp_path):
    folder = copy_of_pike_pack(tmp_path)
    assert prompt_templates.load(folder).digest == prompt_templates.load().digest
    (folder / "focus.txt").write_text("Try this first: {{idea}}\n")
    pack = prompt_templates.load(folder)
    assert pack.digest != prompt_templates.load().digest
    text = prompt_templates.optimize_messages(make_task(tmp_path), "tile it", pack=pack)[1]["content"]
    assert text.endswith("Try this first: tile it")
    (folder / "system.txt").write_text("")  # an empty system file sends no system message (PIKE with Gemini)
    assert [
        m["role"]
        for m in prompt_templates.improve_messages(
            make_task(tmp_path), "x = 1\n", pack=prompt_templates.load(folder)
        )
    ] == ["user"]


def test_a_missing_file_or_an_unknown_placeholder_is_a_one_line_error(tmp_path):
    folder = copy_of_pike_pack(tmp_path)
    (folder / "brainstorm.txt").unlink()
    with pytest.raises(UserError, match=r"has no brainstorm\.txt$"):
        prompt_templates.load(folder)
    folder = copy_of_pike_pack(tmp_path / "again")
    (folder / "improve.txt").write_text("{{problem}}\n{{runtime_ms}}\n")
    with pytest.raises(
        UserError, match=r"improve\.txt uses unknown placeholder \{\{runtime_ms\}\}"
    ) as caught:
        prompt_templates.load(folder)
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match="no such folder"):
        prompt_templates.load(tmp_path / "absent")


def test_strategies_record_the_packs_hash_and_refuse_a_changed_pack_on_resume(tmp_path):
    folder = copy_of_pike_pack(tmp_path)
    recorded = PikeBConfig(prompt_pack=str(folder)).prompt_pack_sha256
    assert recorded == prompt_templates.load().digest
    assert PikeBConfig(prompt_pack=str(folder), prompt_pack_sha256=recorded).pack.digest == recorded
    (folder / "improve.txt").write_text("{{problem}}\n{{parent}}\nFaster, please.\n")
    with pytest.raises(UserError, match="has changed since the run recorded it"):
        PikeBConfig(prompt_pack=str(folder), prompt_pack_sha256=recorded)
    pike_o = PikeOConfig()
    assert pike_o.prompt_pack_sha256 == pike_o.pack.digest != recorded  # PIKE-O's own templates count too


def test_pinned_accepts_no_recorded_hash():
    pack = prompt_templates.load()
    assert prompt_pack.pinned(pack, "") is pack


def test_pikeh_prompts_show_prints_every_prompt_with_its_roles_and_refuses_mistakes_in_one_line(
    cli, tmp_path
):
    result = cli("prompts", "show", "--strategy", "pike-b", "--task", "smoke/3")
    assert result.exit_code == 0, result.output
    for name in ("brainstorm", "optimize", "improve", "fix_error", "fix_incorrect"):
        assert f"pike-b / smoke/3 / {name} (role " in result.output
    assert "--- system ---\nYou are a helpful assistant." in result.output and "--- user ---" in result.output
    assert f"sha256 {prompt_templates.load().digest}" in result.output
    mutation = cli(
        "prompts",
        "show",
        "--strategy",
        "pike-o",
        "--task",
        "smoke/3",
        "--option",
        "template=mutation",
        "--name",
        "mutation",
    )
    assert mutation.exit_code == 0 and "pike-o / smoke/3 / mutation (role optimize)" in mutation.output
    assert "efa_error" not in mutation.output
    for args, message in (
        (("--prompt-pack", str(tmp_path / "none")), "no such folder"),
        (("--option", "num_branches=ten"), "is not a valid int"),
        (("--option", "colour=red"), "expected NAME=VALUE"),
    ):
        bad = cli("prompts", "show", "--strategy", "pike-b", "--task", "smoke/3", *args)
        assert bad.exit_code != 0 and message in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize("strategy_name", ["pike-b", "pike-o", "best-of-n", "refine"])
def test_every_placeholder_a_template_may_use_is_filled(tmp_path, strategy_name):
    """A pack whose templates use every placeholder they are allowed renders every prompt (no KeyError)."""
    from pike_harness.cli import App

    strategy_cls = App.host().get("strategies", strategy_name)
    default = strategy_cls().config.pack
    schema = pike_o_prompts.SCHEMA if strategy_name == "pike-o" else prompt_templates.SCHEMA
    folder = tmp_path / "every"
    folder.mkdir()
    for name, text in default.files.items():
        allowed = schema[name]
        if allowed is not None:
            text = " ".join(f"<{p}>{{{{{p}}}}}" for p in sorted(allowed)) or "system"
        (folder / name).write_text(text)
    strategy = strategy_cls(strategy_cls.make_config({"prompt_pack": str(folder)}))
    shown = strategy.example_prompts(make_task(tmp_path))
    assert shown and all("{{" not in m["content"] for e in shown for m in e.messages)
