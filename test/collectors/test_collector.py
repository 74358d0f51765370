"""``Collector``: batch layout, trajectory bookkeeping, resets, options, state and errors (known answers
from the deterministic counting env: its counter rises by the action, and an episode ends past max_steps)."""
from __future__ import annotations

import json
import warnings

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from torchrl._utils._exploration import ExplorationType, exploration_type
from torchrl.collectors import BaseCollector, Collector, RandomPolicy, SyncDataCollector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import PendulumEnv, SerialEnv, StepCounter, TransformedEnv
from torchrl.envs.utils import RandomPolicy as EnvRandomPolicy
from torchrl.modules import QValueActor
from torchrl.modules.tensordict_module import GRUModule
from torchrl.testing import CountingEnv, CountingEnvCountPolicy, DiscreteActionVecMockEnv


def count_policy(env):
    return CountingEnvCountPolicy(env.action_spec, env.action_key)


def linear_policy(bias: float = 0.0) -> TensorDictModule:
    module = nn.Linear(3, 1)
    with torch.no_grad():
        module.weight.zero_()
        module.bias.fill_(bias)
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


def counting(max_steps=3, **kwargs) -> Collector:
    env = CountingEnv(max_steps=max_steps)
    return Collector(env, count_policy(env), **kwargs)


# -- layout and trajectory bookkeeping ---------------------------------------------------------------------
def test_counting_env_known_answer_across_batches():
    collector = counting(frames_per_batch=10, total_frames=20)
    first, second = list(collector)
    assert first.batch_size == torch.Size([10])
    assert first["observation"].squeeze(-1).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert first["next", "observation"].squeeze(-1).tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    assert first["collector", "traj_ids"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert second["collector", "traj_ids"].tolist() == [2, 2, 3, 3, 3, 3, 4, 4, 4, 4]
    assert second["next", "done"].squeeze(-1).tolist() == [False, True, False, False, False, True, False, False, False, True]
    assert first["collector", "traj_ids"].dtype == torch.int64


def test_batched_env_layout_is_env_batch_then_time():
    env = CountingEnv(max_steps=3, batch_size=[2])
    collector = Collector(env, count_policy(env), frames_per_batch=12, total_frames=12)
    batch = collector.rollout()
    assert batch.batch_size == torch.Size([2, 6])
    assert batch["collector", "traj_ids"].tolist() == [[0, 0, 0, 0, 2, 2], [1, 1, 1, 1, 3, 3]]
    assert batch["next", "observation"].shape == torch.Size([2, 6, 1])


class AlternatingPolicy:
    """Env 0 plays 1 every step, env 1 every other step: env 0 finishes first."""

    def __init__(self):
        self.t = 0

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        td.set("action", torch.tensor([[1], [self.t % 2]], dtype=torch.int8))
        self.t += 1
        return td


def test_only_finished_envs_are_reset():
    env = CountingEnv(max_steps=3, batch_size=[2])
    collector = Collector(env, AlternatingPolicy(), frames_per_batch=20, total_frames=20)
    batch = collector.rollout()
    assert batch["observation"][0].squeeze(-1).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    # env 1 keeps counting while env 0 restarts at t=4 (a full reset would send it back to 0 there)
    assert batch["observation"][1].squeeze(-1).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0]
    # both end at t=7: new ids in env order
    assert batch["collector", "traj_ids"][0].tolist() == [0] * 4 + [2] * 4 + [3] * 2
    assert batch["collector", "traj_ids"][1].tolist() == [1] * 8 + [4] * 2


def test_max_frames_per_traj_truncates():
    collector = Collector(PendulumEnv(), linear_policy(), frames_per_batch=12, total_frames=12, max_frames_per_traj=5)
    batch = collector.rollout()
    assert batch["collector", "traj_ids"].tolist() == [0] * 5 + [1] * 5 + [2] * 2
    assert batch["next", "truncated"].squeeze(-1).nonzero().squeeze(-1).tolist() == [4, 9]
    assert batch["next", "done"].squeeze(-1).nonzero().squeeze(-1).tolist() == [4, 9]
    assert batch["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]


def test_split_trajs_padded_with_mask():
    collector = counting(frames_per_batch=10, total_frames=10, split_trajs=True)
    batch = next(iter(collector))
    assert batch.batch_size == torch.Size([3, 4])
    assert batch["collector", "mask"].sum(-1).tolist() == [4, 4, 2]
    assert batch["next", "observation"][2].squeeze(-1).tolist() == [1, 2, 0, 0]


def test_track_traj_ids_off():
    collector = counting(frames_per_batch=6, total_frames=6, track_traj_ids=False)
    batch = collector.rollout()
    assert "collector" not in batch.keys()


def test_reset_when_done_off_raises_as_torchrl():
    with pytest.raises(ValueError, match="reset_when_done is deprecated"):
        counting(frames_per_batch=6, total_frames=6, reset_when_done=False)


def test_set_truncated_marks_last_step_and_restarts():
    env = CountingEnv(max_steps=100).add_truncated_keys()
    collector = Collector(env, count_policy(env), frames_per_batch=4, total_frames=8, set_truncated=True)
    first, second = list(collector)
    assert first["next", "truncated"].squeeze(-1).tolist() == [False, False, False, True]
    assert first["next", "done"].squeeze(-1).tolist() == [False, False, False, True]
    assert first["next", "terminated"].squeeze(-1).tolist() == [False] * 4
    assert second["observation"].squeeze(-1).tolist() == [0, 1, 2, 3]
    assert second["collector", "traj_ids"].tolist() == [1] * 4


def test_set_truncated_needs_a_truncated_entry():
    with pytest.raises(RuntimeError, match="no 'truncated' entry next to \\['done'\\]"):
        counting(frames_per_batch=4, set_truncated=True)


def test_reset_at_each_iter():
    collector = counting(max_steps=100, frames_per_batch=3, total_frames=9, reset_at_each_iter=True)
    batches = list(collector)
    assert [b["observation"].squeeze(-1).tolist() for b in batches] == [[0, 1, 2]] * 3
    # as TorchRL: the env's first reset is trajectory 0, and every batch starts a new one
    assert [b["collector", "traj_ids"].tolist() for b in batches] == [[1] * 3, [2] * 3, [3] * 3]


def test_frames_not_divisible_by_env_batch_round_up():
    env = CountingEnv(batch_size=[3])
    with pytest.warns(UserWarning, match="frames_per_batch=10 is not a multiple of the env's batch numel 3; each batch will hold 12"):
        collector = Collector(env, count_policy(env), frames_per_batch=10, total_frames=10)
    assert collector.rollout().batch_size == torch.Size([3, 4])


# -- iteration protocol ----------------------------------------------------------------------------------------
def test_total_frames_length_and_next():
    with pytest.warns(UserWarning, match="total_frames=25 is not a multiple of frames_per_batch=10; collecting 30"):
        collector = counting(frames_per_batch=10, total_frames=25)
    assert len(collector) == 3
    assert isinstance(collector, BaseCollector)
    assert [b.numel() for b in collector] == [10, 10, 10]
    collector2 = counting(frames_per_batch=5, total_frames=10)
    assert collector2.next().numel() == 5 and collector2.next().numel() == 5 and collector2.next() is None
    endless = counting(frames_per_batch=5)
    with pytest.raises(RuntimeError, match="runs forever"):
        len(endless)
    assert endless.rollout().numel() == 5


def test_invalid_frames_per_batch():
    with pytest.raises(ValueError, match="frames_per_batch must be a positive int, got 0"):
        counting(frames_per_batch=0)


def test_replay_buffer_receives_batches_and_none_is_delivered():
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = counting(frames_per_batch=10, total_frames=30, replay_buffer=rb)
    assert list(collector) == [None, None, None]
    assert len(rb) == 30
    assert rb[:10]["collector", "traj_ids"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]


def test_replay_buffer_with_batched_env_is_flattened():
    env = CountingEnv(batch_size=[2])
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = Collector(env, count_policy(env), frames_per_batch=10, total_frames=10, replay_buffer=rb)
    list(collector)
    assert len(rb) == 10


def test_return_same_td():
    collector = counting(frames_per_batch=4, total_frames=12, return_same_td=True)
    seen = [(b, b["next", "observation"].squeeze(-1).tolist()) for b in collector]
    assert seen[0][0] is seen[1][0] is seen[2][0]
    assert [obs for _, obs in seen] == [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]]
    fresh = counting(frames_per_batch=4, total_frames=8)
    a, b = list(fresh)
    assert a is not b


def test_postproc_and_hooks():
    calls = []
    collector = counting(
        frames_per_batch=4, total_frames=8,
        postproc=lambda td: td.set("extra", torch.ones(td.shape)),
        pre_collect_hook=lambda: calls.append("pre"),
        post_collect_hook=lambda td: calls.append(("post", "extra" in td.keys())),
    )
    assert all("extra" in b.keys() for b in collector)
    assert calls == ["pre", ("post", True), "pre", ("post", True)]
    collector.set_post_collect_hook(None)
    assert collector.post_collect_hook is None


# -- policies -----------------------------------------------------------------------------------------------------
def test_random_actions_without_policy_and_exports():
    assert RandomPolicy is EnvRandomPolicy
    collector = Collector(PendulumEnv(), None, frames_per_batch=50, total_frames=50)
    action = collector.rollout()["action"]
    assert action.abs().max() <= 2.0 and action.std() > 0


def test_exploration_type_during_collection():
    seen = []

    def policy(td):
        seen.append(exploration_type())
        return td.set("action", torch.zeros(1))

    Collector(PendulumEnv(), policy, frames_per_batch=2, total_frames=2).rollout()
    Collector(PendulumEnv(), policy, frames_per_batch=2, total_frames=2, exploration_type=ExplorationType.DETERMINISTIC).rollout()
    assert seen == [ExplorationType.RANDOM] * 2 + [ExplorationType.DETERMINISTIC] * 2
    assert exploration_type() is None


def test_policy_runs_without_grad():
    grads = []

    def policy(td):
        grads.append(torch.is_grad_enabled())
        return td.set("action", torch.zeros(1))

    Collector(PendulumEnv(), policy, frames_per_batch=3, total_frames=3).rollout()
    assert grads == [False] * 3


def test_init_random_frames_rounded_to_batches():
    calls = []
    policy = linear_policy(0.5)
    policy.register_forward_hook(lambda *args: calls.append(1))
    collector = Collector(PendulumEnv(), policy, frames_per_batch=10, total_frames=30, init_random_frames=15)
    assert collector.init_random_frames == 20
    batches = list(collector)
    assert len(calls) == 11  # the 10 steps of the last batch, and one call that finds the policy's outputs
    assert (batches[2]["action"] == 0.5).all() and not (batches[0]["action"] == 0.5).all()


def test_random_phase_batches_carry_the_policy_outputs_zero_filled():
    # TorchRL yields the same keys in every batch: an off-policy loop extends one tensor storage with all of them
    net = TensorDictModule(nn.Linear(3, 2), ["observation"], ["hidden"])
    head = TensorDictModule(lambda h: (h[..., :1].tanh(), h[..., 1:]), ["hidden"], ["action", ("extra", "logp")])
    policy = TensorDictSequential(net, head)
    env = PendulumEnv(batch_size=[2])
    collector = Collector(env, policy, frames_per_batch=6, total_frames=18, init_random_frames=6)
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    batches = []
    for batch in collector:
        rb.extend(batch.reshape(-1))
        batches.append(batch)
    keys = [set(b.keys(True, True)) for b in batches]
    assert keys[0] == keys[1] == keys[2] and {"hidden", ("extra", "logp")} <= keys[0]
    assert batches[0]["hidden"].shape == (2, 3, 2) and batches[0][("extra", "logp")].shape == (2, 3, 1)
    assert (batches[0]["hidden"] == 0).all() and (batches[0][("extra", "logp")] == 0).all()
    assert (batches[1]["hidden"] != 0).any()
    assert len(rb) == 18


def test_random_phase_actions_take_the_policy_dtype():
    # a Q-value policy writes int64 one-hot actions on a bool one-hot spec: TorchRL's random-phase batches
    # carry int64 actions too, so that one tensor storage holds every batch
    env = DiscreteActionVecMockEnv()
    spec = env.action_spec
    assert spec.dtype == torch.bool
    actor = QValueActor(nn.Linear(env.observation_spec["observation"].shape[-1], spec.shape[-1]),
                        in_keys=["observation"], spec=spec)
    collector = Collector(env, actor, frames_per_batch=5, total_frames=15, init_random_frames=5)
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    dtypes = []
    for batch in collector:
        dtypes.append(batch["action"].dtype)
        rb.extend(batch)
    assert dtypes == [torch.long] * 3 and len(rb) == 15
    assert (rb[:5]["action"].sum(-1) == 1).all()  # still valid one-hot actions


def test_plain_modules_are_wrapped():
    class Named(nn.Module):
        def forward(self, observation):
            return observation[..., :1] * 0

    for module in (nn.Linear(3, 1), Named()):
        batch = Collector(PendulumEnv(), module, frames_per_batch=3, total_frames=3).rollout()
        assert batch["action"].shape == torch.Size([3, 1])

    class TwoInputs(nn.Module):
        def forward(self, a, b):
            return a

    env = TransformedEnv(PendulumEnv(), StepCounter())
    with pytest.raises(TypeError, match=r"cannot tell which observations TwoInputs.forward\('a', 'b'\) reads"):
        Collector(env, TwoInputs(), frames_per_batch=3)


def test_policy_and_policy_factory_are_exclusive():
    with pytest.raises(TypeError, match="either policy or policy_factory"):
        Collector(PendulumEnv(), linear_policy(), policy_factory=linear_policy, frames_per_batch=2)
    batch = Collector(PendulumEnv(), policy_factory=lambda: linear_policy(0.25), frames_per_batch=2).rollout()
    assert (batch["action"] == 0.25).all()


def test_recurrent_policy_gets_primers_and_keeps_its_state():
    gru = GRUModule(input_size=3, hidden_size=4, in_key="observation", out_key="features")
    policy = TensorDictSequential(gru, TensorDictModule(nn.Linear(4, 1), ["features"], ["action"]))
    collector = Collector(PendulumEnv(), policy, frames_per_batch=6, total_frames=6, max_frames_per_traj=3)
    batch = collector.rollout()
    assert batch["is_init"].squeeze(-1).tolist() == [True, False, False, True, False, False]
    state, next_state = batch["recurrent_state"], batch["next", "recurrent_state"]
    assert torch.equal(state[1:3], next_state[0:2]) and torch.equal(state[4:6], next_state[3:5])
    assert (state[0] == 0).all() and (state[3] == 0).all() and (next_state[0] != 0).any()


def test_update_policy_weights_changes_actions():
    policy = linear_policy(0.0)
    collector = Collector(PendulumEnv(), policy, frames_per_batch=4, total_frames=8)
    assert (collector.rollout()["action"] == 0).all()
    collector.update_policy_weights_(linear_policy(0.75))
    assert (collector.rollout()["action"] == 0.75).all()
    assert policy.module.bias.item() == 0.75 and collector.policy_version == 1
    with pytest.raises(KeyError, match="unknown model_id 'critic'"):
        collector.update_policy_weights_(model_id="critic")
    no_weights = Collector(PendulumEnv(), None, frames_per_batch=2)
    with pytest.raises(ValueError, match="no weights to update"):
        no_weights.update_policy_weights_(linear_policy())


# -- control, state and data without stepping -------------------------------------------------------------------
def test_state_dict_resumes_where_it_stopped():
    collector = counting(frames_per_batch=10, total_frames=50)
    it = iter(collector)
    next(it), next(it)
    state = collector.state_dict()
    assert state["frames"] == 20 and state["iter"] == 1
    resumed = counting(frames_per_batch=10, total_frames=50)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == 3
    assert rest[0]["collector", "traj_ids"].min() >= 5


def test_set_seed_makes_collection_reproducible():
    def run(seed):
        collector = Collector(PendulumEnv(), linear_policy(0.1), frames_per_batch=20, total_frames=40)
        assert collector.set_seed(seed) == collector.set_seed(seed)
        return torch.cat([b["observation"] for b in collector])

    assert torch.equal(run(3), run(3)) and not torch.equal(run(3), run(4))


def test_reset_selected_envs():
    env = CountingEnv(max_steps=100, batch_size=[3])
    collector = Collector(env, count_policy(env), frames_per_batch=6, total_frames=12)
    collector.rollout()
    collector.reset(torch.tensor([False, True, False]))
    batch = collector.rollout()
    assert batch["observation"][:, 0].squeeze(-1).tolist() == [2, 0, 2]
    assert batch["collector", "traj_ids"][:, 0].tolist() == [0, 3, 2]
    collector.reset([0])
    assert collector.rollout()["observation"][:, 0].squeeze(-1).tolist() == [0, 2, 4]


class StepCountingEnv(CountingEnv):
    steps = 0

    def _step(self, tensordict):
        StepCountingEnv.steps += 1
        return super()._step(tensordict)


def test_fake_tensordict_matches_a_real_batch_without_stepping():
    gru = GRUModule(input_size=3, hidden_size=4, in_key="observation", out_key="features")
    policy = TensorDictSequential(gru, TensorDictModule(nn.Linear(4, 1), ["features"], ["action"]))
    collector = Collector(PendulumEnv(batch_size=[2]), policy, frames_per_batch=8, max_frames_per_traj=3)
    fake = collector.fake_tensordict()
    real = collector.rollout()
    assert fake.batch_size == real.batch_size == torch.Size([2, 4])
    assert set(fake.keys(True, True)) == set(real.keys(True, True))
    for key in real.keys(True, True):
        assert fake[key].shape == real[key].shape and fake[key].dtype == real[key].dtype, key
    assert (fake["next", "observation"] == 0).all()
    env = StepCountingEnv()
    Collector(env, count_policy(env), frames_per_batch=5).fake_tensordict()
    assert StepCountingEnv.steps == 0


def test_background_collection_into_replay_buffer():
    rb = ReplayBuffer(storage=LazyTensorStorage(1000))
    collector = counting(frames_per_batch=10, total_frames=100, replay_buffer=rb)
    collector.start()
    with collector.pause():
        size = len(rb)
        assert len(rb) == size
    collector._bg_thread.join(30)
    assert not collector.is_running() and len(rb) == 100
    collector.async_shutdown()
    with pytest.raises(RuntimeError, match="has been shut down"):
        collector.rollout()
    with pytest.raises(RuntimeError, match="collects into a replay buffer"):
        counting(frames_per_batch=10).start()


def test_profiling_writes_a_trace(tmp_path):
    collector = counting(frames_per_batch=5, total_frames=20)
    collector.enable_profile(num_rollouts=2, warmup_rollouts=1, save_path=tmp_path / "trace_{worker_idx}.json")
    assert collector.profile_config.workers == [0]
    list(collector)
    trace = json.loads((tmp_path / "trace_0.json").read_text())
    assert "traceEvents" in trace
    collector.disable_profile()
    assert collector.profile_config is None


def test_storing_device_and_stats():
    collector = counting(frames_per_batch=5, total_frames=10, storing_device="cpu")
    batches = list(collector)
    assert all(b.device == torch.device("cpu") for b in batches)
    stats = collector.stats()
    assert stats["frames"] == 10 and stats["batches"] == 2


def test_shutdown_closes_only_owned_envs():
    env = CountingEnv()
    collector = Collector(env, count_policy(env), frames_per_batch=2)
    collector.shutdown()
    assert not env.is_closed
    owned = Collector(CountingEnv, None, frames_per_batch=2)
    owned.shutdown()
    assert owned.env.is_closed
    with Collector(CountingEnv, None, frames_per_batch=2) as ctx:
        ctx.rollout()
    assert ctx.env.is_closed


def test_attribute_helpers():
    collector = counting(frames_per_batch=2)
    assert collector.getattr_env("max_steps") == 3
    assert collector.get_model("policy") is collector.policy
    assert collector.cascade_execute("env.set_seed", 0) is not None
    assert collector.get_distant_attr("env.max_steps") == 3
    assert collector.map_fn("set_seed", [(1,), (2,)]) == [collector.env.set_seed(1), collector.env.set_seed(2)]
    with pytest.raises(KeyError, match="unknown model_id 'value'"):
        collector.get_model("value")


# -- errors and deprecations ------------------------------------------------------------------------------------------
def test_backend_whose_module_cannot_import(monkeypatch):
    from torchrl.collectors import _single

    monkeypatch.setitem(_single._PROVIDERS, "carrier", ("torchrl_no_such_module", "carriers need pigeons"))
    with pytest.raises(ValueError, match=r"backend='carrier' is not available: carriers need pigeons \(No module named"):
        Collector(PendulumEnv(), None, frames_per_batch=4, backend="carrier")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"backend": "nope"}, r"unknown backend 'nope'; the registered backends are \['direct', "),
        ({"trajs_per_write": 4}, "trajs_per_write=4: trajs_per_write is not supported"),
        ({"cudagraph_policy": True}, "cudagraph_policy=True: CUDA-graph policies are not supported"),
        ({"backend": "direct", "num_collectors": 2}, "backend='direct' runs one collector"),
    ],
)
def test_unsupported_options_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Collector(PendulumEnv(), None, frames_per_batch=2, **kwargs)


def test_bad_env_factories():
    with pytest.raises(TypeError, match="create_env_fn returned a int, not an EnvBase"):
        Collector(lambda: 3, None, frames_per_batch=2)
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['bogus'\\]"):
        Collector(PendulumEnv(), None, frames_per_batch=2, bogus=1)


def test_deprecated_alias_and_keyword():
    with pytest.warns(DeprecationWarning, match="SyncDataCollector is deprecated; use Collector instead"):
        collector = SyncDataCollector(PendulumEnv(), None, frames_per_batch=2, total_frames=2)
    assert isinstance(collector, Collector) and isinstance(collector, SyncDataCollector)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        old = Collector(PendulumEnv(), None, frames_per_batch=2, exploration_mode=ExplorationType.MODE)
    assert old.exploration_type == ExplorationType.MODE


def test_gym_seed_example_runs():
    pytest.importorskip("gymnasium")
    from torchrl.envs.libs.gym import GymEnv

    actor = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    collector = SyncDataCollector(create_env_fn=lambda: GymEnv("Pendulum-v1"), policy=actor, frames_per_batch=200, total_frames=1000)
    shapes = [batch.shape for batch in collector]
    collector.shutdown()
    assert shapes == [torch.Size([200])] * 5


def test_compile_policy_and_devices():
    collector = Collector(PendulumEnv(), linear_policy(0.5), frames_per_batch=3, total_frames=3,
                          compile_policy={"backend": "eager"}, device="cpu", trust_policy=True)
    batch = collector.rollout()
    assert (batch["action"] == 0.5).all() and batch.device == torch.device("cpu")
    assert collector.env.device == torch.device("cpu")


# -- complete-trajectory batches (trajs_per_batch) -----------------------------------------------------------
class TestTrajsPerBatch:
    """CountingEnv with the count policy: every episode is [0, 1, 2, 3] (done after the 4th step)."""

    def test_padded_batches_hold_whole_trajectories_across_internal_batches(self):
        collector = counting(max_steps=3, frames_per_batch=3, total_frames=30, trajs_per_batch=2, traj_format="padded")
        batches = list(collector)
        assert len(batches) == 3  # 30 frames: 7 complete episodes of 4 steps, delivered two at a time
        for batch in batches:
            assert batch.batch_size == (2, 4)
            assert batch["collector", "mask"].all()
            assert batch["observation"].squeeze(-1).tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
            assert batch["next", "done"].squeeze(-1)[:, -1].all() and not batch["next", "done"][:, :-1].any()
        ids = torch.cat([b["collector", "traj_ids"] for b in batches])
        assert ids[:, 0].tolist() == [0, 1, 2, 3, 4, 5] and (ids == ids[:, :1]).all()

    def test_padding_and_mask_for_unequal_lengths(self):
        env = SerialEnv(2, [lambda: CountingEnv(max_steps=1), lambda: CountingEnv(max_steps=3)])
        collector = Collector(env, count_policy(env), frames_per_batch=4, total_frames=-1, trajs_per_batch=3,
                              traj_format="padded")
        batch = next(iter(collector))
        collector.shutdown()
        lengths = batch["collector", "mask"].sum(-1).tolist()
        assert batch.batch_size == (3, max(lengths))
        for row, n in enumerate(lengths):
            assert batch["observation"][row, :n].squeeze(-1).tolist() == list(range(n))
            assert not batch["observation"][row, n:].any() and not batch["collector", "mask"][row, n:].any()
            assert batch["next", "done"][row, n - 1].all()
        assert sorted(lengths) == [2, 2, 4]

    def test_cat_format_is_flat(self):
        collector = counting(max_steps=3, frames_per_batch=5, total_frames=20, trajs_per_batch=2, traj_format="cat")
        batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([8]), torch.Size([8])]
        assert batches[0]["observation"].squeeze(-1).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
        assert ("collector", "mask") not in batches[0].keys(True)

    def test_replay_buffer_gets_each_complete_trajectory(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(100))
        collector = counting(max_steps=3, frames_per_batch=3, total_frames=15, trajs_per_batch=2,
                             traj_format="padded", replay_buffer=rb)
        assert list(collector) == [None] * 5  # one None per internal batch
        assert len(rb) == 12  # three complete episodes (15 frames collected: the fourth is unfinished)
        assert rb[:]["observation"].squeeze(-1).tolist() == [0, 1, 2, 3] * 3

    def test_options(self):
        with pytest.warns(FutureWarning, match="traj_format"):
            counting(frames_per_batch=3, trajs_per_batch=2)
        with pytest.raises(ValueError, match="traj_format must be 'padded' or 'cat', got 'foo'"):
            counting(frames_per_batch=3, trajs_per_batch=2, traj_format="foo")
        with pytest.raises(ValueError, match="needs track_traj_ids=True"):
            counting(frames_per_batch=3, trajs_per_batch=2, traj_format="cat", track_traj_ids=False)
        batch = counting(frames_per_batch=3, total_frames=3, trajs_per_batch=0).rollout()  # 0: disabled
        assert batch.batch_size == (3,)


def test_policy_returning_another_tensordict_is_merged():
    # as TorchRL: the policy's output joins the step's data
    env = CountingEnv(max_steps=10)
    collector = Collector(env, lambda td: TensorDict({"action": env.action_spec.one()}, []), frames_per_batch=3,
                          total_frames=3)
    batch = next(iter(collector))
    assert batch["observation"].squeeze(-1).tolist() == [0, 1, 2] and batch["action"].all()


# ------------------------------------------------------------------------------------------ the "time" name
@pytest.mark.parametrize("batch_size", [[], [3]])
def test_batches_name_their_time_dim(batch_size):
    collector = Collector(CountingEnv(max_steps=2, batch_size=batch_size), None, frames_per_batch=6, total_frames=12)
    batch = next(iter(collector))
    assert batch.names == [None] * len(batch_size) + ["time"]
    assert collector.rollout().names == batch.names
    collector.shutdown()


def test_split_and_padded_batches_keep_the_time_name_only_when_unsplit():
    # as TorchRL: split rows are not named; rows that needed no split or padding keep "time"
    collector = Collector(CountingEnv(max_steps=1, batch_size=[3]), CountingEnvCountPolicy(CountingEnv().action_spec),
                          frames_per_batch=12, total_frames=12, split_trajs=True)
    assert next(iter(collector)).names == [None, None]
    collector.shutdown()
    collector = Collector(CountingEnv(max_steps=100, batch_size=[3]), None, frames_per_batch=12, total_frames=12, split_trajs=True)
    assert next(iter(collector)).names == [None, "time"]
    collector.shutdown()
    collector = Collector(CountingEnv(max_steps=1), CountingEnvCountPolicy(CountingEnv().action_spec), frames_per_batch=4,
                          total_frames=-1, trajs_per_batch=2, traj_format="padded")
    assert next(iter(collector)).names == [None, "time"]  # every trajectory has the same length
    collector.shutdown()


# ------------------------------------------------------------------------------------ plain-function policies
def test_function_policy_arguments_as_torchrl():
    env = CountingEnv(max_steps=100)
    by_name = Collector(env, lambda observation: torch.ones_like(observation, dtype=torch.int8), frames_per_batch=3,
                        total_frames=3)
    assert next(iter(by_name))["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]
    by_name.shutdown()
    with pytest.raises(TypeError, match="Failed to wrap the policy"):
        Collector(CountingEnv(), lambda t: t.set("action", torch.ones(1, dtype=torch.int8)), frames_per_batch=3,
                  total_frames=3)
    trusted = Collector(CountingEnv(max_steps=100), lambda t: t.set("action", torch.ones(1, dtype=torch.int8)),
                        frames_per_batch=3, total_frames=3, trust_policy=True)
    assert next(iter(trusted))["action"].squeeze(-1).tolist() == [1, 1, 1]
    trusted.shutdown()


def test_a_registered_backend_is_built_by_collector():
    from torchrl.collectors import register_backend
    from torchrl.collectors._single import _BACKENDS

    seen = []

    def build(sync, args, kwargs):
        seen.append((sync, len(args[0]), kwargs.get("frames_per_batch"), kwargs.get("extra")))
        return "built"

    register_backend("test-only", build)
    try:
        out = Collector(PendulumEnv, None, frames_per_batch=2, backend="test-only", num_collectors=3,
                        backend_options={"extra": 1})
        assert out == "built" and seen == [(True, 3, 2, 1)]
    finally:
        del _BACKENDS["test-only"]
    with pytest.raises(ValueError, match="unknown backend 'test-only'"):
        Collector(PendulumEnv, None, frames_per_batch=2, backend="test-only")
