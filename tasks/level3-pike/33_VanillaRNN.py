import torch
import torch.nn as nn


class Model(nn.Module):
    """One step of a vanilla RNN cell: new hidden = tanh(W [x, h]); output = V new_hidden.

    Stateful as published: ``self.hidden`` is a plain tensor attribute (not a buffer, so ``.to()``
    does not move it), overwritten with the second input and then replaced by the new hidden state.
    """

    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x, h0):
        self.hidden = self.hidden.to(x.device)
        self.hidden.copy_(h0)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(combined))
        return self.h2o(self.hidden)


batch_size = 8
input_size = 1024
hidden_size = 256
output_size = 128
sequence_length = 256  # unused: the model runs a single step


def get_inputs():
    return [torch.randn(batch_size, input_size), torch.randn(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
