"""Envs whose entries change shape between steps roll out into lazily stacked TensorDicts."""
import torch
from tensordict import TensorDict

import parity
from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, step_mdp


class GrowingEnv(EnvBase):
    """The observation gains one row per step (a dynamic spec: -1 in its shape)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(shape=(-1, 3)))
        self.action_spec = Unbounded(shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))

    def _reset(self, td):
        self.count = 1
        return TensorDict({"observation": torch.ones(1, 3)}, [])

    def _step(self, td):
        self.count += 1
        return TensorDict({
            "observation": torch.full((self.count, 3), float(self.count)),
            "reward": torch.ones(1),
            "done": torch.tensor([self.count >= 4]),
        }, [])

    def _set_seed(self, seed):
        return seed


def scenario_rollout_lazy_stack():
    env = GrowingEnv()
    r = env.rollout(5, break_when_any_done=False)
    return [type(r).__name__, list(r.batch_size), [r[i]["observation"].shape for i in range(5)],
            [r[i]["next", "observation"].shape for i in range(5)], r["next", "reward"]]


def scenario_rollout_stops_at_done():
    r = GrowingEnv().rollout(10)
    return [type(r).__name__, list(r.batch_size), r[-1]["next", "observation"]]


def scenario_step_mdp_heterogeneous():
    env = GrowingEnv()
    td = env.reset()
    td["action"] = torch.zeros(1)
    td = env.step(td)
    nxt = step_mdp(td)
    return nxt


def scenario_spec_rand_and_zero():
    env = GrowingEnv()
    return [parity.structure(env.observation_spec.zero()), parity.attempt(lambda: env.fake_tensordict())]


def scenario_check_env_specs():
    from torchrl.envs.utils import check_env_specs
    return parity.attempt(lambda: check_env_specs(GrowingEnv()))


def scenario_collector_lazy_batches():
    from torchrl.collectors import Collector
    collector = Collector(GrowingEnv(), None, frames_per_batch=5, total_frames=10)
    out = []
    for batch in collector:
        out.append([type(batch).__name__, list(batch.batch_size), [batch[i]["observation"].shape for i in range(5)],
                    batch["collector", "traj_ids"]])
    collector.shutdown()
    return out


def scenario_rollout_then_step_mdp_and_index():
    r = GrowingEnv().rollout(3)
    return [r[1], step_mdp(r[1]), parity.attempt(lambda: r["observation"])]


class HeteroAgentsEnv(EnvBase):
    """Two agents under "agents" whose observations have different sizes (a lazily stacked group)."""

    def __init__(self):
        super().__init__()
        agents = torch.stack([Composite(observation=Unbounded(shape=(2,))), Composite(observation=Unbounded(shape=(3,)))], 0)
        self.observation_spec = Composite(agents=agents)
        self.action_spec = Composite(agents=Composite(action=Unbounded(shape=(2, 1)), shape=(2,)))
        self.reward_spec = Composite(agents=Composite(reward=Unbounded(shape=(2, 1)), shape=(2,)))
        self.done_spec = Composite(done=Unbounded(shape=(1,), dtype=torch.bool),
                                   terminated=Unbounded(shape=(1,), dtype=torch.bool))

    def _obs(self, value):
        from tensordict import LazyStackedTensorDict
        return LazyStackedTensorDict.maybe_dense_stack(
            [TensorDict({"observation": torch.full((2,), value)}, []), TensorDict({"observation": torch.full((3,), value)}, [])], 0)

    def _reset(self, td):
        self.t = 0
        return TensorDict({"agents": self._obs(0.0), "done": torch.zeros(1, dtype=torch.bool),
                           "terminated": torch.zeros(1, dtype=torch.bool)}, [])

    def _step(self, td):
        self.t += 1
        agents = self._obs(float(self.t))
        agents.set("reward", td["agents", "action"].clone())
        return TensorDict({"agents": agents, "done": torch.tensor([self.t >= 3]), "terminated": torch.tensor([self.t >= 3])}, [])

    def _set_seed(self, seed):
        return seed


def scenario_hetero_agents_specs():
    env = HeteroAgentsEnv()
    return [parity.attempt(lambda: env.observation_spec["agents"].shape), env.action_spec,
            parity.attempt(lambda: parity.structure(env.observation_spec.zero()))]


def scenario_hetero_agents_rollout():
    env = HeteroAgentsEnv()
    r = env.rollout(5, policy=lambda td: td.set(("agents", "action"), torch.ones(2, 1)))
    return [type(r).__name__, list(r.batch_size), type(r["agents"]).__name__,
            [r[t]["agents"][a]["observation"] for t in range(3) for a in range(2)], r["next", "agents", "reward"]]
