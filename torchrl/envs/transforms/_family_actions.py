"""Re-exports of the action transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._action_chunk_transform import ActionChunkTransform
from torchrl.envs.transforms._action_discretizer import ActionDiscretizer
from torchrl.envs.transforms._action_scaling import ActionScaling
from torchrl.envs.transforms._discrete_action_projection import DiscreteActionProjection
from torchrl.envs.transforms._flatten_action import FlattenAction
from torchrl.envs.transforms._mean_action_selector import MeanActionSelector
from torchrl.envs.transforms._multi_action import MultiAction

__all__: list[str] = ["ActionChunkTransform", "ActionDiscretizer", "ActionScaling", "DiscreteActionProjection", "FlattenAction", "MeanActionSelector", "MultiAction"]
