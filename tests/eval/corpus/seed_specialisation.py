# threat: 4 (specialise to the one public input): at construction it computes the answer for the
# inputs of seed 0 (the public seed, as in PIKE) and from then on returns it without any work.
# The hidden input sets, drawn after the candidate is loaded, expose it.
# task: smoke/1
# expect: incorrect/hidden_input
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        state = torch.random.get_rng_state()
        torch.manual_seed(0)
        public_input = torch.randn(128, in_features)
        torch.random.set_rng_state(state)
        with torch.no_grad():
            self.answer = torch.relu(self.linear(public_input))

    def forward(self, x):
        return self.answer.to(x.device).clone()
