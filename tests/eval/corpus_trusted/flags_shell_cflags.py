# threat: builds (issue 26): a compiler flag that is shell (ninja runs build rules through /bin/sh):
# the arithmetic only becomes 42 if a shell ran it
# task: smoke/1
# expect: rejected/build_flags
from torch.utils.cpp_extension import load_inline

load_inline(
    name="pikeh_flags_shell",
    cpp_sources=['extern "C" int pikeh_flags_shell() { return 1; }'],
    extra_cflags=["-O3;echo PIKEH_SHELL_RAN_$((6*7)) >&2"],
    no_implicit_headers=True,
    is_python_module=False,
)
