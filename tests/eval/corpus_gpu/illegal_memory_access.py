# threat: 15 (poison the CUDA context): a load_inline kernel writes far out of bounds; the CUDA
# error ends this candidate's process and the next candidate gets a fresh context
# task: smoke/5
# expect: runtime_error
# limits: compile_timeout_s=600 run_timeout_s=600
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void wild_kernel(float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        y[i + (1LL << 36)] = 1.0f;
    }
}

torch::Tensor wild_cuda(torch::Tensor x) {
    auto y = torch::zeros_like(x);
    int64_t n = y.numel();
    wild_kernel<<<(int)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n);
    return y;
}
"""
CPP_SOURCE = "torch::Tensor wild_cuda(torch::Tensor x);"

_ext = load_inline(name="pikeh_test_wild", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                   functions=["wild_cuda"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.wild_cuda(x)
