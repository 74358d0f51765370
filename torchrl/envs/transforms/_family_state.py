"""Re-exports of the state and episode-control transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._conditional_policy_switch import ConditionalPolicySwitch
from torchrl.envs.transforms._conditional_skip import ConditionalSkip
from torchrl.envs.transforms._end_of_life import EndOfLifeTransform
from torchrl.envs.transforms._next_observation_delta import NextObservationDelta
from torchrl.envs.transforms._next_state_reconstructor import NextStateReconstructor
from torchrl.envs.transforms._terminate import TerminateTransform

__all__: list[str] = [
    "ConditionalPolicySwitch",
    "ConditionalSkip",
    "EndOfLifeTransform",
    "NextObservationDelta",
    "NextStateReconstructor",
    "TerminateTransform",
]
