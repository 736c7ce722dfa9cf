# threat: 13 (fill the disk): writes a file far past the file-size limit on its first call
# task: smoke/5
# expect: runtime_error/forward
# limits: file_size_mb=8
import torch.nn as nn

block = b"x" * (1024 * 1024)


class ModelNew(nn.Module):
    def forward(self, x):
        with open("fill.bin", "wb") as handle:
            for _ in range(64):
                handle.write(block)
        return x
