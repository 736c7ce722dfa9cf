# threat: 13 (fill memory): allocates and touches 64 MB blocks until something stops it
# task: smoke/5
# expect: runtime_error/memory_limit
# limits: memory_mb=1500
import torch

blocks = []
for _ in range(200):
    blocks.append(torch.ones(16 * 1024 * 1024))
