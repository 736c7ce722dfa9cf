"""Reading a result record a remote worker sent (``EvalResult.from_dict``): every field is of the kind
its annotation says, nested records included, or the record is a ``ValueError`` naming the field, which
the transports turn into their infrastructure error (tests/containers/test_queue_channel.py)."""

from __future__ import annotations

import json
import math

import pytest

from pike_harness.worker import kinds
from pike_harness.worker.records import (
    EvalResult,
    NoiseReport,
    OutputCheck,
    PairedTiming,
    RuntimeStats,
)


def honest() -> dict:
    """A correct result as the supervisor writes one, every nested part present, as it comes off the wire."""
    stats = RuntimeStats(headline_ms=0.5, statistic="median", mean_ms=0.52, median_ms=0.5, min_ms=0.49, max_ms=0.6,
                         stdev_ms=0.02, cv=0.04, iqr_ms=0.01, n=100, host_wall_ms=55.0)
    result = EvalResult(
        request_id="r1", task="smoke/1", category="correct", runtime_ms=0.5, runtime=stats,
        outputs=[OutputCheck(input_set=0, index=0, shape=[2, 3], dtype="float32", max_abs_diff=1e-6,
                             max_rel_diff=1e-5, ok=True)],
        flags=["technique:triton"], stage_seconds={"load": 0.25, "total": 3.5}, stdout_tail="", stderr_tail="",
        protocol={"name": "robust", "version": 2, "params": {}}, environment={"gpu": None, "threads": {"a": 1}},
        seeds={"weight": 1, "public": [0], "hidden": [12345]}, isolation="bwrap", profile={"ops": [["mm", 1.5]]},
        noise=NoiseReport(canary_before_ms=0.01, canary_after_ms=0.011, steal_fraction=0.0, redone=1),
        paired=PairedTiming(speedup=1.4, ci_low=1.3, ci_high=1.5, pairs=[[1.0, 0.7], [1.1, 0.8]], reference_ms=1.05,
                            candidate_ms=0.75, stop="converged", effective_pairs=2.0, seconds=2.5,
                            noise=NoiseReport(redone=0), windows=[["reference", 1, 2], ["candidate", 3, 4]],
                            cores=[3, 3]))
    return json.loads(result.to_json())


def refusal(record: object) -> str:
    with pytest.raises(ValueError) as caught:
        EvalResult.from_dict(record)  # type: ignore[arg-type]
    return str(caught.value)


def changed(path: str, value: object) -> dict:
    """``honest()`` with the field at ``path`` ("runtime.n", "outputs.0.index") set to ``value``."""
    record = honest()
    *parents, last = path.split(".")
    where: object = record
    for part in parents:
        where = where[int(part)] if isinstance(where, list) else where[part]  # type: ignore[index]
    if isinstance(where, list):
        where[int(last)] = value
    else:
        where[last] = value  # type: ignore[index]
    return record


@pytest.mark.parametrize(("path", "value", "said"), [
    ("runtime_ms", "fast", "runtime_ms: type str, expected a number >= 0 or null"),
    ("runtime_ms", True, "runtime_ms: True, expected a number >= 0"),
    ("runtime_ms", float("nan"), "runtime_ms: nan, expected a number >= 0"),
    ("runtime_ms", -1.0, "runtime_ms: -1.0, expected a number >= 0"),
    ("runtime_ms", [1.0], "runtime_ms: type list"),
    ("runtime.headline_ms", "x", "runtime.headline_ms: type str, expected a number >= 0"),
    ("runtime.n", 2.5, "runtime.n: 2.5, expected a whole number >= 0"),
    ("runtime.n", False, "runtime.n: False, expected a whole number"),
    ("runtime.statistic", {"median": 1}, "runtime.statistic: type dict, expected a string"),
    ("runtime.cv", None, "runtime.cv: null, expected a number >= 0"),
    ("runtime", "fast", "runtime: type str, expected an object or null"),
    ("runtime", {}, "runtime.headline_ms: missing"),
    ("stage_seconds", {"a": "b"}, "stage_seconds['a']: type str, expected a number >= 0"),
    ("stage_seconds", [1.0], "stage_seconds: type list, expected an object"),
    ("flags", "notalist", "flags: type str, expected a list"),
    ("flags", ["ok", 3], "flags[1]: 3, expected a string"),
    ("outputs", [{"input_set": "zero", "index": 0}], "outputs[0].input_set: type str, expected a whole number"),
    ("outputs", [{"index": 0}], "outputs[0].input_set: missing"),
    ("outputs", None, "outputs: null, expected a list"),
    ("outputs.0.shape", [2, "3"], "outputs[0].shape[1]: type str"),
    ("outputs.0.ok", 1, "outputs[0].ok: 1, expected true or false"),
    ("outputs.0.max_abs_diff", "big", "outputs[0].max_abs_diff: type str"),
    ("paired.speedup", [1], "paired.speedup: type list, expected a number >= 0"),
    ("paired.pairs", [[1.0, "0.7"]], "paired.pairs[0][1]: type str"),
    ("paired.pairs", [1.0, 0.7], "paired.pairs[0]: 1.0, expected a list"),
    ("paired.cores", [True], "paired.cores[0]: True, expected a whole number"),
    ("paired.noise.redone", "x", "paired.noise.redone: type str"),
    ("paired.noise.flagged", {"why": "x"}, "paired.noise.flagged: type dict, expected a string or null"),
    ("noise.steal_fraction", "0.1", "noise.steal_fraction: type str"),
    ("reason", {"text": "boom"}, "reason: type dict, expected a string or null"),
    ("task", None, "task: null, expected a string"),
    ("stderr_tail", 5, "stderr_tail: 5, expected a string"),
    ("environment", ["gpu"], "environment: type list, expected an object"),
    ("profile", "none", "profile: type str, expected an object or null"),
    ("schema", "1", "schema: type str, expected a whole number"),
])
def test_a_field_of_the_wrong_kind_is_a_value_error_naming_it(path, value, said):
    message = refusal(changed(path, value))
    assert message.startswith("a result with a field of the wrong kind: ") and said in message, message


def test_what_the_annotations_allow_passes_and_the_rest_is_refused():
    """An int where a float is declared, null where the annotation allows it, anything JSON where it
    says Any, fields this version does not know (dropped): all read. Infinity is a figure (a coefficient
    of variation over a zero mean, a difference past the largest float64), NaN is none."""
    record = changed("runtime.cv", math.inf)
    record["runtime_ms"], record["runtime"]["headline_ms"], record["stage_seconds"]["total"] = 1, 1, 3
    record["outputs"][0].update(max_abs_diff=math.inf, max_rel_diff=math.inf, shape=None, future={"x": 1})
    record["paired"].update(noise=None, effective_pairs=None, windows=[[{"side": "x"}, None, [1]]])
    record.update(check=None, profile=None, noise=None, seeds={"hidden": [[1, {"a": None}]]}, added_later=[1])
    result = EvalResult.from_dict(json.loads(json.dumps(record)))
    assert result.runtime is not None and result.runtime.cv == math.inf and result.runtime_ms == 1
    assert result.outputs[0].max_abs_diff == math.inf and result.outputs[0].shape is None
    assert result.paired is not None and result.paired.noise is None and result.noise is None
    assert not hasattr(result, "added_later")
    for field, value in (("cv", math.nan), ("cv", -math.inf), ("headline_ms", True)):
        record["runtime"][field] = value
        assert f"runtime.{field}: " in refusal(record)
        record["runtime"][field] = 1.0


def test_the_supervisors_own_results_still_read():
    """What the supervisor writes (every nested part; a failure with none) reads back equal."""
    for record in (honest(), {**honest(), "category": "incorrect", "runtime_ms": None, "runtime": None,
                              "noise": None, "paired": None, "check": "allclose", "reason": "max abs diff 1"}):
        again = EvalResult.from_dict(record)
        assert again.to_dict() == record
    # and what it refuses, it refuses at the field, not deeper in a later reader
    assert "stage_seconds['load']: type str" in refusal(changed("stage_seconds", {"load": "0.25"}))


def test_the_field_named_is_escaped_and_shortened():
    """A key the worker chose is part of the path: quoted, cut at 40 characters, its control characters
    escaped, never passed to a terminal as it came."""
    message = refusal(changed("stage_seconds", {"\x1b]52;c;SGVsbG8=\x07" + "k" * 500: "x"}))
    assert "stage_seconds['\\x1b]52;c;SGVsbG8=\\x07" in message and "k" * 41 not in message
    assert "\x1b" not in message and "\x07" not in message and len(message) < 400


def test_a_record_that_is_no_object_or_shows_half_a_difference_is_refused():
    for record in ("correct", None, [honest()], 7):
        assert "EvalResult is " in refusal(record) and "not an object" in refusal(record)
    record = honest()
    record["outputs"][0]["max_rel_diff"] = None
    assert "outputs[0] giving only one of max_abs_diff and max_rel_diff" in refusal(record)
    record["outputs"][0]["max_abs_diff"] = None
    assert EvalResult.from_dict(record).outputs[0].max_abs_diff is None


def test_each_record_kind_follows_its_annotations():
    """The kinds come from the dataclasses themselves: a field added to a record is checked with no list
    to keep in step."""
    paired = kinds.of_record(PairedTiming)
    assert paired.required == {"speedup", "ci_low", "ci_high"}
    assert paired.fields["pairs"] == [[kinds.FIGURE]] and paired.fields["windows"] == [[kinds.ANY]]
    assert paired.fields["noise"] == kinds.Nullable(kinds.of_record(NoiseReport))
    assert kinds.of_record(EvalResult).fields["stage_seconds"] == kinds.Each(kinds.FIGURE)
    assert kinds.problem({"a": 1}, kinds.of_record(OutputCheck), "o") == "o.input_set: missing"
