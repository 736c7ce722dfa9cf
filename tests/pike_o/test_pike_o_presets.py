"""PIKE-O's presets (the paper's ablation chain) and how explicit options override them."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from pikeh_pike_o import PikeO, PikeOConfig
from pikeh_pike_o.presets import PRESETS, canonical_name, preset_names

from pike_harness.api import UserError

# The spec's table, written out by hand: (template, parallel, islands, exploitation, exploration, archive).
CHAIN = {
    "pike-o": ("crossover", 20, 3, 0.7, 0.2, 12),
    "mut": ("mutation", 20, 3, 0.7, 0.2, 12),
    "mut,npar": ("mutation", 1, 3, 0.7, 0.2, 12),
    "mut,npar,1isl": ("mutation", 1, 1, 0.7, 0.2, 12),
    "mut,npar,1isl,EO": ("mutation", 1, 1, 1.0, 0.0, 12),
    "mut,npar,1isl,EO,SL": ("mutation", 1, 1, 1.0, 0.0, 4),
}
SHARED = {"num_top_programs": 3, "num_inspirations": 3, "num_diverse_programs": 2, "population_size": 25,
          "elite_selection_ratio": 0.2, "migration_interval": 50, "migration_rate": 0.1, "feature_bins": 10,
          "log_tail_chars": 20_000, "exclude_reference": True}
# 2W iterations in flight, spread evenly over the islands (W=20, 3 islands: 13 each, 39 in all; W=1: at
# least one per island).
IN_FLIGHT = {"pike-o": 39, "mut": 39, "mut,npar": 3, "mut,npar,1isl": 2, "mut,npar,1isl,EO": 2,
             "mut,npar,1isl,EO,SL": 2}


def columns(cfg: PikeOConfig) -> tuple:
    return (cfg.template, cfg.parallel_evaluations, cfg.num_islands, cfg.exploitation_ratio,
            cfg.exploration_ratio, cfg.archive_size)


@pytest.mark.parametrize("name", list(CHAIN))
@pytest.mark.parametrize("efa", [True, False])
def test_each_preset_has_the_papers_parameters(name, efa):
    preset = name if efa else f"{name},noEFA"
    cfg = PikeOConfig(preset=preset)
    assert cfg.preset == preset
    assert columns(cfg) == CHAIN[name]
    assert cfg.max_fix_attempts == (5 if efa else 0)
    assert {k: getattr(cfg, k) for k in SHARED} == SHARED
    assert cfg.random_ratio == pytest.approx(0.1 if "EO" not in name else 0.0)
    assert cfg.in_flight_per_island * cfg.num_islands == IN_FLIGHT[name]
    assert PikeO(cfg).overshoot() == 0  # iterations and fixes start only below the budget


def test_there_are_exactly_twelve_presets_and_the_default_is_the_paper_pike_o():
    assert len(PRESETS) == 12 and preset_names()[0] == "pike-o"
    assert dataclasses.asdict(PikeOConfig()) == dataclasses.asdict(PikeOConfig(preset="pike-o"))
    assert columns(PikeOConfig()) == CHAIN["pike-o"]


def test_preset_names_ignore_case_and_spaces():
    assert canonical_name("MUT, NPAR, 1ISL, eo, sl") == "mut,npar,1isl,EO,SL"
    assert canonical_name("noefa") == "pike-o,noEFA"
    assert canonical_name("Pike-O,NoEFA") == "pike-o,noEFA"
    assert canonical_name("npar") is None  # not a prefix of the chain
    assert canonical_name("mut,1isl") is None
    assert PikeOConfig(preset="Mut , Npar").preset == "mut,npar"


def test_an_unknown_preset_names_the_choices():
    with pytest.raises(UserError, match=r"--preset 'npar,mut' is not a PIKE-O preset; choose one of: pike-o, mut"):
        PikeOConfig(preset="npar,mut")


def test_explicit_values_win_over_the_preset_and_are_reported_as_overrides():
    cfg = PikeOConfig(preset="mut,npar,1isl,EO,SL", num_islands=2, archive_size=7, template="crossover",
                      max_fix_attempts=2)
    assert (cfg.num_islands, cfg.archive_size, cfg.template, cfg.max_fix_attempts) == (2, 7, "crossover", 2)
    assert (cfg.parallel_evaluations, cfg.exploitation_ratio) == (1, 1.0)  # still the preset's
    assert cfg.overrides() == {"num_islands": 2, "archive_size": 7, "template": "crossover", "max_fix_attempts": 2}
    # Giving the preset's own value explicitly changes nothing.
    assert PikeOConfig(preset="mut", parallel_evaluations=20).overrides() == {}


def test_the_recorded_config_rebuilds_the_same_config_as_the_host_does_on_resume():
    cfg = PikeOConfig(preset="mut,npar", num_islands=2)
    recorded = dataclasses.asdict(cfg)
    assert None not in recorded.values()
    assert dataclasses.asdict(PikeOConfig(**recorded)) == recorded


@pytest.mark.parametrize(("bad", "option"), [
    ({"template": "diff"}, "--template"),
    ({"num_islands": 0}, "--num-islands"),
    ({"parallel_evaluations": 0}, "--parallel-evaluations"),
    ({"population_size": 0}, "--population-size"),
    ({"archive_size": 0}, "--archive-size"),
    ({"max_fix_attempts": -1}, "--max-fix-attempts"),
    ({"num_top_programs": -1}, "--num-top-programs"),
    ({"migration_interval": 0}, "--migration-interval"),
    ({"feature_bins": 0}, "--feature-bins"),
    ({"exploration_ratio": 1.5}, "--exploration-ratio"),
    ({"migration_rate": -0.1}, "--migration-rate"),
    ({"exploration_ratio": 0.5, "exploitation_ratio": 0.6}, "--exploration-ratio"),
])
def test_impossible_values_are_refused_naming_the_option(bad, option):
    with pytest.raises(UserError, match=option):
        PikeOConfig(**bad)


def test_every_field_is_a_cli_option_type_with_help():
    hints = typing.get_type_hints(PikeOConfig)
    for f in PikeO.config_fields():
        assert f.metadata.get("help"), f.name
        assert hints[f.name] in (str, bool, int, float, int | None, float | None, bool | None, str | None), f.name
    assert [f.name for f in PikeO.config_fields()][0] == "preset"
    ours = {"empty_island", "migration_rule", "protect_new", "keep_after_llm_failure", "efa_tail_chars",
            "prompt_pack", "prompt_pack_sha256", "top_p", "top_k", "crossover_content"}  # not from presets
    assert {f.name for f in PikeO.config_fields()} - {"preset"} - ours == set(PRESETS["pike-o"])


def test_pikeh_run_help_lists_the_preset_and_every_option(cli):
    result = cli("run", "--strategy", "pike-o", "--help")
    assert result.exit_code == 0, result.output
    for f in PikeO.config_fields():
        assert "--" + f.name.replace("_", "-") in result.output
    assert "mut,npar,1isl,EO,SL" in result.output


def test_pike_o_sends_pikes_top_p_and_no_top_k_unless_told():
    assert PikeO(PikeOConfig()).sampling() == {"top_p": 0.95, "top_k": 0}
    assert PikeO(PikeOConfig(top_p=1.0, top_k=-1)).sampling() == {"top_p": 1.0}  # the provider preset's top_k
    with pytest.raises(UserError, match="--top-p"):
        PikeOConfig(top_p=0.0)
