"""``fast_adam``: the fused kernel, same updates as the default Adam."""
from __future__ import annotations

import torch

from torchrl.train import fast_adam


def test_fused_adam_matches_default_adam():
    torch.manual_seed(0)
    a = torch.nn.Linear(4, 3)
    b = torch.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    opt_a = fast_adam(a.parameters(), lr=0.01)
    opt_b = torch.optim.Adam(b.parameters(), lr=0.01)
    assert opt_a.defaults["fused"] is True
    x = torch.randn(8, 4)
    for _ in range(3):
        for net, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            net(x).pow(2).sum().backward()
            opt.step()
    torch.testing.assert_close(a.weight, b.weight)
    torch.testing.assert_close(a.bias, b.bias)


def test_param_groups_keep_their_learning_rates():
    x, y = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    opt = fast_adam([{"params": [x], "lr": 0.5}, {"params": [y]}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]
