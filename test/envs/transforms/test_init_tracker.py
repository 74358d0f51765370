"""InitTracker's keys, as TorchRL 0.14.1."""
import pytest

from torchrl.envs import InitTracker, PendulumEnv, TransformedEnv


def test_out_keys_need_a_parent_env():
    t = InitTracker()
    assert t.init_key == "is_init" and t.in_keys == []
    with pytest.raises(NotImplementedError, match="InitTracker.out_keys: the transform has no parent env"):
        t.out_keys
    TransformedEnv(PendulumEnv(), t)
    assert t.out_keys == ["is_init"]
