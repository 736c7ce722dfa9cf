"""The resource limits the candidate's process sets on itself as it starts (core dumps, file size, memory)."""

from __future__ import annotations

# Open files per process: torch, Triton and a build need a few hundred; the supervisor's process
# limit times this bounds what one candidate can take from the host's file table.
OPEN_FILES = 4096


def apply_limits(*, memory_mb: int | None, file_size_mb: int, address_space: bool) -> None:
    """Resource limits the candidate's process (and all it forks) inherits; called by the child itself.

    Set in the child at start-up rather than in a ``preexec_fn``, which is unsafe in the threaded
    evaluators that spawn candidates. RLIMIT_AS only where ``address_space`` (CPU evaluations): the
    CUDA driver reserves far more virtual memory than it uses; the supervisor polls real usage.
    No RLIMIT_NPROC: it counts every thread of the user (the harness's and every other candidate's,
    dozens each with torch), so no value both stops a fork bomb and never starves a legitimate
    candidate of threads; the supervisor counts the session's processes instead (``max_processes``).
    """
    import resource

    def lower(kind: int, value: int) -> None:
        soft, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))

    lower(resource.RLIMIT_CORE, 0)  # a segfault must not leave a core dump in the scratch dir
    lower(resource.RLIMIT_FSIZE, file_size_mb * 1024 * 1024)
    lower(resource.RLIMIT_NOFILE, OPEN_FILES)
    if address_space and memory_mb:
        # Twice the limit: the supervisor's polling enforces ``memory_mb`` on what is really used
        # (as on GPUs); the address-space limit is the backstop against one giant allocation.
        lower(resource.RLIMIT_AS, 2 * memory_mb * 1024 * 1024)
