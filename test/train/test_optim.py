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


def test_capturable_is_ignored_off_cuda_and_groups_from_generators_keep_their_params():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    opt = fast_adam([{"params": a.parameters(), "lr": 0.5}, {"params": (p for p in b.parameters())}],
                    lr=0.1, capturable=True)
    assert [len(g["params"]) for g in opt.param_groups] == [2, 2]
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]
    assert opt.defaults["capturable"] is False and opt.defaults["fused"] is True


def test_set_lr_changes_float_and_tensor_learning_rates_in_place():
    from torchrl.train import set_lr

    w = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.Adam([{"params": [w], "lr": torch.tensor(0.1)}, {"params": [], "lr": 0.2}])
    tensor_lr = opt.param_groups[0]["lr"]
    set_lr(opt, 0.05)
    assert opt.param_groups[0]["lr"] is tensor_lr and abs(float(tensor_lr) - 0.05) < 1e-8
    assert opt.param_groups[1]["lr"] == 0.05
    set_lr(opt, 0.5, group=1)
    assert opt.param_groups[1]["lr"] == 0.5 and abs(float(tensor_lr) - 0.05) < 1e-8


def test_accelerate_update_without_cuda_warns_and_runs_the_same_step():
    import pytest

    from torchrl.train import accelerate_update

    calls = []

    def update(x):
        calls.append(x)
        return x * 2

    with pytest.warns(UserWarning, match="cudagraphs=true needs a CUDA device"):
        fast = accelerate_update(update, cudagraphs=True, device="cpu")
    assert fast is update
    assert accelerate_update(update) is update
    assert torch.equal(fast(torch.ones(2)), torch.full((2,), 2.0)) and len(calls) == 1
