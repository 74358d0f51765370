"""Buffer-side transforms on multi-agent group trajectories: entries under ``"agents"`` of shape ``(T, 3, ...)``.

The trajectories are hand-built (``group_trajectory``) or rollouts of ``AgentsEnv``; each answer is computed
by hand per agent (n-step returns, rewards-to-go, burnt-in states, crops and frame stacks keep the agent dim).
``GroupBufferContract`` stores the data in a replay buffer holding the transform and checks what comes out.
"""
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from test.envs.transforms._group_env import AgentsEnv
from test.envs.transforms.contract import GroupContract
from torchrl.data import LazyMemmapStorage, LazyTensorStorage, ListStorage, ReplayBuffer
from torchrl.envs import Compose, StepCounter, TransformedEnv
from torchrl.envs.transforms import (
    BurnInTransform,
    CatFrames,
    MultiStepTransform,
    RandomCropTensorDict,
    RandomTruncationTransform,
    Reward2GoTransform,
)

T, N_AGENTS = 6, 3
OBS, REW = ("agents", "observation"), ("agents", "reward")


def group_trajectory(done_at=(2, 5), agent_done=None) -> TensorDict:
    """``T = 6`` steps of 3 agents. ``("agents", "observation")`` (2,) ``= [6 t + 2 a, 6 t + 2 a + 1]``, its
    ``"next"`` value + 100; ``("next", "agents", "reward")`` ``= 3 t + a + 1`` (agent ``a``, step ``t``); root
    ``"step"`` = t; root done flags at the steps ``done_at``; ``agent_done`` (a ``(T, 3)`` bool tensor) adds
    per-agent ``("next", "agents", "done")`` flags."""
    obs = torch.arange(T * N_AGENTS * 2.0).reshape(T, N_AGENTS, 2)
    reward = torch.arange(1.0, T * N_AGENTS + 1).reshape(T, N_AGENTS, 1)
    done = torch.zeros(T, 1, dtype=torch.bool)
    done[list(done_at)] = True
    nxt_agents = TensorDict(observation=obs + 100, reward=reward, batch_size=(T, N_AGENTS))
    if agent_done is not None:
        nxt_agents.set("done", agent_done.unsqueeze(-1))
    return TensorDict(
        agents=TensorDict(observation=obs, action=torch.zeros(T, N_AGENTS, 1), batch_size=(T, N_AGENTS)),
        step=torch.arange(T),
        next=TensorDict(agents=nxt_agents, done=done, terminated=done.clone(), batch_size=(T,)),
        batch_size=(T,),
    )


def _episode_end(done: torch.Tensor, t: int) -> int:
    """The last step of the episode holding step ``t`` (the first done at or after it, else the last step)."""
    later = [s for s in range(t, len(done)) if bool(done[s])]
    return later[0] if later else len(done) - 1


class GroupBufferContract:
    """A buffer transform on group data: ``make_transform()``, ``data()`` (group trajectories, ``(T,)`` or
    ``(B, T)``), ``storage(n)`` and ``check(stored_or_sampled, data)``. The contract extends a replay buffer
    holding the transform with the data, reads everything back and checks that the agent dim survived."""

    def make_transform(self):
        raise NotImplementedError

    def data(self) -> TensorDict:
        return group_trajectory()

    def storage(self, n: int):
        # LazyTensorStorage drops the batch dims of nested tensordicts (see test_lazy_tensor_storage_*)
        return LazyMemmapStorage(n)

    def read(self, rb) -> TensorDict:
        return rb[: len(rb)]

    def check(self, out: TensorDict, data: TensorDict) -> None:
        raise NotImplementedError

    def test_group_replay_buffer(self):
        data = self.data()
        rb = ReplayBuffer(storage=self.storage(2 * T), transform=self.make_transform(), batch_size=4)
        rb.extend(data)
        out = self.read(rb)
        assert out.get("agents").batch_size == (*out.batch_size, N_AGENTS)  # the agent dim survives
        self.check(out, data)


class TestMultiStepGroup(GroupBufferContract):
    def make_transform(self):
        return MultiStepTransform(2, 0.5, reward_keys=[REW])

    def check(self, out, data):
        # the last n_steps = 2 frames wait for the next extend; rows 0..3 are written
        assert out["step"].tolist() == [0, 1, 2, 3]
        reward, done = data[("next", *REW)], data["next", "done"].squeeze(-1)
        for row, t in enumerate(out["step"].tolist()):
            k = min(2, _episode_end(done, t) - t + 1)
            expected = sum(0.5**i * reward[t + i] for i in range(k))
            torch.testing.assert_close(out[("next", *REW)][row], expected)  # one n-step return per agent
            torch.testing.assert_close(out[("next", *OBS)][row], data[("next", *OBS)][t + k - 1])
            assert out["steps_to_next_obs"][row] == k and out["gamma"][row] == 0.5**k
            assert out["nonterminal"][row] == (k > 1)
        torch.testing.assert_close(out["next", "agents", "original_reward"], reward[:4])  # kept in its group
        # TorchRL 0.14.1, same data: per-agent rewards [[3, 4.5, 6], [7.5, 9, 10.5], [7, 8, 9], [16.5, 18, 19.5]],
        # steps_to_next_obs [2, 2, 1, 2] (it keeps the one-step reward at the root, ("next", "original_reward"))
        assert out[("next", *REW)].squeeze(-1).tolist() == [[3, 4.5, 6], [7.5, 9, 10.5], [7, 8, 9], [16.5, 18, 19.5]]

    def test_windows_span_extends_on_a_rollout(self):
        env = AgentsEnv(max_steps=3)
        env.set_seed(0)
        data = env.rollout(8, break_when_any_done=False)  # 8 steps, episodes of 3 steps
        rb = ReplayBuffer(storage=self.storage(16), transform=MultiStepTransform(3, 0.9, reward_keys=[REW]))
        rb.extend(data[:5])  # writes steps 0, 1 (the last n_steps = 3 frames wait)
        rb.extend(data[5:])  # joins them with steps 5..7: writes steps 2, 3, 4
        out = rb[: len(rb)]
        assert out["agents"].batch_size == (5, N_AGENTS)
        torch.testing.assert_close(out[OBS], data[OBS][:5])
        reward, done = data[("next", *REW)], data["next", "done"].squeeze(-1)
        for t in range(5):
            k = min(3, _episode_end(done, t) - t + 1)
            expected = sum(0.9**i * reward[t + i] for i in range(k))
            torch.testing.assert_close(out[("next", *REW)][t], expected)
            torch.testing.assert_close(out[("next", *OBS)][t], data[("next", *OBS)][t + k - 1])
            assert out["steps_to_next_obs"][t] == k
        assert out["steps_to_next_obs"].tolist() == [3, 2, 1, 3, 2]  # episodes end at steps 2 and 5


    def test_per_agent_done_flags_end_every_window(self):
        # done_key=("agents", "done"): a window ends where any agent's episode ends (all agents bootstrap from
        # the same next step). TorchRL 0.14.1 refuses per-agent flags ("tensordict shape must be compatible
        # with the done's shape").
        agent_done = torch.zeros(T, N_AGENTS, dtype=torch.bool)
        agent_done[1, 0] = agent_done[3, 1] = True
        data = group_trajectory(done_at=(5,), agent_done=agent_done)
        rb = ReplayBuffer(storage=self.storage(T), transform=MultiStepTransform(3, 1.0, reward_keys=[REW],
                                                                               done_key=("agents", "done")))
        rb.extend(data)
        out = rb[: len(rb)]
        assert out["steps_to_next_obs"].tolist() == [2, 1, 2]  # steps 0-1 | 1 | 2-3
        reward = data[("next", *REW)]
        torch.testing.assert_close(out[("next", *REW)], torch.stack([reward[0] + reward[1], reward[1], reward[2] + reward[3]]))
        assert out[("next", *REW)].squeeze(-1).tolist() == [[5, 7, 9], [4, 5, 6], [17, 19, 21]]


class TestReward2GoGroup(GroupBufferContract):
    """Root done flags end every agent's trajectory. TorchRL 0.14.1 refuses this data deep in its scan
    (``ValueError: reward and done must share the same shape, got torch.Size([6, 3, 1]) and
    torch.Size([6, 1])``); here each agent gets its own reward-to-go."""

    def make_transform(self):
        return Reward2GoTransform(gamma=0.5, in_keys=[("next", *REW)], out_keys=[("next", "agents", "r2g")])

    def check(self, out, data):
        reward, done = data[("next", *REW)], data["next", "done"].squeeze(-1)
        for t in range(T):
            end = _episode_end(done, t)
            expected = sum(0.5 ** (s - t) * reward[s] for s in range(t, end + 1))
            torch.testing.assert_close(out["next", "agents", "r2g"][t], expected)
        # agent 0: rewards 1, 4, 7 | 10, 13, 16 -> 1 + 2 + 1.75, 4 + 3.5, 7 | 10 + 6.5 + 4, 13 + 8, 16
        assert out["next", "agents", "r2g"][:, 0, 0].tolist() == [4.75, 7.5, 7.0, 20.5, 21.0, 16.0]
        torch.testing.assert_close(out[("next", *REW)], reward)  # out_keys elsewhere: the rewards are kept

    def test_per_agent_done_flags(self):
        # TorchRL 0.14.1 refuses this data ("No episode ends found to calculate the reward to go").
        # agents end their episodes at different steps: agent 0 at 1, agent 1 at 3, agent 2 never (batch end)
        agent_done = torch.zeros(T, N_AGENTS, dtype=torch.bool)
        agent_done[1, 0] = agent_done[3, 1] = True
        data = group_trajectory(done_at=(5,), agent_done=agent_done)
        t = Reward2GoTransform(gamma=1.0, in_keys=[("next", *REW)], done_key=("agents", "done"))
        rb = ReplayBuffer(storage=self.storage(T), transform=t)
        rb.extend(data)
        r2g = rb[:T][("next", *REW)].squeeze(-1)
        reward = data[("next", *REW)].squeeze(-1)
        for a in range(N_AGENTS):
            for s in range(T):
                end = _episode_end(agent_done[:, a], s)
                assert r2g[s, a] == reward[s : end + 1, a].sum(), (s, a)

    def test_batch_of_trajectories(self):
        # data (B=2, T) with the group under it: time is the data's last batch dim, not the agent dim
        data = torch.stack([group_trajectory(), group_trajectory(done_at=(0, 3))])
        out = Reward2GoTransform(gamma=1.0, in_keys=[("next", *REW)]).inv(data.clone())
        reward = data[("next", *REW)]
        for b, ends in ((0, (2, 5)), (1, (0, 3, 5))):
            start = 0
            for end in ends:
                seg = reward[b, start : end + 1]
                expected = seg.flip(0).cumsum(0).flip(0)
                torch.testing.assert_close(out[("next", *REW)][b, start : end + 1], expected)
                start = end + 1

    def test_refused_in_an_env_with_a_group(self):
        with pytest.raises(ValueError, match="only an inverse transform"):
            TransformedEnv(AgentsEnv(), Reward2GoTransform(in_keys=[("next", *REW)]))


def _hidden_module():
    """A stand-in recurrent module on group keys: the next hidden state is the first stored state plus the
    running sum (over time, dim -3 of ``(..., T, n_agents, F)``) of each agent's observation features."""
    return TensorDictModule(
        lambda obs, h: h[..., :1, :, :] + obs.sum(-1, keepdim=True).cumsum(-3),
        in_keys=[OBS, ("agents", "hidden")],
        out_keys=[("next", "agents", "hidden")],
    )


class TestBurnInGroup(GroupBufferContract):
    """TorchRL 0.14.1 takes ``["agents"]`` as the default out_key of ``("next", "agents", "hidden")`` (and
    needs a module with parameters); here the default is the group entry ``("agents", "hidden")``."""

    def make_transform(self):
        return BurnInTransform([_hidden_module()], burn_in=2)

    def data(self):
        data = torch.stack([group_trajectory(), group_trajectory()])  # (B=2, T) trajectories
        data["agents", "observation"][1] += 1000
        data.set(("agents", "hidden"), torch.full((2, T, N_AGENTS, 1), 5.0))
        return data

    def storage(self, n):
        return LazyMemmapStorage(n, ndim=1)  # one element = one (T,) trajectory

    def read(self, rb):
        return rb.sample()  # the transform runs on sampled data

    def check(self, out, data):
        assert self.make_transform().out_keys == [("agents", "hidden")]
        assert out.batch_size == (4, T - 2) and out["agents", "hidden"].shape == (4, T - 2, N_AGENTS, 1)
        for row in range(4):
            b = int(out["agents", "observation"][row, 0, 0, 0] >= 1000)
            # step 0 of the rest: 5 + sum over the 2 burnt steps of each agent's observation features
            expected = 5 + data["agents", "observation"][b, :2].sum((0, 2))
            torch.testing.assert_close(out["agents", "hidden"][row, 0, :, 0], expected)
            assert (out["agents", "hidden"][row, 1:] == 5).all()  # later steps keep their stored states
            assert out["step"][row].tolist() == [2, 3, 4, 5]
        # on the stored data themselves: agents of trajectory 0 -> 5 + (0 + 1) + (6 + 7), 5 + 5 + 17, 5 + 9 + 21
        direct = self.make_transform()(data.clone())
        assert direct["agents", "hidden"][0, 0, :, 0].tolist() == [19.0, 27.0, 35.0]


class TestRandomCropGroup(GroupBufferContract):
    def make_transform(self):
        return RandomCropTensorDict(4)

    def data(self):
        return torch.stack([group_trajectory(), group_trajectory()])

    def storage(self, n):
        return LazyMemmapStorage(n, ndim=1)

    def read(self, rb):
        torch.manual_seed(0)
        return rb.sample()

    def check(self, out, data):
        assert out.batch_size == (4, 4) and out["agents"].batch_size == (4, 4, N_AGENTS)
        for row in range(4):
            steps = out["step"][row].tolist()
            assert steps == list(range(steps[0], steps[0] + 4))  # a contiguous window
            torch.testing.assert_close(out[OBS][row], data[OBS][0, steps])  # every agent, the same steps
            torch.testing.assert_close(out[("next", *REW)][row], data[("next", *REW)][0, steps])


    def test_per_agent_mask(self):
        # a step is valid when every agent's mask is set: trajectory 0 has 5 valid steps (one agent is masked
        # at step 5), trajectory 1 has 4; windows of 4 start at 0 or 1, and at 0
        data = torch.stack([group_trajectory(), group_trajectory()])
        mask = torch.ones(2, T, N_AGENTS, dtype=torch.bool)
        mask[0, 5, 1] = False
        mask[1, 4:] = False
        data.set(("agents", "mask"), mask)
        t = RandomCropTensorDict(4, mask_key=("agents", "mask"))
        torch.manual_seed(0)
        starts = torch.stack([t(data)["step"][:, 0] for _ in range(40)])
        assert set(starts[:, 0].tolist()) == {0, 1} and set(starts[:, 1].tolist()) == {0}
        with pytest.raises(RuntimeError, match=r"shortest valid sequence \(\('agents', 'mask'\)\) has 4 steps"):
            RandomCropTensorDict(5, mask_key=("agents", "mask"))(data)


class TestCatFramesGroupBuffer(GroupBufferContract):
    """CatFrames on stored group trajectories (forward on sampled data): frames stack per agent, restart
    after each root done and are padded with the episode's first frame. TorchRL 0.14.1 gives the same numbers
    (agent 0, feature 0 of the 3 frames: [0 0 0], [0 0 6], [0 6 12], [18 18 18], [18 18 24], [18 24 30])."""

    def make_transform(self):
        return CatFrames(N=3, dim=-1, in_keys=[OBS], out_keys=[("agents", "stack")])

    def storage(self, n):
        return ListStorage(n)

    def read(self, rb):
        return self.make_transform()(rb[:T])  # a trajectory in time order, as a slice sampler gives it

    def check(self, out, data):
        stack, obs = out["agents", "stack"], data[OBS]
        assert stack.shape == (T, N_AGENTS, 6)
        for t in range(T):
            start = 0 if t <= 2 else 3  # the episode's first step
            frames = [obs[max(start, t - 2 + i)] for i in range(3)]
            torch.testing.assert_close(stack[t], torch.cat(frames, -1))
        assert stack[:, 0, ::2].tolist() == [[0, 0, 0], [0, 0, 6], [0, 6, 12], [18, 18, 18], [18, 18, 24], [18, 24, 30]]

    def test_in_a_buffer_transform(self):
        # appended to the buffer: sampled (T,) trajectories come back stacked
        rb = ReplayBuffer(storage=LazyMemmapStorage(2, ndim=1), transform=self.make_transform(), batch_size=2)
        rb.extend(torch.stack([group_trajectory(), group_trajectory()]))
        out = rb.sample()
        assert out["agents", "stack"].shape == (2, T, N_AGENTS, 6)
        torch.testing.assert_close(out["agents", "stack"][0], self.make_transform()(group_trajectory())["agents", "stack"])


    def test_make_rb_transform_and_sampler(self):
        # slices of 3 steps from the slice sampler, reshaped into one stack per slice (its last step)
        transform, sampler = self.make_transform().make_rb_transform_and_sampler(batch_size=4)
        rb = ReplayBuffer(storage=LazyMemmapStorage(20), transform=transform, sampler=sampler, batch_size=4)
        rb.extend(group_trajectory())
        torch.manual_seed(0)
        out = rb.sample()
        assert out["agents", "stack"].shape == (4, N_AGENTS, 6)
        assert out["step"].tolist() == [2, 5, 5, 2]  # TorchRL 0.14.1, same seed, same stacks
        obs, nxt = group_trajectory()[OBS], group_trajectory()[("next", *OBS)]
        for row, t in enumerate(out["step"].tolist()):
            torch.testing.assert_close(out["agents", "stack"][row], torch.cat([obs[t - 2], obs[t - 1], obs[t]], -1))
            torch.testing.assert_close(out["next", "agents", "stack"][row], torch.cat([nxt[t - 2], nxt[t - 1], nxt[t]], -1))


class TestRandomTruncationGroup(GroupContract):
    """An env-side transform on a root step counter of an env that has a group: the group passes untouched.
    TorchRL 0.14.1 runs the same scenario alike (root truncation flags, group batch (2, 4, 3))."""

    def make_group_transform(self):
        torch.manual_seed(0)
        return Compose(StepCounter(), RandomTruncationTransform(min_horizon=1, max_horizon=3, prob=1.0))

    def check_group(self, data):
        count, truncated = data["next", "step_count"], data["next", "truncated"]
        assert data[("next", *OBS)].shape[-2:] == (N_AGENTS, 3) and data[("next", *REW)].shape[-2:] == (N_AGENTS, 1)
        assert (count <= 3).all()  # every horizon is at most max_horizon = 3 (AgentsEnv ends at 4 steps)
        assert truncated.any() and torch.equal(truncated, truncated & (count >= 1))
        # a truncated step ends its episode: the step counter restarts after it
        nxt = count[..., 1:, :]
        assert (nxt[truncated[..., :-1, :]] == 1).all()
        assert torch.equal(data["next", "done"], truncated | data["next", "terminated"])

    def test_refused_on_stored_group_data(self):
        rb = ReplayBuffer(storage=ListStorage(T), transform=RandomTruncationTransform(1, 3), batch_size=2)
        rb.extend(group_trajectory())
        with pytest.raises(NotImplementedError, match="cannot be applied to stored data"):
            rb.sample()


@pytest.mark.parametrize("storage", [LazyTensorStorage, LazyMemmapStorage])
def test_lazy_storages_keep_the_agent_dim(storage):
    rb = ReplayBuffer(storage=storage(T), batch_size=2)
    data = group_trajectory()
    rb.extend(data)
    assert rb[:T]["agents"].batch_size == (T, N_AGENTS)
    assert rb.sample()["agents"].batch_size == (2, N_AGENTS)
    assert (rb[:T] == data).all()
