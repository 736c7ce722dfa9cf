# threat: builds (trusted side, an audit of 2026-12-01): include paths that name the candidate's own
# scratch folder as /proc/self/root$HOME, where it planted a maze of links ending in /usr/include. The
# supervisor once resolved each path with os.path.realpath on its own thread (no deadline, no policing,
# the device lock held): 400 links of 2,000 parts cost 12.5 s a path, up to 1,000 paths a call. The
# paths must be refused from their spelling, nothing in the maze looked at; this maze is small (40
# links of 200 parts, 8,000 lstat calls a path for realpath) so that a regression still ends quickly.
# task: smoke/1
# expect: rejected/build_flags
import os

from torch.utils.cpp_extension import load_inline

LINKS, PARTS = 40, 200


def _plant() -> str:
    trap = os.path.join(os.environ["HOME"], "trap")
    os.mkdir(trap)
    os.symlink(".", os.path.join(trap, "a"))
    for index in range(LINKS):
        os.symlink("/".join(["a"] * PARTS), os.path.join(trap, f"x{index}"))
    os.symlink("/usr/include", os.path.join(trap, "u"))  # it ends in an allowed folder
    os.symlink("/".join(f"x{index}" for index in range(LINKS)) + "/u", os.path.join(trap, "t"))
    return "/proc/self/root" + trap + "/t"


PATH = _plant()
load_inline(
    name="pikeh_flags_maze",
    cpp_sources=['extern "C" int pikeh_flags_maze() { return 1; }'],
    extra_include_paths=[PATH] * 200,
    extra_ldflags=[f"-L{PATH}"] * 200,
    no_implicit_headers=True,
    is_python_module=False,
)
