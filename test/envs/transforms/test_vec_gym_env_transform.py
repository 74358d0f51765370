import doctest
import math

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, TransformedEnv, check_env_specs
from torchrl.envs.transforms import StepCounter, VecGymEnvTransform
from torchrl.envs.transforms import _vec_gym_env_transform as module


class AutoResetVec(EnvBase):
    """Sub-envs of lengths ``2, 3, 4, ...`` that restart on their own (gym's same-step autoreset): a done
    step returns the next episode's first observation (``100 * episode``) and puts the real last one
    (``100 * episode + t``) under ``("final", "observation")``. A reset with a ``"_reset"`` mask is a no-op
    (the sub-envs restarted already); a reset without one restarts every sub-env."""

    def __init__(self, batch_size=(2,), write_final=True, int_obs=False, declare_final=None):
        super().__init__(batch_size=batch_size)
        batch = self.batch_size
        self.lengths = (torch.arange(batch.numel()) + 2).reshape(batch)
        self.write_final = write_final
        self.dtype = torch.int64 if int_obs else torch.float32
        obs = Composite(observation=Unbounded(batch + (1,), dtype=self.dtype), shape=batch)
        if write_final if declare_final is None else declare_final:
            obs["final"] = Composite(observation=Unbounded(batch + (1,), dtype=self.dtype), shape=batch)
        self.observation_spec = obs
        self.action_spec = Unbounded(batch + (1,))
        self.reward_spec = Unbounded(batch + (1,))
        self.count = torch.zeros(batch, dtype=torch.long)
        self.episode = torch.zeros(batch, dtype=torch.long)
        self.masked_resets = 0

    def _obs(self):
        return (self.count + 100 * self.episode).to(self.dtype).unsqueeze(-1)

    def _out(self, done, final):
        out = TensorDict(observation=self._obs(), done=done.unsqueeze(-1), terminated=done.unsqueeze(-1), batch_size=self.batch_size)
        if self.write_final:
            out["final"] = TensorDict(observation=final, batch_size=self.batch_size)
        return out

    def _reset(self, td):
        if td is not None and "_reset" in td.keys():  # noqa: SIM118 - TensorDict.__contains__ refuses keys
            self.masked_resets += 1
        else:
            self.count.zero_()
            self.episode.zero_()
        done = torch.zeros(self.batch_size, dtype=torch.bool)
        return self._out(done, torch.zeros_like(self._obs()))

    def _step(self, td):
        self.count += 1
        done = self.count >= self.lengths
        final = torch.where(done.unsqueeze(-1), self._obs(), torch.zeros_like(self._obs()))
        self.episode[done] += 1
        self.count[done] = 0
        return self._out(done, final).set("reward", torch.ones(self.batch_size + (1,)))

    def _set_seed(self, seed):
        return seed


def rows(data, key):
    return data[key].squeeze(-1).tolist()


class TestVecGymEnvTransform(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        return AutoResetVec(batch_size=batch_size)

    def make_transform(self):
        return VecGymEnvTransform()

    def test_swaps_final_and_reset_observations(self):
        env = TransformedEnv(AutoResetVec(), VecGymEnvTransform())
        assert list(env.observation_spec.keys()) == ["observation"]  # "final" is gone
        data = env.rollout(7, break_when_any_done=False)
        # sub-env 0 lasts 2 steps, sub-env 1 lasts 3: "next" ends each episode on its last observation,
        # the following root observation is the env's own restart (100 * episode); TorchRL 0.14.1 gives the
        # same values and the same 4 masked resets on this env
        assert rows(data, ("next", "observation")) == [[1, 2, 101, 102, 201, 202, 301], [1, 2, 3, 101, 102, 103, 201]]
        assert rows(data, "observation") == [[0, 1, 100, 101, 200, 201, 300], [0, 1, 2, 100, 101, 102, 200]]
        assert rows(data, ("next", "done")) == [[0, 1, 0, 1, 0, 1, 0], [0, 0, 1, 0, 0, 1, 0]]
        assert "final" not in data.keys() and "final" not in data["next"].keys()  # noqa: SIM118 - TensorDict.__contains__ refuses keys
        assert env.base_env.masked_resets == 4  # the restarts came from the env, not from a reset

    def test_steps_and_partial_resets_by_hand(self):
        env = TransformedEnv(AutoResetVec(), VecGymEnvTransform())
        td = env.reset()
        for _ in range(2):
            td = env.step(td.set("action", torch.zeros(2, 1)))["next"]
        assert rows(td, "observation") == [2, 2] and rows(td, "done") == [True, False]
        out = env.reset(TensorDict(_reset=torch.tensor([[True], [False]]), batch_size=[2]))
        assert rows(out, "observation")[0] == 100  # from the memo
        assert env.transform._pending is None  # restored: the memo is empty again
        env.rand_step(env.reset())
        out = env.reset()  # a full reset restarts everything
        assert rows(out, "observation") == [0, 0]

    def test_full_reset_clears_memo(self):
        env = TransformedEnv(AutoResetVec(), VecGymEnvTransform())
        td = env.reset()
        td = env.step(td.set("action", torch.zeros(2, 1)))["next"]
        td = env.step(td.set("action", torch.zeros(2, 1)))["next"]
        assert env.transform._pending.tolist() == [True, False]
        assert rows(env.reset(), "observation") == [0, 0] and env.transform._pending is None

    def test_missing_final_observations(self):
        env = TransformedEnv(AutoResetVec(write_final=False), VecGymEnvTransform())
        env.observation_spec["observation"]
        assert not env.transform.active
        env = TransformedEnv(AutoResetVec(write_final=False, declare_final=True), VecGymEnvTransform())
        # "final" declared, never written (gym < 0.22): placeholders (TorchRL 0.14.1 raises KeyError here)
        data = env.rollout(4, break_when_any_done=False)
        nan = float("nan")
        got = rows(data, ("next", "observation"))
        expected = [[1, nan, 101, nan], [1, 2, nan, 101]]
        assert all(math.isnan(e) if math.isnan(e) else g == e for gr, er in zip(got, expected) for g, e in zip(gr, er))
        assert rows(data, "observation") == [[0, 1, 100, 101], [0, 1, 2, 100]]

    def test_missing_obs_value_and_int_observations(self):
        base = AutoResetVec(write_final=False, int_obs=True, declare_final=True)
        data = TransformedEnv(base, VecGymEnvTransform(missing_obs_value=-1)).rollout(3, break_when_any_done=False)
        assert rows(data, ("next", "observation")) == [[1, -1, 101], [1, 2, -1]]
        base = AutoResetVec(write_final=False, int_obs=True, declare_final=True)
        data = TransformedEnv(base, VecGymEnvTransform()).rollout(3, break_when_any_done=False)
        assert rows(data, ("next", "observation")) == [[1, 0, 101], [1, 2, 0]]  # NaN cannot be an int: 0

    def test_native_autoreset(self):
        env = TransformedEnv(AutoResetVec(), VecGymEnvTransform(native_autoreset=True))
        data = env.rollout(4, break_when_any_done=False)
        nxt = data["next", "observation"].squeeze(-1)
        assert torch.isnan(nxt[0, 1]) and torch.isnan(nxt[1, 2]) and torch.isnan(nxt[0, 3])
        assert nxt[0, 0] == 1 and nxt[1, 1] == 2
        assert rows(data, "observation") == [[0, 1, 100, 101], [0, 1, 2, 100]]

    def test_keys_and_spec(self):
        t = VecGymEnvTransform(final_name="final", missing_obs_value=0.0)
        assert t.in_keys == [] and t.out_keys == [] and t.missing_obs_value == 0.0
        env = TransformedEnv(AutoResetVec(), t)
        assert t.obs_keys == ["observation"] and set(t.done_keys) == {"done", "terminated"} and t.active
        check_env_specs(env, seed=0)
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            VecGymEnvTransform()(TensorDict(observation=torch.zeros(2, 1), batch_size=[2]))
        assert repr(VecGymEnvTransform()) == "VecGymEnvTransform(final_name='final', missing_obs_value=nan, native_autoreset=False)"

    def test_custom_final_name_in_compose(self):
        base = AutoResetVec()
        env = TransformedEnv(base, StepCounter())
        env.append_transform(VecGymEnvTransform())
        data = env.rollout(3, break_when_any_done=False)
        assert rows(data, ("next", "observation")) == [[1, 2, 101], [1, 2, 3]]
        t = VecGymEnvTransform(final_name="last")
        env = TransformedEnv(AutoResetVec(), t)
        assert not t.active and "final" in env.observation_spec.keys()  # noqa: SIM118 - TensorDict.__contains__ refuses keys

    def test_gym_vector_env_passes_through(self):
        gymnasium = pytest.importorskip("gymnasium")
        from torchrl.envs import GymWrapper

        def make():
            return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2)

        plain = GymWrapper(make())
        env = TransformedEnv(GymWrapper(make()), VecGymEnvTransform())
        # our GymWrapper already turns the vector env's auto-resets into partial resets: nothing to undo
        assert not env.transform.active
        plain.set_seed(0)
        env.set_seed(0)
        torch.manual_seed(0)
        a = plain.rollout(30, break_when_any_done=False)
        torch.manual_seed(0)
        b = env.rollout(30, break_when_any_done=False)
        assert a["next", "done"].any()
        torch.testing.assert_close(a, b)


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
