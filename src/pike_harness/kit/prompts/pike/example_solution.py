import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# CUDA source of an elementwise sum kernel and the function that launches it
vector_add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void vector_add_kernel(const float* x, const float* y, float* result, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        result[i] = x[i] + y[i];
    }
}

torch::Tensor vector_add(torch::Tensor x, torch::Tensor y) {
    int n = x.numel();
    auto result = torch::zeros_like(x);

    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    vector_add_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), result.data_ptr<float>(), n);

    return result;
}
"""

vector_add_declaration = "torch::Tensor vector_add(torch::Tensor x, torch::Tensor y);"

# Build the extension from the sources above
vector_add_module = load_inline(
    name="vector_add",
    cpp_sources=vector_add_declaration,
    cuda_sources=vector_add_source,
    functions=["vector_add"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vector_add = vector_add_module

    def forward(self, x, y):
        return self.vector_add.vector_add(x, y)
