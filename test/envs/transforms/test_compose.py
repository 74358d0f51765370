"""Compose as a list of transforms, as TorchRL 0.14.1 (indexing, append/insert, containers)."""
import pytest

from torchrl.envs import Compose, InitTracker, PendulumEnv, RewardSum, StepCounter, TransformedEnv


def _names(c):
    return [type(t).__name__ for t in c]


def test_indexing():
    c = Compose(StepCounter(), RewardSum(), InitTracker())
    assert type(c[0]).__name__ == "StepCounter" and type(c[-1]).__name__ == "InitTracker"
    assert isinstance(c[::-1], Compose) and _names(c[::-1]) == ["InitTracker", "RewardSum", "StepCounter"]
    assert _names(c[1:]) == ["RewardSum", "InitTracker"]
    with pytest.raises(TypeError, match="Compose indices must be integers or slices, got list"):
        c[[0, 2]]


def test_insert_bounds_and_types():
    c = Compose(StepCounter(), RewardSum())
    c.insert(-1, InitTracker())
    assert _names(c) == ["StepCounter", "InitTracker", "RewardSum"]
    c.insert(3, InitTracker())
    assert _names(c)[-1] == "InitTracker"
    with pytest.raises(ValueError, match=r"index 5 out of range: expected one in \[-4, 4\]"):
        c.insert(5, RewardSum())
    with pytest.raises(ValueError, match="Compose.insert: expected a Transform or a callable"):
        c.insert(0, 3)
    with pytest.raises(ValueError, match="Compose.append: expected a Transform or a callable"):
        c.append(3)
    with pytest.raises(ValueError, match="Compose: expected a Transform or a callable"):
        Compose(3)


def test_a_transform_with_a_parent_env_cannot_move():
    t = StepCounter()
    Compose(t)
    second = Compose(t)  # no env above: it may move, as in TorchRL
    assert t.container is second
    TransformedEnv(PendulumEnv(), second)
    with pytest.raises(AttributeError, match="use transform.clone"):
        Compose(t)
    with pytest.raises(AttributeError, match="use transform.clone"):
        TransformedEnv(PendulumEnv(), t)
