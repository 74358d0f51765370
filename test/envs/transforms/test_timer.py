import doctest
import time

import pytest
import torch

from torchrl.envs import PendulumEnv, SerialEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import Timer
from torchrl.envs.transforms import _timer as module

from test.envs.transforms.contract import TransformContract

TIME_KEYS = ("time_step", "time_policy", "time_reset")


class TestTimer(TransformContract):
    env_only = True

    def make_transform(self):
        return Timer()

    def test_contract_seeded_rollouts_match(self):
        # the times differ between runs; everything else must match
        def run():
            env = TransformedEnv(self.make_env(), self.make_transform())
            env.set_seed(0)
            torch.manual_seed(0)
            return env.rollout(self.steps, break_when_any_done=False)

        a, b = run(), run()
        a, b = a.exclude(*TIME_KEYS, *[("next", k) for k in TIME_KEYS]), b.exclude(*TIME_KEYS, *[("next", k) for k in TIME_KEYS])
        torch.testing.assert_close(a, b)

    def test_keys(self):
        t = Timer()
        assert t.in_keys == [] and t.out_keys == list(TIME_KEYS) and t.time_key == "time"
        assert Timer(time_key="t").out_keys == ["t_step", "t_policy", "t_reset"]
        with pytest.raises(TypeError, match="expected three out_keys"):
            Timer(out_keys=["a", "b"])

    def test_values_measure_time(self):
        class SlowEnv(PendulumEnv):
            def _step(self, td):
                time.sleep(0.02)
                return super()._step(td)

        env = TransformedEnv(SlowEnv(seed=0), Timer())
        assert env.observation_spec["time_step"].dtype == torch.float32
        td = env.reset()
        assert td["time_reset"].item() >= 0 and td["time_step"].item() == 0 and td["time_policy"].item() == 0
        time.sleep(0.03)  # the "policy"
        td["action"] = torch.zeros(1)
        out = env.step(td)["next"]
        assert 0.02 <= out["time_step"].item() < 1.0
        assert 0.03 <= out["time_policy"].item() < 1.0
        assert out["time_reset"].item() == 0.0

    def test_batched_specs(self):
        env = TransformedEnv(SerialEnv(2, lambda: PendulumEnv(seed=0)), Timer(out_keys=["a", "b", "c"]))
        try:
            assert {"a", "b", "c"} <= set(env.observation_spec.keys())
            assert env.observation_spec["a"].shape == (2,)
            check_env_specs(env, seed=0)
            assert env.rollout(2)["next", "a"].shape == (2, 2)
        finally:
            env.close(raise_if_closed=False)


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
