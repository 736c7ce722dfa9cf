"""Data package for the built-in task suites (installed as ``pikeh_tasks``).

Each sub-folder is one suite of KernelBench-format task files plus its ``suite.toml``. Nothing here is
imported as code: the files are read by the suites plugin and executed only inside eval workers.
"""
