"""``EnvBase.__init__`` keywords (``torchrl/envs/common.py``), as TorchRL 0.14.1's."""
from __future__ import annotations

import pytest
import torch

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase


class _Env(EnvBase):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(obs=Unbounded((*self.batch_size, 1)), shape=self.batch_size)
        self.action_spec = Bounded(-1, 1, (*self.batch_size, 1))

    def _reset(self, td):
        return None

    def _step(self, td):
        return None

    def _set_seed(self, seed):
        return None


def test_keywords():
    env = _Env(batch_size=[2], device="cpu", spec_locked=False, auto_reset=False, run_type_checks=False,
               allow_done_after_reset=True)
    assert env.batch_size == (2,) and env.device == torch.device("cpu") and not env.is_spec_locked
    assert _Env().is_spec_locked


@pytest.mark.parametrize("name", ["action_spec", "observation_spec", "reward_spec", "done_spec", "state_spec", "foo"])
def test_specs_are_not_constructor_keywords(name):
    # TorchRL's EnvBase takes no spec keywords: specs are set in the subclass's __init__ (as _Env does)
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
        _Env(**{name: Unbounded((1,))})
