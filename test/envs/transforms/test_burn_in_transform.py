"""BurnInTransform: recurrent states refreshed on sampled sequences; numbers from TorchRL 0.14.1."""
import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import BurnInTransform as Exported
from torchrl.envs.transforms import _burn_in_transform as module
from torchrl.envs.transforms._burn_in_transform import BurnInTransform
from torchrl.modules import GRUModule, LSTMModule, set_recurrent_mode

from test.envs.transforms.contract import BufferOnlyContract

_REFUSED = "can only be appended to a ReplayBuffer"


def _gru(recurrent=False):
    gru = GRUModule(input_size=2, hidden_size=3, in_keys=["observation", "hidden"],
                    out_keys=["intermediate", ("next", "hidden")], default_recurrent_mode=recurrent)
    with torch.no_grad():  # fixed weights, shared with the TorchRL run that gave the numbers below
        for i, p in enumerate(gru.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view_as(p) * (1 + 0.1 * i))
    return gru


def _sequences(B=2, T=5):
    obs = torch.arange(B * T * 2, dtype=torch.float32).view(B, T, 2) / 10
    return TensorDict(observation=obs, hidden=torch.full((B, T, 1, 3), 0.3),
                      is_init=torch.zeros(B, T, 1, dtype=torch.bool),
                      next=TensorDict(observation=obs + 1, batch_size=[B, T]), batch_size=[B, T])


def _hidden0(out):
    return out["hidden"][:, 0, 0]


class TestBurnInTransform(BufferOnlyContract):
    """A sampled-data transform that TorchRL refuses in envs (at the first reset or step)."""

    refusal = (RuntimeError, _REFUSED)

    def make_transform(self):
        return BurnInTransform([_gru()], burn_in=2)

    def replay_buffer_data(self):
        return _sequences(B=4, T=5)

    def test_contract_replay_buffer(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)  # one element: a sequence
        rb.append_transform(self.make_transform())
        rb.extend(self.replay_buffer_data())
        sample = rb.sample()
        assert sample.batch_size == (3, 3)  # 5 steps, 2 burnt in

    def test_contract_seeded_rollouts_match(self):
        data = self.replay_buffer_data()
        a, b = self.make_transform()(data.clone()), self.make_transform()(data.clone())
        assert (a == b).all()

    # -- known answers (TorchRL 0.14.1 on the same data and weights) ---------------------------------
    def test_exported(self):
        assert Exported is BurnInTransform

    def test_step_mode(self):
        # as in TorchRL: in step mode each burn-in step starts from its stored state; the last one counts
        out = BurnInTransform([_gru()], burn_in=2)(_sequences())
        assert out.shape == (2, 3)
        expected = torch.tensor([[0.39544716, 0.47799844, 0.49597687], [0.58644992, 0.59448731, 0.51665008]])
        torch.testing.assert_close(_hidden0(out), expected)
        assert (out["hidden"][:, 1:] == 0.3).all()  # later steps keep their stored states
        torch.testing.assert_close(out["observation"][..., 0], torch.tensor([[0.4, 0.6, 0.8], [1.4, 1.6, 1.8]]))
        assert set(out.keys(True, True)) == {"observation", "hidden", "is_init", ("next", "observation")}

    def test_recurrent_mode(self):
        expected = torch.tensor([[0.41673371, 0.55032682, 0.60498673], [0.67221248, 0.73478031, 0.65554130]])
        torch.testing.assert_close(_hidden0(BurnInTransform([_gru(True)], 2)(_sequences())), expected)
        with set_recurrent_mode(True):
            torch.testing.assert_close(_hidden0(BurnInTransform([_gru()], 2)(_sequences())), expected)
        expected = torch.tensor([[0.48165444, 0.63767201, 0.69914210], [0.73796064, 0.82445657, 0.74696887]])
        torch.testing.assert_close(_hidden0(BurnInTransform([_gru(True)], 3)(_sequences())), expected)

    def test_episode_start_inside_the_burn_in(self):
        data = _sequences()
        data["is_init"][:, 1] = True
        expected = torch.tensor([[0.47387820, 0.60106003, 0.62952411], [0.71216685, 0.75447619, 0.65218675]])
        torch.testing.assert_close(_hidden0(BurnInTransform([_gru(True)], 3)(data.clone())), expected)
        expected = torch.tensor([[0.26410896, 0.31715372, 0.31831381], [0.46856445, 0.44239590, 0.33758992]])
        torch.testing.assert_close(_hidden0(BurnInTransform([_gru()], 2)(data)), expected)

    def test_lstm_refreshes_both_states(self):
        torch.manual_seed(0)
        lstm = LSTMModule(input_size=2, hidden_size=3, in_keys=["observation", "h", "c"],
                          out_keys=["intermediate", ("next", "h"), ("next", "c")], default_recurrent_mode=True)
        t = BurnInTransform([lstm], burn_in=3)
        assert t.out_keys == ["h", "c"] and t.in_keys == ["observation", "h", "c", "is_init"]
        data = TensorDict(observation=torch.randn(2, 5, 2), h=torch.zeros(2, 5, 1, 3), c=torch.zeros(2, 5, 1, 3),
                          is_init=torch.zeros(2, 5, 1, dtype=torch.bool), batch_size=[2, 5])
        out = t(data)
        manual = lstm(data[:, :3].copy())
        torch.testing.assert_close(out["h"][:, 0], manual["next", "h"][:, -1])
        torch.testing.assert_close(out["c"][:, 0], manual["next", "c"][:, -1])
        assert out.shape == (2, 2) and (out["h"][:, 1] == 0).all()

    def test_no_grad_and_input_untouched(self):
        data = _sequences()
        before = data["hidden"].clone()
        out = BurnInTransform([_gru(True)], 2)(data)
        assert not out["hidden"].requires_grad
        assert (data["hidden"] == before).all() and data.shape == (2, 5)

    def test_out_keys_and_attributes(self):
        gru = _gru()
        t = BurnInTransform(gru, burn_in=2)  # one module is accepted as is
        assert t.in_keys == ["observation", "hidden", "is_init"] and t.out_keys == ["hidden"] and t.burn_in == 2
        assert list(t.state_dict()) == []  # the modules are used, not owned
        assert BurnInTransform([gru], 2, out_keys=["hidden"]).out_keys == ["hidden"]

    def test_burn_in_zero_and_single_sequence(self):
        data = _sequences()
        assert BurnInTransform([_gru()], 0)(data) is data
        out = BurnInTransform([_gru()], 2)(_sequences()[0])  # a single [T] sequence (TorchRL needs [B, T])
        assert out.shape == (3,)
        torch.testing.assert_close(out["hidden"][0, 0], torch.tensor([0.39544716, 0.47799844, 0.49597687]))

    def test_replay_buffer_transform(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=BurnInTransform([_gru()], 2), batch_size=2)
        rb.extend(_sequences())
        assert rb.sample().shape == (2, 3)
        t = BurnInTransform([_gru()], 2)
        assert t.inv(_sequences()).shape == (2, 5)  # writes pass through

    def test_env_builds_but_refuses_to_run(self):
        env = TransformedEnv(PendulumEnv(), BurnInTransform([_gru()], 2))  # as in TorchRL
        with pytest.raises(RuntimeError, match=_REFUSED):
            env.rollout(2)

    def test_errors(self):
        for bad in (-1, 1.5, True):
            with pytest.raises(ValueError, match="burn_in must be a non-negative int"):
                BurnInTransform([_gru()], bad)
        with pytest.raises(ValueError, match="modules must be a non-empty sequence of TensorDict modules"):
            BurnInTransform([torch.nn.Linear(2, 2)], 2)
        with pytest.raises(ValueError, match="modules must be a non-empty sequence"):
            BurnInTransform([], 2)
        with pytest.raises(IndexError, match="the sequences have 2 steps, which leaves none after a burn-in of 2"):
            BurnInTransform([_gru()], 2)(_sequences()[:, :2])
        with pytest.raises(ValueError, match="need a time dimension"):
            BurnInTransform([_gru()], 2)(_sequences()[0, 0])
        with pytest.raises(KeyError, match=r"the modules wrote no \('next', 'memory'\) entry"):
            BurnInTransform([_gru()], 2, out_keys=["memory"])(_sequences())

    def test_docstring_examples(self):
        assert doctest.testmod(module, raise_on_error=True).attempted > 0
