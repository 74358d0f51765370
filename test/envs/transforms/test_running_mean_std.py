import doctest

import numpy as np
import pytest
import torch

from torchrl.envs.transforms import _running_mean_std as rms_module
from torchrl.envs.transforms._running_mean_std import RunningMeanStd
from torchrl.envs.transforms._running_stats import (
    ema_loc_scale,
    ema_normalize,
    ema_update_,
    welford_merge_,
)


class TestRunningMeanStd:
    def test_initial_state(self):
        r = RunningMeanStd(shape=(2,))
        assert list(r.state_dict()) == ["mean", "var", "count"]  # as TorchRL
        assert r.mean.tolist() == [0.0, 0.0] and r.var.tolist() == [1.0, 1.0]
        assert r.count.item() == pytest.approx(1e-4)
        assert RunningMeanStd(shape=3).mean.shape == (3,)
        assert RunningMeanStd().mean.shape == ()

    def test_matches_numpy_over_batches(self):
        # epsilon=0: no prior, the statistics are exactly the population mean/var of everything seen
        g = torch.Generator().manual_seed(0)
        batches = [torch.randn(n, 3, generator=g, dtype=torch.float64) * 3 + 1 for n in (5, 1, 7)]
        r = RunningMeanStd(shape=(3,), epsilon=0.0).double()
        for b in batches:
            r.update(b)
        seen = torch.cat(batches).numpy()
        np.testing.assert_allclose(r.mean.numpy(), seen.mean(0), rtol=1e-12)
        np.testing.assert_allclose(r.var.numpy(), seen.var(0), rtol=1e-12)
        assert r.count.item() == 13

    def test_known_answers_with_prior(self):
        # numbers from TorchRL 0.14.1 on the same input (default epsilon=1e-4)
        r = RunningMeanStd(shape=(2,))
        x = torch.tensor([[1.0, 2.0], [3.0, 5.0], [4.0, 0.0]])
        r.update(x)
        torch.testing.assert_close(r.mean, torch.tensor([2.6666, 2.3333]), atol=1e-4, rtol=0)
        torch.testing.assert_close(r.var, torch.tensor([1.5558, 4.2223]), atol=1e-4, rtol=0)
        torch.testing.assert_close(
            r.normalize(x), torch.tensor([[-1.3361, -0.1622], [0.2673, 1.2978], [1.0690, -1.1355]]), atol=1e-4, rtol=0
        )
        r.update(torch.tensor([10.0, 10.0]))  # a single sample
        r.update(torch.tensor([[[10.0, 10.0]]]))  # any number of leading dims
        torch.testing.assert_close(r.mean, torch.tensor([5.5999, 5.3999]), atol=1e-4, rtol=0)
        torch.testing.assert_close(r.var, torch.tensor([13.8404, 16.6403]), atol=1e-3, rtol=0)
        assert r.count.item() == pytest.approx(5.0001)

    def test_normalize_floor_and_dtypes(self):
        r = RunningMeanStd(shape=(2,))
        r.load_state_dict({"mean": torch.zeros(2), "var": torch.zeros(2), "count": torch.tensor(3.0)})
        assert r.normalize(torch.ones(2)).tolist() == [10000.0, 10000.0]  # std floored at 1e-4
        r.update(torch.ones(4, 2, dtype=torch.int64))  # integer samples are cast
        assert r.mean.dtype == torch.float32
        assert r.normalize(torch.ones(2, dtype=torch.float64)).dtype == torch.float32

    def test_empty_batch_is_a_no_op(self):
        r = RunningMeanStd(shape=(2,))
        r.update(torch.zeros(0, 2))
        assert r.mean.tolist() == [0.0, 0.0] and r.var.tolist() == [1.0, 1.0]

    def test_shape_mismatch(self):
        with pytest.raises(RuntimeError, match=r"shape \(3,\) do not end with the tracked feature shape \(2,\)"):
            RunningMeanStd(shape=(2,)).update(torch.ones(3))

    def test_state_dict_round_trip_and_device(self):
        r = RunningMeanStd(shape=(2,))
        r.update(torch.randn(6, 2))
        fresh = RunningMeanStd(shape=(2,))
        fresh.load_state_dict(r.state_dict())
        for k, v in r.state_dict().items():
            torch.testing.assert_close(fresh.state_dict()[k], v)
        r.to("meta")
        assert all(v.device.type == "meta" for v in r.state_dict().values())


class TestRunningStatsFunctions:
    def test_ema_decay_one_is_running_mean(self):
        loc, sq, count = torch.zeros(2), torch.zeros(2), torch.zeros((), dtype=torch.long)
        xs = torch.tensor([[1.0, 2.0], [3.0, 5.0], [4.0, 0.0]])
        for x in xs:
            ema_update_(loc, sq, count, x, x * x, 1, 1.0)
        torch.testing.assert_close(loc, xs.mean(0))
        _, std = ema_loc_scale(loc, sq, count, 1.0, 1e-4)
        torch.testing.assert_close(std, xs.var(0, unbiased=False).sqrt())

    def test_ema_with_decay_by_hand(self):
        # decay 0.5, samples 1 then 3: loc = 0.5, then 0.25 + 1.5 = 1.75; sq = 0.5, then 0.25 + 4.5 = 4.75;
        # correction 1 - 0.25 = 0.75: mean = 1.75 / 0.75, var = (4.75 - 1.75^2) / 0.75 = 2.25
        loc, sq, count = torch.zeros(()), torch.zeros(()), torch.zeros((), dtype=torch.long)
        for v in (1.0, 3.0):
            x = torch.tensor(v)
            ema_update_(loc, sq, count, x, x * x, 1, 0.5)
        assert (loc.item(), sq.item(), count.item()) == (1.75, 4.75, 2)
        mean, std = ema_loc_scale(loc, sq, count, 0.5, 1e-4)
        assert mean.item() == pytest.approx(1.75 / 0.75) and std.item() == pytest.approx(1.5)

    def test_ema_before_any_sample(self):
        zero = torch.zeros(())
        mean, std = ema_loc_scale(zero, zero, torch.zeros((), dtype=torch.long), 0.9, 0.1)
        assert mean.item() == 0.0 and std.item() == pytest.approx(0.1)

    @pytest.mark.parametrize("decay", [1.0, 0.9, 0.0])
    def test_ema_normalize_matches_loc_scale(self, decay):
        g = torch.Generator().manual_seed(0)
        loc, sq, count = torch.zeros(4), torch.zeros(4), torch.zeros((), dtype=torch.long)
        x = torch.randn(4, generator=g)
        # before any sample (a frozen transform): finite, the mean is 0 and the std eps
        torch.testing.assert_close(ema_normalize(x, loc, sq, count, decay, 0.5, False), x / 0.5)
        for _ in range(3):
            x = torch.randn(4, generator=g)
            ema_update_(loc, sq, count, x, x * x, 1, decay)
            mean, std = ema_loc_scale(loc, sq, count, decay, 1e-4)
            torch.testing.assert_close(ema_normalize(x, loc, sq, count, decay, 1e-4, True), (x - mean) / std)

    def test_welford_merge_by_hand(self):
        # running {1, 3} (mean 2, var 1, n 2) + batch {5} (mean 5, var 0): {1, 3, 5}: mean 3, var 8/3
        mean, var, count = torch.tensor(2.0), torch.tensor(1.0), torch.tensor(2.0)
        welford_merge_(mean, var, count, torch.tensor(5.0), torch.tensor(0.0), 1)
        assert mean.item() == pytest.approx(3.0) and var.item() == pytest.approx(8 / 3) and count.item() == 3


def test_doctests():
    result = doctest.testmod(rms_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
