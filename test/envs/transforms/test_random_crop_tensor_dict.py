"""RandomCropTensorDict: random windows of sampled sequences, seeded."""
import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import RandomCropTensorDict as Exported
from torchrl.envs.transforms import _random_crop_tensor_dict as module
from torchrl.envs.transforms._random_crop_tensor_dict import RandomCropTensorDict

from test.envs.transforms.contract import BufferOnlyContract

_REFUSED = "cannot run in an environment"


def _seq(B=2, T=10):
    a = torch.arange(B * T).view(B, T)
    return TensorDict(a=a, nested=TensorDict(b=a.unsqueeze(-1).float(), batch_size=[B, T]), batch_size=[B, T])


class TestRandomCropTensorDict(BufferOnlyContract):
    """A sampled-data transform; in an env it refuses at the first reset (TorchRL fails there too)."""

    refusal = (RuntimeError, _REFUSED)

    def make_transform(self):
        return RandomCropTensorDict(3)

    def replay_buffer_data(self):
        return _seq(B=4, T=5)

    def test_contract_replay_buffer(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)  # one element: a sequence
        rb.append_transform(self.make_transform())
        rb.extend(self.replay_buffer_data())
        assert rb.sample().batch_size == (3, 3)

    def test_contract_seeded_rollouts_match(self):
        torch.manual_seed(0)
        a = self.make_transform()(_seq())
        torch.manual_seed(0)
        b = self.make_transform()(_seq())
        assert (a == b).all()

    def test_exported(self):
        assert Exported is RandomCropTensorDict

    def test_known_answer_seeded(self):
        torch.manual_seed(0)
        out = RandomCropTensorDict(3)(_seq())
        torch.manual_seed(0)
        starts = (torch.rand(2) * 8).floor().long()  # one uniform start per sequence among the 8 windows
        assert starts.tolist() == [3, 6]
        assert out.shape == (2, 3) and out["a"].tolist() == [[3, 4, 5], [16, 17, 18]]
        assert out["nested", "b"].squeeze(-1).tolist() == [[3.0, 4.0, 5.0], [16.0, 17.0, 18.0]]

    def test_every_window_is_reachable(self):
        # deliberate difference: TorchRL draws starts in [0, T - L) and never returns the last window
        torch.manual_seed(0)
        data = _seq(B=200, T=5)
        starts = RandomCropTensorDict(3)(data)["a"][:, 0] - torch.arange(200) * 5
        assert set(starts.tolist()) == {0, 1, 2}
        assert RandomCropTensorDict(5)(data).shape == (200, 5)  # the whole sequence (TorchRL raises)

    def test_sample_dim(self):
        data = TensorDict(a=torch.arange(20).view(10, 2), batch_size=[10, 2])
        torch.manual_seed(0)
        out = RandomCropTensorDict(3, sample_dim=0)(data)
        assert out.shape == (3, 2)
        assert out["a"].tolist() == [[6, 13], [8, 15], [10, 17]]  # starts 3 and 6, one per column
        torch.manual_seed(0)
        out = RandomCropTensorDict(3)(TensorDict(a=torch.arange(60).view(2, 3, 10), batch_size=[2, 3, 10]))
        assert out.shape == (2, 3, 3) and ((out["a"][..., 1:] - out["a"][..., :-1]) == 1).all()

    def test_mask_keeps_windows_inside_the_valid_prefix(self):
        mask = torch.tensor([[True] * 10, [True] * 4 + [False] * 6])
        data = TensorDict(a=torch.arange(20).view(2, 10), mask=mask, batch_size=[2, 10])
        seen = set()
        for seed in range(30):
            torch.manual_seed(seed)
            out = RandomCropTensorDict(3, mask_key="mask")(data)
            assert out["mask"].all()
            seen.add(int(out["a"][1, 0]))
        assert seen == {10, 11}  # both windows of the 4 valid steps
        torch.manual_seed(0)
        out = RandomCropTensorDict(3, mask_key="mask")(data)
        assert out["a"].tolist() == [[3, 4, 5], [11, 12, 13]]

    def test_one_dim_and_buffers(self):
        torch.manual_seed(0)
        out = RandomCropTensorDict(3)(TensorDict(a=torch.arange(10), batch_size=[10]))
        assert out.shape == (3,) and out["a"].tolist() == [3, 4, 5]
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=RandomCropTensorDict(4), batch_size=2)
        rb.extend(_seq())
        assert rb.sample().shape == (2, 4)
        assert RandomCropTensorDict(4).inv(_seq()).shape == (2, 10)  # writes pass through

    def test_attributes(self):
        t = RandomCropTensorDict(3, sample_dim=1, mask_key=("collector", "mask"))
        assert t.sub_seq_len == 3 and t.sample_dim == 1 and t.mask_key == ("collector", "mask")
        assert t.in_keys == [] and t.out_keys == [] and list(t.state_dict()) == []

    def test_env_builds_but_refuses_to_run(self):
        env = TransformedEnv(PendulumEnv(), RandomCropTensorDict(3))
        with pytest.raises(RuntimeError, match=_REFUSED):
            env.rollout(3)

    def test_errors(self):
        for bad in (0, -1, 2.5, True):
            with pytest.raises(ValueError, match="sub_seq_len must be a positive int"):
                RandomCropTensorDict(bad)
        with pytest.raises(ValueError, match="sample_dim must be an int"):
            RandomCropTensorDict(3, sample_dim="time")
        with pytest.raises(RuntimeError, match=r"windows of length 12 along dim -1 of data with batch_size \(2, 10\)"):
            RandomCropTensorDict(12)(_seq())
        with pytest.raises(RuntimeError, match="cannot sub-sample from a tensordict with an empty shape"):
            RandomCropTensorDict(3)(_seq()[0, 0])
        with pytest.raises(IndexError, match=r"sample_dim=1 is out of range for data with batch_size \(10,\)"):
            RandomCropTensorDict(3, sample_dim=1)(TensorDict(a=torch.arange(10), batch_size=[10]))
        with pytest.raises(KeyError, match="mask entry 'mask' not found"):
            RandomCropTensorDict(3, mask_key="mask")(_seq())
        data = _seq().set("mask", torch.tensor([[True] * 10, [True] * 2 + [False] * 8]))
        with pytest.raises(RuntimeError, match=r"length 3 when the shortest valid sequence \('mask'\) has 2 steps"):
            RandomCropTensorDict(3, mask_key="mask")(data)

    def test_docstring_examples(self):
        assert doctest.testmod(module, raise_on_error=True).attempted > 0
