"""Which names of the TorchRL 0.14.1 API this project covers, module by module.

Each issue that lands a module adds its names here; ``test_api.py`` then checks that every listed name
exists with TorchRL's parameter names (extra keyword-only options with defaults are allowed).
"""
from __future__ import annotations

SPEC_NAMES = [
    "Binary", "BinaryBox", "Bounded", "BoundedContinuous", "BoundedDiscrete", "Box", "BoxList", "Categorical",
    "CategoricalBox", "Choice", "Composite", "ContinuousBox", "DEVICE_ERR_MSG", "DEVICE_TYPING", "DiscreteBox",
    "INDEX_TYPING", "MultiCategorical", "MultiOneHot", "NonTensor", "OneHot", "SHAPE_INDEX_TYPING", "Stacked",
    "StackedComposite", "TensorSpec", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
]

# Names of torchrl.modules.models / .distributions that later issues cover (DreamerV3, planners, LLM/ACT).
MODULES_LATER = [
    "ConsistentDropoutModule", "DreamerV3BlockGRU", "DreamerV3BlockGRUCell", "DreamerV3ImageDecoder",
    "DreamerV3ImageEncoder", "DreamerV3MLP", "RSSMPriorV3", "RSSMPosteriorV3", "RSSMRolloutV3",
    "RSSMStateEstimatorV3", "GPWorldModel", "RBFController", "ACTModel", "DecisionTransformer", "DTActor",
    "OnlineDTActor", "GPT2RewardModel", "LLMMaskedCategorical",
]

ENV_TRANSFORMS = [
    "CatTensors", "ClipTransform", "Compose", "DTypeCastTransform", "DeviceCastTransform", "DoubleToFloat",
    "InitTracker", "ObservationNorm", "ObservationTransform", "RewardClipping", "RewardScaling", "RewardSum",
    "SqueezeTransform", "StepCounter", "Transform", "TransformedEnv", "UnsqueezeTransform", "VecNorm",
    "ActionMask", "AutoResetEnv", "AutoResetTransform", "ExcludeTransform", "FrameSkipTransform", "NoopResetEnv",
    "RenameTransform", "SelectTransform", "TensorDictPrimer", "TrajCounter",
    # issue 20: the transform library
    "ActionChunkTransform", "ActionDiscretizer", "ActionScaling", "BatchSizeTransform", "BinarizeReward",
    "BurnInTransform", "CatFrames", "CenterCrop", "ConditionalPolicySwitch", "ConditionalSkip", "Crop", "DecodeVideoTransform",
    "DiscreteActionProjection", "EndOfLifeTransform", "ExpandAs", "FiniteTensorDictCheck", "FlattenAction",
    "FlattenObservation", "GrayScale", "Hash", "LineariseRewards", "MeanActionSelector", "ModuleTransform",
    "MultiAction", "MultiStepTransform", "NextObservationDelta", "NextStateReconstructor", "PermuteTransform",
    "PinMemoryTransform", "PolicyAgeFilter", "R3MTransform", "RNDTransform", "RandomCropTensorDict",
    "RandomTruncationTransform", "RemoveEmptySpecs", "Resize", "Reward2GoTransform", "RunningMeanStd",
    "SignTransform", "Stack", "SuccessReward", "TargetReturn", "TerminateTransform", "TimeMaxPool", "Timer",
    "ToTensorImage", "UnaryTransform", "VC1Transform", "VIPRewardTransform", "VIPTransform", "VecGymEnvTransform",
    "VecNormV2", "gSDENoise",
]
# transforms TorchRL exports from torchrl.envs.transforms but not from torchrl.envs
TRANSFORMS_ONLY = {"ModuleTransform", "NextStateReconstructor", "PolicyAgeFilter", "RNDTransform", "RunningMeanStd"}
ENV_NAMES = [
    "EnvBase", "ExplorationType", "MarlGroupMapType", "PendulumEnv", "TicTacToeEnv", "check_env_specs",
    "check_marl_grouping", "exploration_type", "get_available_libraries", "make_composite_from_td",
    "GymEnv", "GymWrapper", "GymLikeEnv", "default_info_dict_reader", "set_gym_backend", "gym_backend",
    "register_gym_spec_conversion", "MultiThreadedEnv", "MultiThreadedEnvWrapper", "SerialEnv", "ParallelEnv", "EnvCreator", "EnvMetaData", "env_creator",
    "get_env_metadata",
    "set_exploration_type", "step_mdp", "terminated_or_truncated",
]

# Replay-buffer names covered; Ray/remote/redis/LLM/MCTS/H5 and streaming names come with later issues.
RB_LATER = [
    "RayReplayBuffer", "StoreStorage", "PromptGroupSampler", "StalenessAwareSampler",
    "ConsumingSampler", "H5Split", "H5Combine", "H5StorageCheckpointer", "StreamingSliceSampler",
]


TD_MODULES_LATER = [
    "MultiStepActorWrapper", "DiffusionActor", "DecisionTransformerInferenceWrapper", "DreamerV3DiscreteActor",
    "DreamerV3SeededPolicy", "LMHeadActorValueOperator",
]
# torchrl.modules names from later issues: planners, MCTS, value norms, VLA/LeRobot, LLM.
MODULES_TOP_LATER = [
    "CEMPlanner", "MPCPlannerBase", "MPPIPlanner", "EXP3Score", "MCTSScore", "MCTSScores", "PUCTScore",
    "UCB1TunedScore", "UCBScore", "PercentileValueNorm", "PopArtValueNorm", "RunningValueNorm", "ValueNorm",
    "ComposeValueTransform", "IdentityValueTransform", "SignedHyperbolicValueTransform", "SymLogValueTransform",
    "ValueTransform", "TinyVLA", "VLAWrapperBase", "LeRobotPolicyWrapper", "RecurrentMatmulPrecision",
    "RecurrentMatmulPrecisionUserMode", "get_recurrent_matmul_precision", "set_recurrent_matmul_precision",
    "canonicalize_rnn_subset", "signed_hyperbolic", "signed_parabolic", "symexp", "symlog",
]

# Losses that land with the rest of issue 7 (PPO family, A2C, REINFORCE, SAC) or later issues.
OBJECTIVES_LATER = [
    "ACTLoss", "BCLoss", "CQLLoss", "CrossQLoss", "DTLoss", "DiffusionBCLoss",
    "DiscreteCQLLoss", "DiscreteIQLLoss", "DreamerActorLoss", "DreamerModelLoss",
    "DreamerV3ActorLoss", "DreamerV3Loss", "DreamerV3ModelLoss", "DreamerV3ValueLoss", "DreamerValueLoss",
    "ExponentialQuadraticCost", "GAILLoss", "IPPOLoss", "IQLLoss", "MAPPOLoss", "OnlineDTLoss",
    "QMixerLoss", "REDQLoss", "RNDLoss", "TQCLoss", "WorldModelLoss",
    "categorical_kl_balanced", "categorical_kl_terms",
]

# torchrl.weight_update: the Ray transports come with the rest of issue 21.
WEIGHT_UPDATE_LATER = [
    "RayTransport",
    "RayWeightSyncScheme", "RayModuleTransformScheme",
]

SCOPE: dict[str, list[str] | str | tuple[str, list[str]]] = {
    "torchrl.weight_update": ("all", WEIGHT_UPDATE_LATER),
    "torchrl": "all",
    "torchrl.data.tensor_specs": SPEC_NAMES,
    "torchrl.objectives.value.functional": "all",
    "torchrl.collectors": ("all", ["AsyncBatchedCollector", "RemoteModuleWeightUpdater"]),
    "torchrl.collectors.utils": "all",
    "torchrl.collectors.distributed": "all",
    "torchrl.trainers": "all",
    "torchrl.objectives.value": "all",
    "torchrl.objectives.utils": ("all", ["Tensor"]),
    "torchrl.objectives": ("all", OBJECTIVES_LATER),
    "torchrl.record": "all",
    "torchrl.record.loggers": "all",
    "torchrl.modules.tensordict_module": ("all", TD_MODULES_LATER),
    "torchrl.modules": ("all", MODULES_LATER + TD_MODULES_LATER + MODULES_TOP_LATER),
    "torchrl.envs.libs.gym": "all",
    "torchrl.envs.libs.envpool": "all",
    "torchrl.envs.libs": ["GymEnv", "GymWrapper", "MultiThreadedEnv", "MultiThreadedEnvWrapper", "set_gym_backend", "gym_backend", "register_gym_spec_conversion"],
    "torchrl.data.replay_buffers": ("all", RB_LATER),
    "torchrl.data.replay_buffers.samplers": ("all", RB_LATER),
    "torchrl.data.replay_buffers.storages": ("all", RB_LATER),
    "torchrl.data.replay_buffers.writers": ("all", RB_LATER),
    "torchrl.data.postprocs": "all",
    "torchrl.envs.transforms": ENV_TRANSFORMS,
    "torchrl.envs": [n for n in ENV_TRANSFORMS if n not in TRANSFORMS_ONLY] + ENV_NAMES,
    "torchrl.testing": ["get_default_devices", "get_available_devices", "retry", "rand_reset"],
    "torchrl.testing.mocking_classes": [
        "CountingEnv", "NestedCountingEnv", "CountingEnvCountPolicy", "ContinuousActionVecMockEnv",
        "DiscreteActionVecMockEnv", "DiscreteActionConvMockEnv", "MultiKeyCountingEnv", "HeterogeneousCountingEnv",
        "MockSerialEnv", "MockBatchedLockedEnv", "MockBatchedUnLockedEnv",
    ],
    "torchrl.modules.models": ("all", MODULES_LATER),
    "torchrl.modules.distributions": ("all", MODULES_LATER),
    "torchrl.data": [
        "Binary", "Bounded", "BoundedContinuous", "Categorical", "Choice", "Composite", "DEVICE_TYPING",
        "MultiCategorical", "MultiOneHot", "NonTensor", "OneHot", "Stacked", "StackedComposite", "TensorSpec",
        "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
    ],
}
