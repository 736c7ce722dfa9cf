# threat: none (legitimate): a custom CUDA kernel built with torch.utils.cpp_extension.load_inline
# task: smoke/5
# expect: correct
# limits: compile_timeout_s=600 run_timeout_s=600
# flag: technique:load_inline
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void gelu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor gelu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    gelu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
CPP_SOURCE = "torch::Tensor gelu_cuda(torch::Tensor x);"

_ext = load_inline(name="pikeh_test_gelu", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                   functions=["gelu_cuda"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu_cuda(x)
