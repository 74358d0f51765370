"""``Evaluator``: episode metrics (known answers on the counting env), weights, background runs, errors."""
from __future__ import annotations

import threading

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl._utils._exploration import ExplorationType, exploration_type
from torchrl.collectors import Evaluator
from torchrl.envs import PendulumEnv
from torchrl.testing import CountingEnv, CountingEnvCountPolicy


class RewardingCountingEnv(CountingEnv):
    """The counting env with reward 1 per step: an episode's return is its length."""

    def _step(self, tensordict):
        out = super()._step(tensordict)
        out.set("reward", torch.ones_like(out.get("reward")))
        return out


def counting_evaluator(**kwargs) -> Evaluator:
    env = RewardingCountingEnv(max_steps=3)
    return Evaluator(env, CountingEnvCountPolicy(env.action_spec), frames_per_batch=6, **kwargs)


def test_episode_metrics_known_answer():
    evaluator = counting_evaluator(num_trajectories=3)
    result = evaluator.evaluate(step=7)
    # Python numbers, as TorchRL returns them (and .item() works too, as TorchRL's docs use it)
    assert list(result) == ["eval/reward", "eval/reward_std", "eval/num_episodes", "eval/episode_length",
                            "eval/fps", "eval/step"]
    assert result == {"eval/reward": 4.0, "eval/reward_std": 0.0, "eval/num_episodes": 3,
                      "eval/episode_length": 4.0, "eval/fps": result["eval/fps"], "eval/step": 7}
    assert isinstance(result["eval/reward"], float) and isinstance(result["eval/num_episodes"], int)
    assert result["eval/num_episodes"].item() == 3 and result["eval/fps"] > 0
    second = evaluator.evaluate()
    assert second["eval/step"].item() == 1 and evaluator.num_evals == 2
    assert evaluator.state_dict()["num_evals"] == 2
    evaluator.shutdown()


def test_max_steps_truncates_and_prefix_and_metrics_fn():
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    evaluator = Evaluator(PendulumEnv, policy, num_trajectories=2, max_steps=5, log_prefix="test",
                          metrics_fn=lambda data: {"frames": torch.tensor(data.numel())})
    result = evaluator.evaluate()
    assert result["test/episode_length"].item() == 5.0 and result["test/num_episodes"].item() == 2
    assert result["test/frames"].item() == 10
    evaluator.shutdown()


def test_weights_are_copied_into_the_evaluation_policy():
    module = nn.Linear(3, 1)
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action"])
    seen = []
    evaluator = Evaluator(PendulumEnv, policy, num_trajectories=1, max_steps=2,
                          metrics_fn=lambda data: seen.append(data["action"].clone()) or {})
    trained = nn.Linear(3, 1)
    with torch.no_grad():
        trained.weight.zero_()
        trained.bias.fill_(0.5)
    evaluator.evaluate(TensorDictModule(trained, in_keys=["observation"], out_keys=["action"]))
    assert (seen[-1] == 0.5).all() and module.bias.item() == 0.5
    evaluator.shutdown()


def test_background_evaluation_poll_wait_and_callback():
    results = []
    evaluator = counting_evaluator(num_trajectories=2, on_result=results.append)
    assert evaluator.trigger_eval(step=3)
    result = evaluator.wait(timeout=60)
    assert result["eval/step"].item() == 3 and results == [result]
    assert evaluator.poll() is None and not evaluator.pending
    evaluator.shutdown()


class BlockingEnv(RewardingCountingEnv):
    gate = threading.Event()

    def _step(self, tensordict):
        BlockingEnv.gate.wait(30)
        return super()._step(tensordict)


def test_busy_policies():
    env = BlockingEnv(max_steps=3)
    BlockingEnv.gate.clear()
    evaluator = Evaluator(env, CountingEnvCountPolicy(env.action_spec), num_trajectories=1, frames_per_batch=4)
    assert evaluator.trigger_eval() and evaluator.pending
    assert evaluator.trigger_eval() is False and evaluator.poll() is None
    evaluator.busy_policy = "error"
    with pytest.raises(RuntimeError, match="an evaluation is already running"):
        evaluator.trigger_eval()
    BlockingEnv.gate.set()
    assert evaluator.wait(30)["eval/num_episodes"].item() == 1
    evaluator.shutdown()


def test_background_errors_are_raised_on_wait():
    class Broken(RewardingCountingEnv):
        def _step(self, tensordict):
            raise ZeroDivisionError("broken env")

    env = Broken()
    evaluator = Evaluator(env, CountingEnvCountPolicy(env.action_spec), num_trajectories=1, frames_per_batch=4)
    evaluator.trigger_eval()
    with pytest.raises(RuntimeError, match="background evaluation failed: ZeroDivisionError: broken env"):
        evaluator.wait(30)
    evaluator.shutdown()


def test_exploration_type_is_local_to_the_evaluation_thread():
    seen = []

    def policy(td):
        seen.append(exploration_type())
        return td.set("action", torch.zeros(1))

    evaluator = Evaluator(PendulumEnv, policy, num_trajectories=1, max_steps=2)
    evaluator.trigger_eval()
    evaluator.wait(30)
    assert set(seen) == {ExplorationType.DETERMINISTIC} and exploration_type() is None
    evaluator.shutdown()


def test_invalid_options():
    with pytest.raises(ValueError, match="backend='ray' is not supported by this implementation; use 'thread' or 'process'"):
        Evaluator(PendulumEnv, None, backend="ray")
    with pytest.raises(ValueError, match="busy_policy must be one of"):
        Evaluator(PendulumEnv, None, busy_policy="drop")
    with pytest.raises(ValueError, match="num_trajectories must be >= 1"):
        Evaluator(PendulumEnv, None, num_trajectories=0)
    with pytest.raises(KeyError, match="unknown model ids \\['critic'\\]"):
        Evaluator(PendulumEnv, None).evaluate(weights_dict={"critic": None})
    weights = Evaluator.extract_weights(nn.Linear(2, 1))
    assert set(weights.keys()) == {"weight", "bias"} and not weights["weight"].requires_grad


def test_policy_factory_receives_the_env():
    # TorchRL's policy factories are (env) -> policy; a factory without arguments is called without
    seen = []

    def factory(env):
        seen.append(type(env).__name__)
        return CountingEnvCountPolicy(env.action_spec)

    for make in (factory, lambda: CountingEnvCountPolicy(RewardingCountingEnv().action_spec)):
        evaluator = Evaluator(lambda: RewardingCountingEnv(max_steps=3), policy_factory=make, num_trajectories=1,
                              frames_per_batch=4)
        assert evaluator.evaluate()["eval/reward"] == 4.0
        evaluator.shutdown()
    assert seen == ["RewardingCountingEnv"]


def _counting_env():
    return RewardingCountingEnv(max_steps=3)


def _count_policy(env):
    return CountingEnvCountPolicy(env.action_spec)


class TestProcessBackend:
    def test_evaluate_trigger_and_wait(self):
        results = []
        evaluator = Evaluator(_counting_env, policy_factory=_count_policy, num_trajectories=2, frames_per_batch=4,
                              backend="process", on_result=results.append)
        first = evaluator.evaluate(step=3)
        assert first["eval/reward"] == 4.0 and first["eval/num_episodes"] == 2 and first["eval/step"] == 3
        assert evaluator.trigger_eval(step=9) is True
        second = evaluator.wait(60)
        assert second["eval/step"] == 9 and results == [first, second] and evaluator.num_evals == 2
        assert evaluator.poll() is None and not evaluator.pending
        evaluator.shutdown()

    def test_weights_reach_the_worker(self):
        policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        evaluator = Evaluator(PendulumEnv, policy, num_trajectories=1, max_steps=3, backend="process",
                              metrics_fn=_mean_action)
        trained = nn.Linear(3, 1)
        with torch.no_grad():
            trained.weight.zero_()
            trained.bias.fill_(0.25)
        result = evaluator.evaluate(TensorDictModule(trained, in_keys=["observation"], out_keys=["action"]))
        assert result["eval/mean_action"] == pytest.approx(0.25)
        evaluator.shutdown()

    def test_worker_errors_come_back_with_their_traceback(self):
        evaluator = Evaluator(_broken_env, policy_factory=_count_policy, num_trajectories=1, frames_per_batch=4,
                              backend="process")
        with pytest.raises(RuntimeError, match="(?s)ZeroDivisionError: broken env.*traceback"):
            evaluator.evaluate()
        evaluator.shutdown()


def _mean_action(data):
    return {"mean_action": data["action"].mean().item()}


class _BrokenEnv(RewardingCountingEnv):
    def _step(self, tensordict):
        raise ZeroDivisionError("broken env")


def _broken_env():
    return _BrokenEnv()
