"""Small deterministic gymnasium envs for the gym wrapper tests."""
from __future__ import annotations

import gymnasium
import numpy as np

S = gymnasium.spaces


class CountEnv(gymnasium.Env):
    """Counts up by ``1 + action``; reward 1 per step; terminates once the count reaches ``end``.

    The observation is float64; ``info`` holds the count (also at reset), whether it is even, and a
    string label (steps only). ``render`` returns a 2x3 frame filled with the count.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, end: int = 5, render_mode: str | None = None, reuse_buffer: bool = False):
        self.observation_space = S.Box(-np.inf, np.inf, (1,), np.float64)
        self.action_space = S.Discrete(2)
        self.end = end
        self.render_mode = render_mode
        self.reuse_buffer = reuse_buffer
        self._buffer = np.zeros(1, np.float64)
        self.count = 0
        self.actions: list = []

    def _obs(self) -> np.ndarray:
        if self.reuse_buffer:
            self._buffer[0] = self.count
            return self._buffer
        return np.array([self.count], np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = int((options or {}).get("start", 0))
        return self._obs(), {"count": self.count}

    def step(self, action):
        self.actions.append(action)
        self.count += 1 + int(action)
        terminated = self.count >= self.end
        info = {"count": self.count, "even": self.count % 2 == 0, "label": f"c{self.count}"}
        return self._obs(), 1.0, terminated, False, info

    def render(self):
        return np.full((2, 3, 3), self.count, np.uint8)


class DictEnv(gymnasium.Env):
    """Dict observations (with a ``"state"`` entry) and a Dict action space; records the actions received."""

    def __init__(self):
        self.observation_space = S.Dict(
            {"state": S.Box(-1, 1, (2,), np.float32), "mode": S.Discrete(3), "flags": S.MultiBinary(2)}
        )
        self.action_space = S.Dict({"steer": S.Box(-1, 1, (1,), np.float32), "gear": S.Discrete(4)})
        self.actions: list = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        self.last = self.observation_space.sample()
        return self.last, {}

    def step(self, action):
        self.actions.append(action)
        self.t += 1
        self.last = self.observation_space.sample()
        return self.last, float(action["gear"]), False, self.t >= 4, {}


class SpaceEnv(gymnasium.Env):
    """Observations drawn from ``obs_space`` (seeded by ``reset(seed=...)``), any action space; reward 1 per
    step; records the actions received."""

    def __init__(self, obs_space, act_space):
        self.observation_space = obs_space
        self.action_space = act_space
        self.actions: list = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        self.actions.append(action)
        return self.observation_space.sample(), 1.0, False, False, {}
