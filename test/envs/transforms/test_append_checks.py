"""Bad input fails when a transform is attached to an env (construction, ``append_transform``,
``insert_transform``), naming the key and what was found: never inside the first step."""
import pytest
import torch

from torchrl.data import Unbounded
from torchrl.envs import Compose, PendulumEnv, TransformedEnv
from torchrl.envs.transforms import (
    CatFrames,
    CatTensors,
    CenterCrop,
    ClipTransform,
    DTypeCastTransform,
    FlattenObservation,
    GrayScale,
    Hash,
    ObservationNorm,
    ObservationTransform,
    PermuteTransform,
    RenameTransform,
    Resize,
    RewardScaling,
    RewardSum,
    SignTransform,
    StepCounter,
    TensorDictPrimer,
    ToTensorImage,
    UnsqueezeTransform,
    VecNorm,
    VecNormV2,
)

MISSING_KEY = {
    "ObservationNorm": lambda: ObservationNorm(loc=0.0, scale=1.0, in_keys=["nope"]),
    "DTypeCastTransform": lambda: DTypeCastTransform(torch.float64, torch.float32, in_keys=["nope"]),
    "VecNorm": lambda: VecNorm(in_keys=["nope"]),
    "VecNormV2": lambda: VecNormV2(in_keys=["nope"]),
    "ToTensorImage": lambda: ToTensorImage(in_keys=["nope"]),
    "Resize": lambda: Resize(8, 8, in_keys=["nope"]),
    "GrayScale": lambda: GrayScale(in_keys=["nope"]),
    "CenterCrop": lambda: CenterCrop(4, in_keys=["nope"]),
    "PermuteTransform": lambda: PermuteTransform((-1, -2), in_keys=["nope"]),
    "FlattenObservation": lambda: FlattenObservation(-2, -1, in_keys=["nope"]),
    "Hash": lambda: Hash(in_keys=["nope"], out_keys=["h"]),
    "CatFrames": lambda: CatFrames(N=4, dim=-1, in_keys=["nope"]),
    "ClipTransform": lambda: ClipTransform(in_keys=["nope"], low=0.0, high=1.0),
    "RewardScaling": lambda: RewardScaling(0.0, 1.0, in_keys=["nope"]),
    "RewardSum": lambda: RewardSum(in_keys=["nope"]),
    "CatTensors": lambda: CatTensors(in_keys=["nope", "th"], out_key="x"),
    "UnsqueezeTransform": lambda: UnsqueezeTransform(-1, in_keys=["nope"]),
    "SignTransform": lambda: SignTransform(in_keys=["nope"]),
    "RenameTransform": lambda: RenameTransform(["nope"], ["x"]),
}


@pytest.mark.parametrize("name", sorted(MISSING_KEY))
def test_missing_key_fails_at_construction(name):
    with pytest.raises((KeyError, ValueError), match="nope") as info:
        TransformedEnv(PendulumEnv(), MISSING_KEY[name]())
    assert name in str(info.value)


@pytest.mark.parametrize("name", ["ObservationNorm", "Resize", "CatFrames", "VecNormV2"])
def test_missing_key_fails_at_append_and_insert(name):
    env = TransformedEnv(PendulumEnv(), StepCounter())
    with pytest.raises(KeyError, match=f"{name}: in_key .nope. is "):
        env.append_transform(MISSING_KEY[name]())
    with pytest.raises(KeyError, match=f"{name}: in_key .nope. is "):
        env.insert_transform(0, MISSING_KEY[name]())
    # the refused transform was taken out again: the env is as before
    assert [type(t).__name__ for t in env.transform] == ["StepCounter"]
    assert env.rollout(2)["next", "step_count"].squeeze(-1).tolist() == [1, 2]


def test_the_message_lists_what_the_env_has():
    with pytest.raises(KeyError, match=r"available entries: .*observation.*reward.*th, thdot"):
        TransformedEnv(PendulumEnv(), ObservationNorm(loc=0.0, scale=1.0, in_keys=["nope"]))


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: ToTensorImage(in_keys=["observation"]), RuntimeError, r"expected images of shape \(\.\.\., H, W, C\), got an entry of shape \(3,\)"),
        (lambda: Resize(8, 8, in_keys=["observation"]), ValueError, r"Resize: expected images of shape \(\.\.\., C, H, W\), got an entry of shape \(3,\)"),
        (lambda: GrayScale(in_keys=["observation"]), TypeError, r"GrayScale: expected RGB images of shape \(\.\.\., 3, H, W\), got an entry of shape \(3,\)"),
        (lambda: CenterCrop(4, in_keys=["th"]), ValueError, r"CenterCrop: expected images of shape \(\.\.\., H, W\), got an entry of shape \(\)"),
    ],
)
def test_wrong_shapes_fail_at_construction(make, error, match):
    with pytest.raises(error, match=match):
        TransformedEnv(PendulumEnv(), make())


def test_keys_made_by_an_earlier_transform_are_accepted():
    primer = TensorDictPrimer(hidden=Unbounded((4,)))
    env = TransformedEnv(PendulumEnv(), Compose(primer, ObservationNorm(loc=1.0, scale=2.0, in_keys=["hidden"])))
    assert env.reset()["hidden"].tolist() == [1.0] * 4  # 0 * 2 + 1


def test_stored_data_keys_and_lenient_transforms_are_not_checked():
    # ("next", ...) entries are meant for replay buffers; SelectTransform ignores absent keys, as TorchRL
    from torchrl.envs.transforms import SelectTransform

    TransformedEnv(PendulumEnv(), ObservationNorm(loc=0.0, scale=1.0, in_keys=["th", ("next", "th")]))
    TransformedEnv(PendulumEnv(), SelectTransform("nope", "th"))


def test_lazy_statistics_defer_the_checks_until_initialised():
    # the tutorials' pattern: attach an ObservationNorm without statistics, then init_stats
    env = TransformedEnv(PendulumEnv(seed=0), ObservationNorm(in_keys=["observation"]))
    env.transform.init_stats(8)
    assert env.observation_spec["observation"].shape == (3,)


def test_observation_transform_base_is_exported():
    assert issubclass(ObservationNorm, ObservationTransform)
