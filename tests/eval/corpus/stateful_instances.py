# category: incorrect (state shared between instances): keeps a class-level cache keyed by shape,
# filled by the first instance and reused by later ones with other weights (PIKE-B task 25)
# task: smoke/1
# expect: incorrect/state_across_instances
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    _shared_weight = None

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        if ModelNew._shared_weight is None:
            ModelNew._shared_weight = self.linear.weight.detach().clone()
        else:
            with torch.no_grad():  # a "pre-packed" weight from the first instance, not this one's
                self.linear.weight.add_(torch.randn_like(self.linear.weight))

    def forward(self, x):
        return torch.relu(self.linear(x))
