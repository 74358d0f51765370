"""The host-sync counter sees every call that would make the host wait for an accelerator."""
import torch

from torchrl.testing._host_syncs import count_host_syncs


def test_pure_device_ops_do_not_count():
    x = torch.arange(6.0)
    with count_host_syncs() as syncs:
        y = (x * 2).sum(0)
        torch.where(x > 2, x, y)
        x.index_select(0, torch.tensor([0, 2]))
    assert syncs.count == 0, syncs.report()


def test_each_host_read_counts_once_with_its_origin():
    x = torch.arange(6.0)
    with count_host_syncs() as syncs:
        x[0].item()
        bool((x > 2).any())
        x[x > 2]  # data-dependent shape
        (x > 1).nonzero()
        x.tolist()
        x.numpy()
        if x.sum() > 0:
            pass
    ops = [e.op for e in syncs.events]
    assert ops == [
        "aten._local_scalar_dense.default",
        "aten._local_scalar_dense.default",
        "aten.index.Tensor (boolean mask)",
        "aten.nonzero.default",
        "Tensor.tolist",
        "Tensor.numpy",
        "aten._local_scalar_dense.default",
    ]
    assert all("test_host_syncs.py" in e.where[0] for e in syncs.events), syncs.report()


def test_methods_are_restored_after_the_block():
    original = torch.Tensor.tolist
    with count_host_syncs():
        assert torch.Tensor.tolist is not original
    assert torch.Tensor.tolist is original
    assert torch.arange(2).tolist() == [0, 1]


def test_repeat_interleave_counts_only_without_output_size():
    x = torch.arange(3)
    repeats = torch.tensor([1, 2, 1])
    with count_host_syncs() as syncs:
        torch.repeat_interleave(x, repeats, output_size=4)
    assert syncs.count == 0
    with count_host_syncs() as syncs:
        torch.repeat_interleave(x, repeats)
    assert [e.op for e in syncs.events] == ["aten.repeat_interleave.Tensor"]


def test_blocking_copies_between_host_and_device_count_non_blocking_ones_do_not():
    x = torch.arange(4.0)
    with count_host_syncs() as syncs:
        x.to("meta")  # blocking host -> device copy
        x.to("meta", non_blocking=True)
        x.to(torch.float64)  # same device: no sync
        torch.empty(4, device="meta").copy_(x)
        torch.empty(4, device="meta").copy_(x, non_blocking=True)
    assert [e.op for e in syncs.events] == [
        "aten._to_copy.default (blocking copy between the host and a device)",
        "aten.copy_.default (blocking copy between the host and a device)",
    ], syncs.report()
