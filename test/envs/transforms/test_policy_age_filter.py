import doctest
import logging

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import (
    LazyStackStorage,
    LazyTensorStorage,
    ReplayBuffer,
    TensorDictReplayBuffer,
)
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import PolicyAgeFilter
from torchrl.envs.transforms import _policy_age_filter as module


def data(versions, batch=None):
    versions = torch.as_tensor(versions)
    n = versions.shape[0]
    return TensorDict(obs=torch.arange(float(n)), policy_version=versions, batch_size=[n] if batch is None else batch)


class TestPolicyAgeFilter(TransformContract):
    def make_transform(self):
        return PolicyAgeFilter(0, max_policy_lag=0)

    def replay_buffer_data(self):
        out = super().replay_buffer_data()
        out.set("policy_version", torch.zeros(out.shape, dtype=torch.long))
        return out

    def test_known_answers(self):
        # TorchRL 0.14.1 keeps obs [1, 2, 3] here, forward and inverse alike
        t = PolicyAgeFilter(3, max_policy_lag=1)
        out = t(data([0, 2, 2, 3]))
        assert out.batch_size == (3,) and out["obs"].tolist() == [1.0, 2.0, 3.0]
        out = t.inv(data([0, 2, 2, 3]))
        assert out["obs"].tolist() == [1.0, 2.0, 3.0]
        assert PolicyAgeFilter(3, max_policy_lag=0)(data([0, 2, 2, 3]))["obs"].tolist() == [3.0]
        assert PolicyAgeFilter(3, max_policy_lag=3)(data([0, 2, 2, 3]))["obs"].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert PolicyAgeFilter(3, max_policy_lag=0)(data([1, 1])).batch_size == (0,)

    def test_callable_version_read_each_pass(self):
        version = [2]
        t = PolicyAgeFilter(lambda: version[0], max_policy_lag=1)
        assert t(data([0, 1, 2]))["obs"].tolist() == [1.0, 2.0]
        version[0] = 3
        assert t(data([0, 1, 2]))["obs"].tolist() == [2.0]
        t = PolicyAgeFilter(lambda: torch.tensor(2), max_policy_lag=0)
        assert t(data([0, 1, 2]))["obs"].tolist() == [2.0]

    def test_multi_dim_versions(self):
        # an element is dropped when any of its versions is stale (TorchRL keeps row 1 only here)
        td = TensorDict(obs=torch.arange(4.0).view(2, 2), policy_version=torch.tensor([[0, 3], [3, 3]]), batch_size=[2, 2])
        out = PolicyAgeFilter(3, max_policy_lag=1)(td)
        assert out.batch_size == (1, 2) and out["obs"].tolist() == [[2.0, 3.0]]
        col = data(torch.tensor([[0], [2], [2], [3]]))
        assert PolicyAgeFilter(3, max_policy_lag=1)(col)["obs"].tolist() == [1.0, 2.0, 3.0]

    def test_no_batch_dim_passes(self):
        td = TensorDict(obs=torch.zeros(3), policy_version=torch.tensor(0))
        assert PolicyAgeFilter(3, max_policy_lag=1)(td) is td

    def test_nested_key(self):
        t = PolicyAgeFilter(3, max_policy_lag=0, policy_version_key=("meta", "v"))
        td = TensorDict(obs=torch.arange(3.0), meta=TensorDict(v=torch.tensor([3, 2, 3]), batch_size=[3]), batch_size=[3])
        assert t(td)["obs"].tolist() == [0.0, 2.0]

    def test_missing_key(self, caplog):
        td = TensorDict(obs=torch.arange(4.0), batch_size=[4])
        t = PolicyAgeFilter(3, max_policy_lag=1)
        with caplog.at_level(logging.WARNING):
            assert t(td) is td and t(td) is td
        assert sum("policy_version" in r.getMessage() for r in caplog.records) == 1  # warned once
        with pytest.raises(KeyError, match="'policy_version' not found.*strict=True"):
            PolicyAgeFilter(3, max_policy_lag=1, strict=True)(td)

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="max_policy_lag must be non-negative, got -1"):
            PolicyAgeFilter(3, max_policy_lag=-1)
        with pytest.raises(ValueError, match="current_version must be an int or a callable"):
            PolicyAgeFilter("a", max_policy_lag=1)

    def test_replay_buffer_both_paths(self):
        version = [3]
        rb = ReplayBuffer(storage=LazyStackStorage(100), transform=PolicyAgeFilter(lambda: version[0], max_policy_lag=1))
        rb.extend(data([0, 2, 2, 3]))
        assert len(rb) == 3  # version 0 never stored
        version[0] = 4
        torch.manual_seed(0)
        sample = rb.sample(10)
        assert 0 < sample.shape[0] < 10 and sample["policy_version"].unique().tolist() == [3]
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        rb.append_transform(PolicyAgeFilter(3, max_policy_lag=0))
        rb.extend(data([3, 1, 3]))
        assert len(rb) == 2

    def test_lazy_stacked(self):
        td = LazyStackedTensorDict(*data([0, 3, 3]).unbind(0), stack_dim=0)
        assert PolicyAgeFilter(3, max_policy_lag=0)(td)["obs"].tolist() == [1.0, 2.0]

    def test_env_no_op(self):
        # an env's outputs come from the live policy: nothing is filtered, even stamped stale data
        env = TransformedEnv(PendulumEnv(seed=0), PolicyAgeFilter(10, max_policy_lag=0))
        base = PendulumEnv(seed=0)
        torch.manual_seed(0)
        a = env.rollout(3)
        torch.manual_seed(0)
        b = base.rollout(3)
        torch.testing.assert_close(a, b)
        td = env.reset().set("action", torch.zeros(1)).set("policy_version", torch.zeros((), dtype=torch.long))
        assert env.transform.inv(td)["policy_version"].item() == 0
        assert env.step(td)["next", "th"].shape == ()

    def test_repr(self):
        assert repr(PolicyAgeFilter(3, max_policy_lag=1)) == (
            "PolicyAgeFilter(current_version=3, max_policy_lag=1, policy_version_key='policy_version', strict=False)"
        )


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
