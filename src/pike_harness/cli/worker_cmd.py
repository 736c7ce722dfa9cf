"""``pikeh worker --io-dir DIR``: run an eval worker; ``pikeh worker image build``: build its images.

The worker itself is ``pike_harness.worker.supervise.service`` (torch, triton, click and the standard library
only, so it also runs as ``python -m pike_harness.worker.supervise.service`` where the harness's CLI is not
installed); its options are declared once, in ``pike_harness.worker.supervise.command``, for both. This module
is the CLI around it and the image builder, which needs a container engine but no torch.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click

from pike_harness.errors import UserError
from pike_harness.worker.supervise.command import run_service, service_options

# TORCH_CUDA_ARCH_LIST per GPU generation: what `load_inline` builds candidates' kernels for.
GPU_ARCHES = {"ampere": "8.0;8.6", "hopper": "9.0", "blackwell": "10.0;12.0", "all": "8.0;8.6;9.0;10.0;12.0"}
DEFINITIONS = {"cuda": "Dockerfile.cuda", "cpu": "Dockerfile.cpu", "apptainer": "pikeh-worker.def"}


@click.group("worker", invoke_without_command=True)
@service_options
@click.pass_context
def worker(ctx: click.Context, **options: Any) -> None:
    """Run an eval worker: take evaluation requests from a queue folder, evaluate each in a sandboxed
    process, write the results back.

    Start one per GPU host (by hand, from Slurm, in a container) on a folder the harness also sees,
    then run `pikeh eval` or `pikeh run` with `--evaluator queue --io-dir DIR`. A request carries
    everything an evaluation needs, so the worker needs no suites and no run store. Stop it with
    Ctrl-C or SIGTERM: what it was evaluating goes back to the queue. `pikeh worker image build`
    builds container images for it (docs/containers.md).
    """
    if ctx.invoked_subcommand is not None:
        return
    from pike_harness.worker.supervise.service import ServiceError

    try:
        code = run_service(**options)
    except ServiceError as exc:
        raise UserError(str(exc)) from None
    ctx.exit(code)


@worker.group("image")
def image() -> None:
    """Build the worker's container images (definitions in the repository's containers/ folder)."""


def _containers_dir(given: Path | None) -> Path:
    """The definitions ship as the ``pikeh_containers`` data package (the repository's containers/)."""
    if given is None:
        from importlib.resources import files

        given = Path(str(files("pikeh_containers")))
    if (given / "Dockerfile.cuda").is_file():
        return given
    raise UserError(f"cannot find the image definitions in {given} (no Dockerfile.cuda); "
                    "pass --containers-dir PATH/TO/containers")


def _stage_context(containers: Path, definition: str, into: Path) -> None:
    """The build context: the definition and the worker's code, nothing else (no venv, no runs, no keys)."""
    import pike_harness

    package = Path(pike_harness.__file__).resolve().parent
    (into / "containers").mkdir(parents=True)
    shutil.copy2(containers / definition, into / "containers" / definition)
    target = into / "src" / "pike_harness"
    target.mkdir(parents=True)
    shutil.copy2(package / "__init__.py", target / "__init__.py")
    for source in sorted((package / "worker").rglob("*.py")):
        relative = source.relative_to(package)
        (target / relative.parent).mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / relative)


@image.command("build")
@click.option("--kind", type=click.Choice(sorted(DEFINITIONS)), default="cuda", show_default=True,
              help="cuda: CUDA + cuDNN devel base, PyTorch, Triton, ninja. cpu: for tests and CPU hosts. "
                   "apptainer: a .sif for clusters without Docker (needs `apptainer`).")
@click.option("--gpu-arch", type=click.Choice(sorted(GPU_ARCHES)), default="hopper", show_default=True,
              help="GPU generation that candidates' CUDA code is built for (TORCH_CUDA_ARCH_LIST): ampere "
                   "(8.0, 8.6), hopper (9.0), blackwell (10.0, 12.0) or all.")
@click.option("--engine", type=click.Choice(["docker", "podman"]), default="docker", show_default=True)
@click.option("--tag", default=None, help="Image tag (default: pikeh-worker:cuda, pikeh-worker:cpu).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="[apptainer] Where the .sif goes (default: ./pikeh-worker.sif).")
@click.option("--base", default=None, help="Base image instead of the definition's default (e.g. a local one).")
@click.option("--no-torch", is_flag=True,
              help="[cpu] Install no PyTorch: for a base whose Python comes from the host at run time "
                   "(`--docker-host-python`, as CI does); builds with no network.")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE",
              help="Extra build argument (repeatable), e.g. CUDA_VERSION=12.8.1 or TORCH_SPEC=torch==2.8.0.")
@click.option("--containers-dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Where the definitions are (default: the repository's containers/).")
@click.option("--dry-run", is_flag=True, help="Print the build command and the context's files; build nothing.")
def build(kind: str, gpu_arch: str, engine: str, tag: str | None, output: Path | None, base: str | None,
          no_torch: bool, build_args: tuple[str, ...], containers_dir: Path | None, dry_run: bool) -> None:
    """Build the worker image: the definition plus the worker's code (src/pike_harness/worker), so the
    image runs the same wire format as this harness.

    Equivalent to `tar -c --exclude=__pycache__ containers/Dockerfile.cuda src/pike_harness/__init__.py
    src/pike_harness/worker | docker build -t pikeh-worker:cuda -f containers/Dockerfile.cuda -`.
    """
    definition = DEFINITIONS[kind]
    containers = _containers_dir(containers_dir)
    args: list[str] = []
    if kind != "cpu":
        args.append(f"TORCH_CUDA_ARCH_LIST={GPU_ARCHES[gpu_arch]}")
    if base:
        args.append(f"BASE={base}")
    if no_torch:
        if kind != "cpu":
            raise click.UsageError("--no-torch is for --kind cpu only")
        args.append("INSTALL_TORCH=0")
    for item in build_args:
        if "=" not in item:
            raise click.UsageError(f"--build-arg {item!r}: write NAME=VALUE")
        args.append(item)
    with tempfile.TemporaryDirectory(prefix="pikeh-image-") as tmp:
        context = Path(tmp)
        _stage_context(containers, definition, context)
        if kind == "apptainer":
            sif = (output or Path("pikeh-worker.sif")).absolute()
            command = ["apptainer", "build", "--force"]
            for item in args:
                command += ["--build-arg", item]
            command += [str(sif), f"containers/{definition}"]
        else:
            command = [engine, "build", "-t", tag or f"pikeh-worker:{kind}", "-f", f"containers/{definition}"]
            for item in args:
                command += ["--build-arg", item]
            if no_torch:
                command += ["--network", "none"]
            command.append(".")
        files = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
        click.echo(f"context ({len(files)} files): {', '.join(files)}", err=True)
        click.echo(f"$ (cd CONTEXT && {shlex.join(command)})", err=True)
        if dry_run:
            return
        if shutil.which(command[0]) is None:
            raise UserError(f"`{command[0]}` is not installed here: install it, or build on a machine that has it")
        code = subprocess.call(command, cwd=context)
        if code != 0:
            raise UserError(f"{command[0]} build failed (exit status {code}); see its output above")
