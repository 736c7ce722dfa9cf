"""The ray plugin without a cluster (these run with or without Ray installed): the core never imports
Ray, the options are on `pikeh eval`/`pikeh run`, and a missing Ray is a one-line error naming the fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from ray_cases import case

# Run Python as if Ray were not installed: any import of it fails, and find_spec finds nothing.
WITHOUT_RAY = textwrap.dedent("""
    import sys

    class NoRay:
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                raise ModuleNotFoundError(f"No module named {name!r}")

    sys.meta_path.insert(0, NoRay())
""")


def test_core_and_plugin_modules_never_import_ray():
    script = WITHOUT_RAY + textwrap.dedent("""
        import pike_harness.api, pike_harness.cli, pike_harness.host.run, pike_harness.worker.supervise.supervisor
        import pikeh_ray, pikeh_ray.evaluator
        from pike_harness.host.plugins import PluginHost

        spec = PluginHost().get("evaluators", "ray")
        assert spec.name == "ray" and "ray" not in sys.modules
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_missing_ray_names_the_extra(tmp_path):
    candidate = tmp_path / "cand.py"
    candidate.write_text(case("ok").request.candidate_source)
    script = WITHOUT_RAY + textwrap.dedent(f"""
        from pike_harness.cli import main
        sys.argv = ["pikeh", "eval", {str(candidate)!r}, "--task", "smoke/1", "--evaluator", "ray",
                    "--device", "cpu"]
        main()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "pip install 'pike-harness[ray]'" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_ray_options_are_on_eval_and_run_when_ray_is_chosen(cli):
    for command in ("eval", "run"):
        result = cli(command, "--evaluator", "ray", "--help")
        assert result.exit_code == 0
        for option in ("--ray-address", "--ray-placement", "--ray-retries", "--ray-inflight", "--ray-build-cache",
                       "--ray-node-dir"):
            assert option in result.output, (command, option)
        assert "--ray-address" not in cli(command, "--help").output, "only the chosen evaluator's options"


def test_a_gpu_index_is_refused_with_the_reason(tmp_path):
    from pike_harness.contracts.evaluation import EvaluatorError, EvaluatorOptions

    try:
        from pikeh_ray.evaluator import RayEvaluator, ray_available
    except ImportError:  # pragma: no cover - the plugin ships with the harness
        raise
    if not ray_available():
        return  # without Ray the install hint comes first (test above)
    try:
        RayEvaluator(EvaluatorOptions(device="cuda:1", workdir=tmp_path))
    except EvaluatorError as exc:
        assert "Ray assigns whole GPUs" in str(exc)
    else:
        raise AssertionError("cuda:1 was accepted")


def test_a_result_record_the_harness_cannot_read_is_the_clusters_failure():
    """The bridge relays a device actor's record as it came: one with a category this harness does not
    know (an actor of another version, or a compromised node) or of the wrong shape fails the
    evaluation with an EvaluatorError naming it, escaped; it is never a verdict, nor a reader thread
    that dies and leaves its futures waiting."""
    from pikeh_ray.evaluator import answer

    from pike_harness.contracts.evaluation import EvaluatorError
    from pike_harness.contracts.model import EvalResult

    record = {"request_id": "r", "task": "smoke/1", "category": "correct", "runtime_ms": 1.0}
    assert isinstance(answer({"op": "result", "id": "1", "result": record}), EvalResult)
    for bad in ({**record, "category": "excellent\x1b[2J[/x]"}, {"task": "smoke/1"}, "correct", None):
        outcome = answer({"op": "result", "id": "1", "result": bad})
        assert isinstance(outcome, EvaluatorError) and outcome.attempts == 1, bad
        assert str(outcome).startswith("ray: a device actor sent a result this harness cannot read: ")
        assert "\x1b" not in str(outcome)
    unknown = answer({"op": "result", "id": "1", "result": {**record, "category": "excellent\x1b[2J[/x]"}})
    assert "unknown category 'excellent\\x1b[2J[/x]'" in str(unknown)
    failed = answer({"op": "error", "id": "1", "attempts": 3, "reason": "3 attempts failed"})
    assert isinstance(failed, EvaluatorError) and failed.attempts == 3 and str(failed) == "ray: 3 attempts failed"
