"""TorchRL 0.14.1's module paths under ``torchrl.envs.transforms`` re-export the transforms they held there."""
from __future__ import annotations

import importlib

import pytest

import torchrl.envs.transforms as transforms
from torchrl.envs.transforms._running_mean_std import RunningMeanStd

# module -> names TorchRL 0.14.1 defines there (checked with `import torchrl.envs.transforms.<module>` in 0.14.1)
PATHS = {
    "r3m": ["R3MTransform"],
    "vip": ["VIPTransform", "VIPRewardTransform"],
    "vc1": ["VC1Transform"],
    "rnd": ["RNDTransform", "RunningMeanStd"],
    "rb_transforms": ["MultiStepTransform", "NextStateReconstructor", "PolicyAgeFilter"],
    "vecnorm": ["VecNorm", "VecNormV2"],
}
CASES = [(module, name) for module, names in PATHS.items() for name in names]


@pytest.mark.parametrize("module,name", CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_name_importable_from_torchrl_path(module, name):
    mod = importlib.import_module(f"torchrl.envs.transforms.{module}")
    obj = getattr(mod, name)
    expected = RunningMeanStd if name == "RunningMeanStd" else getattr(transforms, name)
    assert obj is expected  # the same class, not a copy: isinstance checks agree across paths
    assert name in mod.__all__


@pytest.mark.parametrize("module", sorted(PATHS))
def test_star_import_gives_exactly_torchrl_names(module):
    namespace: dict = {}
    exec(f"from torchrl.envs.transforms.{module} import *", namespace)
    assert sorted(n for n in namespace if not n.startswith("__")) == sorted(PATHS[module])


def test_from_import_statements():
    from torchrl.envs.transforms.r3m import R3MTransform
    from torchrl.envs.transforms.rb_transforms import MultiStepTransform
    from torchrl.envs.transforms.rnd import RNDTransform, RunningMeanStd as Rms
    from torchrl.envs.transforms.vc1 import VC1Transform
    from torchrl.envs.transforms.vecnorm import VecNormV2
    from torchrl.envs.transforms.vip import VIPRewardTransform, VIPTransform

    assert issubclass(VIPRewardTransform, VIPTransform)
    assert Rms is RunningMeanStd
    for cls in (R3MTransform, MultiStepTransform, RNDTransform, VC1Transform, VecNormV2):
        assert issubclass(cls, transforms.Transform)
