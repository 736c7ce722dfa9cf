"""``pikeh worker --io-dir DIR``: run an eval worker; ``pikeh worker image build``: build its images.

The worker itself is ``pike_harness.worker.service`` (torch, triton and the standard library only, so
it also runs as ``python -m pike_harness.worker.service`` where the harness's CLI is not installed);
this module is the CLI around it and the image builder, which needs a container engine but no torch.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from pike_harness.errors import UserError

# TORCH_CUDA_ARCH_LIST per GPU generation: what `load_inline` builds candidates' kernels for.
GPU_ARCHES = {"ampere": "8.0;8.6", "hopper": "9.0", "blackwell": "10.0;12.0", "all": "8.0;8.6;9.0;10.0;12.0"}
DEFINITIONS = {"cuda": "Dockerfile.cuda", "cpu": "Dockerfile.cpu", "apptainer": "pikeh-worker.def"}


@click.group("worker", invoke_without_command=True)
@click.option("--io-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The queue folder shared with `pikeh eval/run --evaluator queue --io-dir DIR` "
                   "(local disk or a shared file system).")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N or cuda:0,1.")
@click.option("--max-active", type=click.IntRange(min=1), default=None,
              help="Evaluations in flight (loading runs in parallel; checking and timing take turns per "
                   "device). Default: what the engine takes at once (CPU slots + 2 per device).")
@click.option("--worker-id", default=None, help="This worker's name in the folder. Default: <host>-<pid>.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Private folder for reference outputs and scratch (default: a temporary folder).")
@click.option("--heartbeat", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between heartbeats.")
@click.option("--stale-after", type=click.FloatRange(min=0.1), default=15.0, show_default=True,
              help="Seconds a heartbeat may stand still before its worker counts as dead.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=3, show_default=True,
              help="Workers that may die on one request before it is given up (reported as worker_lost).")
@click.option("--key-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Shared key (also given to the host with --queue-key-file): accept only signed requests, "
                   "sign results.")
@click.option("--key-stdin", is_flag=True, help="Read the shared key from the first line of standard input.")
@click.option("--stdin-lifeline", is_flag=True, help="Exit when standard input reaches end-of-file.")
@click.option("--replace", is_flag=True,
              help="The previous worker with this --worker-id is known to be dead: take its requests at once.")
@click.option("--idle-exit", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Exit after this long without work (batch jobs).")
@click.option("--quiet", is_flag=True, help="Log warnings and errors only.")
@click.pass_context
def worker(ctx: click.Context, io_dir: Path | None, device: str, max_active: int | None, worker_id: str | None,
           workdir: Path | None, heartbeat: float, stale_after: float, max_attempts: int, key_file: Path | None,
           key_stdin: bool, stdin_lifeline: bool, replace: bool, idle_exit: float | None, quiet: bool) -> None:
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
    if io_dir is None:
        raise click.UsageError("--io-dir DIR is required: the folder shared with "
                               "`pikeh eval/run --evaluator queue --io-dir DIR`")
    if key_file and key_stdin:
        raise click.UsageError("give --key-file or --key-stdin, not both")
    from pike_harness.worker import queue_channel as qc
    from pike_harness.worker import service

    try:
        key = qc.read_key(key_file) if key_file else (service.read_key_line(sys.stdin.buffer) if key_stdin else None)
    except (qc.ChannelError, service.ServiceError) as exc:
        raise UserError(str(exc)) from None
    config = service.ServiceConfig(io_dir=io_dir, device=device, max_active=max_active, worker_id=worker_id,
                                   workdir=workdir, heartbeat_s=heartbeat, stale_after_s=stale_after,
                                   max_attempts=max_attempts, key=key, stdin_lifeline=stdin_lifeline,
                                   replace=replace, idle_exit_s=idle_exit)
    service.setup_logging(quiet)
    try:
        code = service.serve(config)
    except service.ServiceError as exc:
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
    (target / "worker").mkdir(parents=True)
    shutil.copy2(package / "__init__.py", target / "__init__.py")
    for source in sorted((package / "worker").glob("*.py")):
        shutil.copy2(source, target / "worker" / source.name)


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
