import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Binary, Categorical, Composite, OneHot, Unbounded
from torchrl.envs import Compose, EnvBase, PendulumEnv, StepCounter, TensorDictPrimer, TransformedEnv
from torchrl.envs.transforms import _action_mask as action_mask
from torchrl.envs.transforms._action_mask import ActionMask

from test.envs.transforms.contract import TransformContract


class MaskedEnv(EnvBase):
    """``n`` actions, each playable once per episode (the mask is an input and an output); done when none is left.

    Stateless: the mask travels in the data, so partial resets and batches work. With ``one_hot`` the
    actions are one-hot vectors. With ``fixed`` the mask is ``[True, False, True, ...]`` and never changes
    (the env is never done): ``check_env_specs`` compares every step's action with the spec's *current*
    mask, which only a fixed mask satisfies.
    """

    _batch_locked = False

    def __init__(self, n=4, batch_size=(), one_hot=False, mask_key="action_mask", fixed=False):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.n, self.one_hot, self.mask_key, self.fixed = n, one_hot, mask_key, fixed
        self.action_spec = OneHot(n, shape=(*shape, n)) if one_hot else Categorical(n, shape=shape)
        mask_spec = Binary(n, shape=(*shape, n), dtype=torch.bool)
        self.observation_spec = Composite({"obs": Unbounded((*shape, 1)), mask_key: mask_spec}, shape=shape)
        self.state_spec = Composite({mask_key: mask_spec.clone()}, shape=shape)
        self.reward_spec = Unbounded((*shape, 1))

    def _reset(self, td=None, **kwargs):
        batch = td.batch_size if td is not None else self.batch_size
        mask = torch.ones(*batch, self.n, dtype=torch.bool)
        if self.fixed:
            mask[..., 1::2] = False
        reset = td.get("_reset", None) if td is not None else None
        if reset is not None and td.get(self.mask_key, None) is not None:
            mask = torch.where(reset, mask, td.get(self.mask_key))
        return TensorDict({"obs": torch.zeros(*batch, 1), self.mask_key: mask}, batch_size=batch)

    def _step(self, td):
        mask = td.get(self.mask_key)
        action = td["action"]
        index = action.long().argmax(-1) if self.one_hot else action
        if not torch.gather(mask, -1, index.unsqueeze(-1)).all():
            raise RuntimeError(f"illegal action {index.tolist()} for mask {mask.tolist()}")
        if not self.fixed:
            mask = mask.scatter(-1, index.unsqueeze(-1), False)
        batch = td.batch_size
        return TensorDict(
            {"obs": index.unsqueeze(-1).float(), self.mask_key: mask, "reward": torch.ones(*batch, 1),
             "done": ~mask.any(-1, keepdim=True)},
            batch_size=batch,
        )

    def _set_seed(self, seed):
        pass


class NestedMaskedEnv(EnvBase):
    """Action and mask under ``"agent"``; the mask ``[True, False, True]`` never changes."""

    def __init__(self):
        super().__init__()
        self.full_action_spec = Composite(agent=Composite(action=Categorical(3)))
        self.observation_spec = Composite(agent=Composite(mask=Binary(3, dtype=torch.bool)))
        self.reward_spec = Unbounded((1,))

    def _mask(self):
        return TensorDict(agent=TensorDict(mask=torch.tensor([True, False, True])))

    def _reset(self, td=None, **kwargs):
        return self._mask()

    def _step(self, td):
        if td["agent", "action"].item() == 1:
            raise RuntimeError("illegal action")
        out = self._mask()
        out["reward"] = torch.zeros(1)
        out["done"] = torch.zeros(1, dtype=torch.bool)
        return out

    def _set_seed(self, seed):
        pass


class TestActionMask(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        return MaskedEnv(batch_size=batch_size, fixed=True)

    def test_fixed_mask_env_only_gets_allowed_actions(self):
        torch.manual_seed(0)
        env = TransformedEnv(MaskedEnv(n=4, batch_size=(3,), fixed=True), ActionMask())
        actions = env.rollout(20)["action"]
        assert set(actions.unique().tolist()) == {0, 2}

    def make_transform(self):
        return ActionMask()

    def policy(self):
        # a batched env's action spec cannot follow each worker's mask: play the first legal action
        return lambda td: td.set("action", td["action_mask"].int().argmax(-1))

    def test_random_rollout_plays_legal_actions_only(self):
        torch.manual_seed(0)
        env = TransformedEnv(MaskedEnv(n=5), ActionMask())
        for _ in range(5):
            data = env.rollout(10)
            assert data.shape == (5,)
            assert sorted(data["action"].tolist()) == [0, 1, 2, 3, 4]
        # Without the transform, random actions repeat and the env raises.
        raw = MaskedEnv(n=5)
        with pytest.raises(RuntimeError, match="illegal action"):
            for _ in range(5):
                raw.rollout(10)

    def test_spec_mask_follows_the_data(self):
        env = TransformedEnv(MaskedEnv(n=3), ActionMask())
        td = env.reset()
        assert env.action_spec.mask.tolist() == [True, True, True]
        td["action"] = torch.tensor(1)
        td = env.step(td)
        assert env.action_spec.mask.tolist() == [True, False, True]
        assert env.action_spec.is_in(torch.tensor(0))
        assert not env.action_spec.is_in(torch.tensor(1))
        assert all(env.rand_action(env.step_mdp(td))["action"].item() != 1 for _ in range(20))
        env.reset()
        assert env.action_spec.mask.tolist() == [True, True, True]

    def test_batched_env_with_partial_resets(self):
        torch.manual_seed(1)
        env = TransformedEnv(MaskedEnv(n=3, batch_size=(4,)), ActionMask())
        data = env.rollout(9, break_when_any_done=False)
        # Every episode of every sub-env plays 3 distinct actions, then restarts.
        for b in range(4):
            actions = data["action"][b].tolist()
            assert [sorted(actions[i : i + 3]) for i in range(0, 9, 3)] == [[0, 1, 2]] * 3

    def test_one_hot_action_spec(self):
        torch.manual_seed(0)
        env = TransformedEnv(MaskedEnv(n=4, one_hot=True, batch_size=(2,)), ActionMask())
        data = env.rollout(4)
        assert data.shape == (2, 4)
        assert (data["action"].sum(1) == 1).all()  # every action once per sub-env

    def test_custom_keys_and_composition(self):
        torch.manual_seed(0)
        env = TransformedEnv(MaskedEnv(n=3, mask_key="legal"), StepCounter())
        env.append_transform(ActionMask(mask_key="legal"))
        data = env.rollout(5)
        assert sorted(data["action"].tolist()) == [0, 1, 2]
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]

    def test_nested_keys(self):
        torch.manual_seed(0)
        env = TransformedEnv(NestedMaskedEnv(), ActionMask(action_key=("agent", "action"), mask_key=("agent", "mask")))
        actions = env.rollout(30)["agent", "action"]
        assert set(actions.unique().tolist()) == {0, 2}
        assert env.full_action_spec["agent", "action"].mask.tolist() == [True, False, True]

    def test_requires_a_finite_action_spec(self):
        with pytest.raises(KeyError, match="ActionMask: in_key .action_mask. is not produced by the env PendulumEnv"):
            TransformedEnv(PendulumEnv(), ActionMask())
        primer = TensorDictPrimer(action_mask=Binary(4, dtype=torch.bool), default_value=True)
        env = TransformedEnv(PendulumEnv(), Compose(primer, ActionMask()))
        with pytest.raises(ValueError, match="the action spec at 'action' is BoundedContinuous; masking needs a finite spec"):
            env.reset()

    def test_missing_mask_key(self):
        with pytest.raises(KeyError, match="ActionMask: in_key .nope. is not produced by the env MaskedEnv"):
            TransformedEnv(MaskedEnv(), ActionMask(mask_key="nope"))

    def test_missing_action_key(self):
        with pytest.raises(KeyError, match="ActionMask: in_key .nope. is not produced by the env MaskedEnv"):
            TransformedEnv(MaskedEnv(), ActionMask(action_key="nope"))

    def test_standalone_use_raises(self):
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            ActionMask()(TensorDict(action_mask=torch.ones(2, dtype=torch.bool)))
        with pytest.raises(RuntimeError, match="must be used inside a TransformedEnv"):
            ActionMask().action_spec


def test_doctests():
    result = doctest.testmod(action_mask, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
