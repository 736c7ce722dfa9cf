# threat: builds (issue 26): linker flags that write the library elsewhere and read a response file
# task: smoke/1
# expect: rejected/build_flags
from torch.utils.cpp_extension import load_inline

load_inline(
    name="pikeh_flags_out",
    cpp_sources=['extern "C" int pikeh_flags_out() { return 1; }'],
    extra_ldflags=["-Xlinker", "-o/tmp/pikeh-flags-out.so", "@/etc/passwd"],
    no_implicit_headers=True,
    is_python_module=False,
)
