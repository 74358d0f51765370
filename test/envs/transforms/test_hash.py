import doctest
import hashlib

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import Hash, UnaryTransform
from torchrl.envs.transforms import _hash as module

from test.envs.transforms.contract import TransformContract


def sha(text: str) -> list[int]:
    return list(hashlib.sha256(text.encode()).digest())


class TestHash(TransformContract):
    def make_transform(self):
        return Hash(in_keys=["th"], out_keys=["th_hash"])

    def test_is_unary(self):
        assert isinstance(self.make_transform(), UnaryTransform)

    def test_known_answers(self):
        # TorchRL 0.14.1 gives the same digests (SHA-256 of seed + text)
        t = Hash(in_keys=["s"], out_keys=["h"])
        h = t(TensorDict(s=NonTensorData("abc")))["h"]
        assert h.dtype == torch.uint8 and h.tolist() == sha("abc") and h[:4].tolist() == [186, 120, 22, 191]
        t = Hash(in_keys=["s"], out_keys=["h"], seed="x")
        assert t(TensorDict(s=NonTensorData("abc")))["h"].tolist() == sha("xabc")
        t = Hash(in_keys=["o"], out_keys=["h"])
        assert t(TensorDict(o=torch.tensor([1.0, 2.0])))["h"].tolist() == sha(str(torch.tensor([1.0, 2.0])))
        assert Hash.reproducible_hash("abc", seed="x").tolist() == sha("xabc")

    def test_batched_strings(self):
        td = TensorDict(s=NonTensorStack("abc", "de"), batch_size=[2])
        h = Hash(in_keys=["s"], out_keys=["h"])(td)["h"]
        assert h.shape == (2, 32) and h[0].tolist() == sha("abc") and h[1].tolist() == sha("de")

    def test_custom_hash_fn(self):
        t = Hash(in_keys=["s"], out_keys=["h"], hash_fn=lambda x: torch.tensor([len(x)]))
        assert t(TensorDict(s=NonTensorData("abc")))["h"].tolist() == [3]
        t = Hash(in_keys=["s"], out_keys=["h"], hash_fn=lambda x, seed: torch.tensor([len(seed + x)]), seed="zz")
        assert t(TensorDict(s=NonTensorData("abc")))["h"].tolist() == [5]  # hash_fn(value, seed), as TorchRL

    def test_repertoire_and_inverse(self):
        t = Hash(in_keys=["s"], out_keys=["h"], in_keys_inv=["s"], out_keys_inv=["h"], repertoire={})
        h = t(TensorDict(s=NonTensorData("abc")))["h"]
        assert t.get_input_from_hash(h) == "abc"
        assert Hash.hash_to_repertoire_key(h) == tuple(sha("abc"))
        assert t.inv(TensorDict(h=h)).get("s").data == "abc"
        state = t.state_dict()
        assert list(state) == ["_repertoire"] and state["_repertoire"][tuple(sha("abc"))] == "abc"
        other = Hash(in_keys=["s"], out_keys=["h"], repertoire={})
        other.load_state_dict(state)
        assert other.get_input_from_hash(h) == "abc"
        assert list(Hash(in_keys=["s"], out_keys=["h"]).state_dict()) == ["_repertoire"]

    def test_env_specs(self):
        env = TransformedEnv(PendulumEnv(batch_size=[3], seed=0), self.make_transform())
        spec = env.observation_spec["th_hash"]
        assert spec.shape == (3, 32) and spec.dtype == torch.uint8
        data = env.rollout(2)
        assert data["next", "th_hash"][1, 0].tolist() == sha(str(data["next", "th"][1, 0]))
        check_env_specs(env, seed=0)

    def test_errors(self):
        t = Hash(in_keys=["s"], out_keys=["h"])
        with pytest.raises(RuntimeError, match="repertoire is None"):
            t.get_input_from_hash(torch.zeros(32, dtype=torch.uint8))
        with pytest.raises(KeyError, match="not in the repertoire"):
            Hash(in_keys=["s"], out_keys=["h"], repertoire={}).get_input_from_hash(torch.zeros(32, dtype=torch.uint8))
        t = Hash(in_keys=["s"], out_keys=["h"], in_keys_inv=["s"], out_keys_inv=["h"])  # accepted, as TorchRL
        with pytest.raises(RuntimeError, match="repertoire is None"):
            t.inv(TensorDict(h=torch.zeros(32, dtype=torch.uint8)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
