"""TensorDict modules: actors, critics, Q-value policies, exploration and recurrent modules.

Files, in reading order:

- ``common.py``: :class:`SafeModule` (a ``TensorDictModule`` with output specs) and :class:`VmapModule`.
- ``sequence.py``: :class:`SafeSequential`; ``probabilistic.py``: :class:`SafeProbabilisticModule`,
  :class:`SafeProbabilisticTensorDictSequential`.
- ``actors.py``: :class:`Actor`, :class:`ProbabilisticActor`, :class:`ValueOperator` and the actor-critic
  operators; ``q_value.py``: Q-value modules, actors and hooks; ``tanh.py``: :class:`TanhModule`.
- ``exploration.py``: epsilon-greedy, Gaussian and Ornstein-Uhlenbeck exploration (and the old wrappers).
- ``rnn.py``: :class:`LSTMModule`, :class:`GRUModule` (shared logic in ``_recurrent_base.py``, kernels in
  ``_rnn_core.py``), ``python_rnn.py``: :class:`LSTM`, :class:`GRU` and cells, ``recurrent_mode.py``:
  :class:`set_recurrent_mode` and the matmul-precision switch.
- ``policy_env.py``: the env transforms a policy needs (``InitTracker``, primers) and the
  ``EnvBase(policy=...)`` hook.
- ``world_models.py``: :class:`WorldModelWrapper`, :class:`WorldModel`.
"""
from __future__ import annotations

from torchrl.envs.utils import RandomPolicy
from torchrl.modules.tensordict_module.actors import (
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    ProbabilisticActor,
    ValueOperator,
)
from torchrl.modules.tensordict_module.common import SafeModule, VmapModule
from torchrl.modules.tensordict_module.exploration import (
    AdditiveGaussianModule,
    AdditiveGaussianWrapper,
    EGreedyModule,
    EGreedyWrapper,
    OrnsteinUhlenbeckProcessModule,
    OrnsteinUhlenbeckProcessWrapper,
    set_exploration_modules_spec_from_env,
)
from torchrl.modules.tensordict_module._policy_env import (
    apply_policy_env_transforms,
    get_env_transforms_from_module,
    get_primers_from_module,
)
from torchrl.modules.tensordict_module.probabilistic import (
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
)
from torchrl.modules.tensordict_module._q_value import (
    DistributionalQValueActor,
    DistributionalQValueHook,
    DistributionalQValueModule,
    QValueActor,
    QValueHook,
    QValueModule,
)
from torchrl.modules.tensordict_module.rnn import (
    canonicalize_rnn_subset,
    get_recurrent_matmul_precision,
    GRU,
    GRUCell,
    GRUModule,
    LSTM,
    LSTMCell,
    LSTMModule,
    recurrent_mode,
    RecurrentMatmulPrecision,
    RecurrentMatmulPrecisionUserMode,
    set_recurrent_matmul_precision,
    set_recurrent_mode,
)
from torchrl.modules.tensordict_module.sequence import SafeSequential
from torchrl.modules.tensordict_module._tanh import TanhModule
from torchrl.modules.tensordict_module.world_models import WorldModel, WorldModelWrapper

__all__ = [
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "AdditiveGaussianModule",
    "AdditiveGaussianWrapper",
    "DistributionalQValueActor",
    "DistributionalQValueHook",
    "DistributionalQValueModule",
    "EGreedyModule",
    "EGreedyWrapper",
    "GRU",
    "GRUCell",
    "GRUModule",
    "LSTM",
    "LSTMCell",
    "LSTMModule",
    "OrnsteinUhlenbeckProcessModule",
    "OrnsteinUhlenbeckProcessWrapper",
    "ProbabilisticActor",
    "QValueActor",
    "QValueHook",
    "QValueModule",
    "RandomPolicy",
    "RecurrentMatmulPrecision",
    "RecurrentMatmulPrecisionUserMode",
    "SafeModule",
    "SafeProbabilisticModule",
    "SafeProbabilisticTensorDictSequential",
    "SafeSequential",
    "TanhModule",
    "ValueOperator",
    "VmapModule",
    "WorldModel",
    "WorldModelWrapper",
    "apply_policy_env_transforms",
    "canonicalize_rnn_subset",
    "get_env_transforms_from_module",
    "get_primers_from_module",
    "get_recurrent_matmul_precision",
    "recurrent_mode",
    "set_exploration_modules_spec_from_env",
    "set_recurrent_matmul_precision",
    "set_recurrent_mode",
]
