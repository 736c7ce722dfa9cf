# category: compile_error (the import fails, as a failed load_inline build does)
# task: smoke/5
# expect: compile_error/load
import a_module_that_does_not_exist  # noqa: F401
import torch.nn as nn


class ModelNew(nn.Module):
    pass
