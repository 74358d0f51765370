from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn
from torch.func import functional_call

from test.objectives.loss_contract import LossContract
from torchrl._fast import set_fast_paths
from torchrl.data import Categorical, OneHot
from torchrl.modules import MLP
from torchrl.modules.tensordict_module import DistributionalQValueActor, QValueActor
from torchrl.objectives import DistributionalDQNLoss, DQNLoss, HardUpdate, SoftUpdate, ValueEstimators

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")

N_OBS, N_ACT = 4, 3


def qnet(out_key="action_value"):
    return TensorDictModule(MLP(in_features=N_OBS, out_features=N_ACT, num_cells=[16]), ["observation"], [out_key])


def batch(batch_size=(8,), categorical=False, seed=1):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(N_ACT, batch_size, generator=g)
    terminated = torch.rand(*batch_size, 1, generator=g) < 0.2
    done = terminated | (torch.rand(*batch_size, 1, generator=g) < 0.2)
    return TensorDict(
        {
            "observation": torch.randn(*batch_size, N_OBS, generator=g),
            "action": idx if categorical else F.one_hot(idx, N_ACT),
            "next": {
                "observation": torch.randn(*batch_size, N_OBS, generator=g),
                "reward": torch.randn(*batch_size, 1, generator=g),
                "done": done,
                "terminated": terminated,
            },
        },
        batch_size,
    )


def call(module, params, x):
    names = [".".join(k[1:]) for k in params.keys(True, True)]
    return functional_call(module, dict(zip(names, params.values(True, True))), (x,))


def dqn_reference(loss, td, *, double=False, gamma=0.99, loss_function="l2"):
    seq = isinstance(loss.value_network, TensorDictSequential)
    net = loss.value_network.module[0].module if seq else loss.value_network.module
    q = net(td["observation"])
    action = td["action"]
    if action.shape == q.shape:
        pred = (q * action).sum(-1)
    else:
        pred = q.gather(-1, action.reshape(*q.shape[:-1], 1)).squeeze(-1)
    with torch.no_grad():
        target_params = loss.target_value_network_params
        if seq:
            target_params = target_params["module", "0"]
        nq = call(net, target_params, td["next", "observation"])
        if double:
            best = net(td["next", "observation"]).argmax(-1, keepdim=True)
            nv = nq.gather(-1, best).squeeze(-1)
        else:
            nv = nq.max(-1).values
        target = td["next", "reward"].squeeze(-1) + gamma * (~td["next", "terminated"].squeeze(-1)).float() * nv
    fn = {"l2": F.mse_loss, "l1": F.l1_loss, "smooth_l1": F.smooth_l1_loss}[loss_function]
    return {"loss": fn(pred, target, reduction="none")}


class TestDQNContract(LossContract):
    loss_cls = DQNLoss
    loss_terms = ("loss",)
    renames = {"action": "act", "reward": "rew", "done": "dn", "terminated": "term"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        kwargs.setdefault("action_space", "one-hot")
        return DQNLoss(qnet(), **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return dqn_reference(loss, td)


class TestDQNDoubleContract(TestDQNContract):
    def make_loss(self, **kwargs):
        return super().make_loss(double_dqn=True, **kwargs)

    def reference(self, loss, td):
        return dqn_reference(loss, td, double=True)


class TestDQNQValueActorContract(TestDQNContract):
    """The seed's network: a QValueActor around a TensorDictModule (fast path through the actor)."""

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        actor = QValueActor(qnet(), in_keys=["observation"], spec=OneHot(N_ACT))
        return DQNLoss(actor, action_space=kwargs.pop("action_space", None) or OneHot(N_ACT), **kwargs)


class _Passthrough(TensorDictModuleBase):
    """A non-plain module (forces the generic, TensorDict path)."""

    def __init__(self, key):
        super().__init__()
        self.in_keys = [key]
        self.out_keys = [key]

    def forward(self, tensordict):
        tensordict.set(self.out_keys[0], tensordict.get(self.in_keys[0]) * 1.0)
        return tensordict


class TestDQNGenericPathContract(TestDQNContract):
    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        kwargs.setdefault("action_space", "one-hot")
        net = TensorDictSequential(qnet(), _Passthrough("action_value"))
        loss = DQNLoss(net, **kwargs)
        assert loss._fast is None
        return loss


@pytest.mark.parametrize("loss_function", ["l1", "smooth_l1"])
def test_loss_functions(loss_function):
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot", loss_function=loss_function, reduction="none")
    td = batch()
    torch.testing.assert_close(loss(td)["loss"], dqn_reference(loss, td, loss_function=loss_function)["loss"])


def test_unknown_loss_function():
    with pytest.raises(NotImplementedError, match="unknown loss_function 'huber'"):
        DQNLoss(qnet(), action_space="one-hot", loss_function="huber")


@pytest.mark.parametrize("trailing", [False, True])
def test_categorical_actions_match_one_hot(trailing):
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="categorical", reduction="none")
    td = batch(categorical=True)
    if trailing:
        td["action"] = td["action"].unsqueeze(-1)
    one_hot = batch()
    torch.testing.assert_close(loss(td)["loss"], dqn_reference(loss, one_hot)["loss"])


def test_no_target_network_uses_online_parameters():
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot", delay_value=False, reduction="none")
    assert not loss._target_pairs()
    td = batch()
    with torch.no_grad():
        loss.value_network.module[0].weight.add_(0.3)
    ref = dqn_reference(loss, td)["loss"]
    torch.testing.assert_close(loss(td)["loss"], ref)
    with pytest.raises(RuntimeError, match="no target parameters to update"):
        SoftUpdate(loss, tau=0.1)


def test_mean_loss_writes_per_sample_td_error_without_grad():
    torch.manual_seed(0)
    net = qnet()
    loss = DQNLoss(net, action_space="one-hot")  # mean reduction, l2: the fused path
    td = batch()
    per_elem = DQNLoss(net, action_space="one-hot", reduction="none")(td.clone())["loss"].detach()
    out = loss(td)["loss"]
    assert td["td_error"].shape == (8, 1) and not td["td_error"].requires_grad
    torch.testing.assert_close(td["td_error"].squeeze(-1), per_elem)
    torch.testing.assert_close(out, per_elem.mean())
    out.backward()
    assert all(p.grad is not None for p in loss.value_network.parameters())


def test_priority_written_and_weights_applied():
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot", reduction="none")
    td = batch()
    per_elem = loss(td)["loss"].detach()
    assert td["td_error"].shape == (8, 1)
    torch.testing.assert_close(td["td_error"].squeeze(-1), per_elem)
    weights = torch.rand(8)
    td["priority_weight"] = weights
    torch.testing.assert_close(loss(td)["loss"], per_elem * weights)
    loss_off = DQNLoss(qnet(), action_space="one-hot", reduction="none", use_prioritized_weights=False)
    loss_off.load_state_dict(loss.state_dict())
    torch.testing.assert_close(loss_off(td)["loss"], per_elem)
    required = DQNLoss(qnet(), action_space="one-hot", use_prioritized_weights=True)
    with pytest.raises(KeyError, match="priority_weight"):
        required(batch())


def test_set_keys_priority_and_action_value():
    torch.manual_seed(0)
    loss = DQNLoss(qnet("q"), action_space="one-hot")
    with set_fast_paths(True):
        loss.set_keys(action_value="q", priority="prio")
        td = batch()
        loss(td)
        assert "prio" in td.keys() and "td_error" not in td.keys()
        assert loss._fast is not None


def test_dispatch_keyword_call():
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot")
    td = batch()
    out = loss(
        observation=td["observation"], action=td["action"], next_observation=td["next", "observation"],
        next_reward=td["next", "reward"], next_done=td["next", "done"], next_terminated=td["next", "terminated"],
    )
    torch.testing.assert_close(out, loss(td)["loss"])


def test_action_shape_mismatch_names_tensors():
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot")
    td = batch()
    td["action"] = torch.zeros(8, N_ACT + 1)
    with pytest.raises(RuntimeError, match=r"'action_value' \(8, 3\), 'action' \(8, 4\)"):
        loss(td)
    cat = DQNLoss(qnet(), action_space="categorical")
    td = batch(categorical=True)
    td["action"] = torch.zeros(8, 2, dtype=torch.long)
    with pytest.raises(RuntimeError, match=r"'action' \(8, 2\)"):
        cat(td)


def test_reward_shape_mismatch_names_tensors():
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot")
    td = batch()
    td["next", "reward"] = torch.zeros(8, 2)
    with pytest.raises(RuntimeError, match=r"shapes differ: .*\('next', 'reward'\) \(8, 2\)"):
        loss(td)


@pytest.mark.parametrize(
    "space,expected",
    [("one_hot", "one-hot"), ("categorical", "categorical"), (OneHot(3), "one-hot"), (Categorical(3), "categorical"),
     ("binary", "binary"), ("mult-one-hot", "mult-one-hot")],
)
def test_action_space_names(space, expected):
    assert DQNLoss(qnet(), action_space=space).action_space == expected


def test_action_space_inferred_and_rejected():
    actor = QValueActor(qnet(), in_keys=["observation"], spec=Categorical(N_ACT))
    assert DQNLoss(actor).action_space == "categorical"
    with pytest.raises(ValueError, match="unknown action_space 'discrete'"):
        DQNLoss(qnet(), action_space="discrete")
    # as TorchRL: nothing to infer the action space from is a ValueError
    with pytest.raises(ValueError, match="neither action_space nor a spec on the value network"):
        DQNLoss(qnet())


def test_plain_module_is_wrapped():
    torch.manual_seed(0)
    loss = DQNLoss(nn.Linear(N_OBS, N_ACT), action_space="one-hot")
    assert loss.value_network.in_keys == ["observation"]
    assert loss(batch())["loss"].shape == ()


def test_gamma_keyword_is_refused():
    # as TorchRL 0.14: gamma goes to the value estimator, the constructor raises TypeError
    with pytest.raises(TypeError, match=r"gamma / lambda parameters through the loss constructor .*gamma=0.5"):
        DQNLoss(value_network=qnet(), gamma=0.5, action_space="one-hot")
    loss = DQNLoss(value_network=qnet(), gamma=None, action_space="one-hot")
    loss.make_value_estimator(gamma=0.5)
    assert float(loss.value_estimator.gamma) == 0.5
    td = batch()
    torch.testing.assert_close(loss(td)["loss"], dqn_reference(loss, td, gamma=0.5)["loss"].mean())


def test_td_lambda_estimator_against_functional():
    from torchrl.objectives.value.functional import vec_td_lambda_return_estimate

    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot", reduction="none")
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.7)
    td = batch((2, 5))
    net = loss.value_network.module
    pred = (net(td["observation"]) * td["action"]).sum(-1)
    with torch.no_grad():
        nv = call(net, loss.target_value_network_params, td["next", "observation"]).max(-1, keepdim=True).values
    target = vec_td_lambda_return_estimate(
        0.9, 0.7, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"], time_dim=1
    ).squeeze(-1)
    torch.testing.assert_close(loss(td)["loss"], (pred - target).pow(2))


def test_target_network_follows_updater():
    torch.manual_seed(0)
    loss = DQNLoss(qnet(), action_space="one-hot")
    updater = HardUpdate(loss, value_network_update_interval=1)
    opt = torch.optim.SGD(loss.parameters(), lr=0.1)
    td = batch()
    loss(td)["loss"].backward()
    opt.step()
    target_before = loss.target_value_network_params.clone()
    updater.step()
    online = loss.value_network_params
    for key in online.keys(True, True):
        assert torch.equal(loss.target_value_network_params[key], online[key].detach())
        assert not torch.equal(target_before[key], online[key].detach())


def test_seed_001_quickstart_loss_section():
    """The loss part of the 'Introduction to TorchRL' seed, as written there."""
    from torchrl.objectives import DQNLoss

    qnet_ = TensorDictModule(
        nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2)),
        in_keys=["observation"],
        out_keys=["action_value"],
    )
    actor = QValueActor(qnet_, in_keys=["observation"], spec=Categorical(n=2))
    loss_fn = DQNLoss(actor, action_space="categorical")
    batch_ = TensorDict(
        observation=torch.randn(32, 4),
        action=torch.randint(0, 2, (32,)),
        next=TensorDict(
            observation=torch.randn(32, 4),
            reward=torch.randn(32, 1),
            done=torch.zeros(32, 1, dtype=torch.bool),
            terminated=torch.zeros(32, 1, dtype=torch.bool),
            batch_size=[32],
        ),
        batch_size=[32],
    )
    loss_td = loss_fn(batch_)
    assert loss_td["loss"].shape == () and loss_td["loss"].requires_grad
    optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
    before = loss_fn(batch_)["loss"].item()
    for _ in range(20):
        loss = loss_fn(batch_)
        optimizer.zero_grad()
        loss["loss"].backward()
        optimizer.step()
    assert loss_fn(batch_)["loss"].item() < before


# ------------------------------------------------------------------------------------------ distributional
N_ATOMS = 7
SUPPORT = torch.linspace(-2.0, 2.0, N_ATOMS)


class _AtomNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(N_OBS, N_ATOMS * N_ACT)

    def forward(self, obs):
        return self.lin(obs).view(*obs.shape[:-1], N_ATOMS, N_ACT)


def c51_reference(loss, td, gamma):
    """The C51 projection written out with explicit loops over atoms."""
    net = loss.value_network.module[0].module
    logp = net(td["observation"]).log_softmax(-2)
    a = td["action"].argmax(-1)
    logp_a = logp[torch.arange(len(a)), :, a]
    with torch.no_grad():
        tparams = loss.target_value_network_params["module", "0"]
        probs = call(net, tparams, td["next", "observation"]).softmax(-2)
        best = (probs * SUPPORT[:, None]).sum(-2).argmax(-1)
        p = probs[torch.arange(len(a)), :, best]
        m = torch.zeros_like(p)
        dz = (SUPPORT[-1] - SUPPORT[0]) / (N_ATOMS - 1)
        for i in range(len(a)):
            not_term = 0.0 if td["next", "terminated"][i].item() else 1.0
            for j in range(N_ATOMS):
                tz = float(td["next", "reward"][i]) + gamma * not_term * float(SUPPORT[j])
                tz = min(max(tz, float(SUPPORT[0])), float(SUPPORT[-1]))
                b = (tz - float(SUPPORT[0])) / float(dz)
                lo, hi = int(torch.floor(torch.tensor(b))), int(torch.ceil(torch.tensor(b)))
                if lo == hi:
                    m[i, lo] += p[i, j]
                else:
                    m[i, lo] += p[i, j] * (hi - b)
                    m[i, hi] += p[i, j] * (b - lo)
    return {"loss": -(m * logp_a).sum(-1)}


class TestDistributionalDQNContract(LossContract):
    loss_cls = DistributionalDQNLoss
    loss_terms = ("loss",)
    renames = {"action": "act", "reward": "rew", "done": "dn", "terminated": "term"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        actor = DistributionalQValueActor(
            TensorDictModule(_AtomNet(), ["observation"], ["action_value"]), in_keys=["observation"],
            support=SUPPORT, action_space="one_hot",
        )
        return DistributionalDQNLoss(actor, gamma=0.9, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return c51_reference(loss, td, 0.9)

    def test_value_estimators(self):
        loss = self.make_loss()
        loss.make_value_estimator(ValueEstimators.TD0, gamma=0.5)
        assert loss.gamma == 0.5
        for value_type in (ValueEstimators.TD1, ValueEstimators.TDLambda, ValueEstimators.GAE):
            with pytest.raises(NotImplementedError, match="does not support the .* value estimator"):
                loss.make_value_estimator(value_type)


def test_distributional_state_dict_as_torchrl():
    loss = TestDistributionalDQNContract().make_loss()
    keys = sorted(loss.state_dict())
    assert "gamma" in keys and "support" not in keys  # gamma saved, the atoms read from the network
    assert "value_network_params.support" in keys and "target_value_network_params.support" in keys
    torch.testing.assert_close(loss.support, SUPPORT.to(loss.support.dtype))
    assert float(loss.gamma) == pytest.approx(0.9)


def test_distributional_needs_a_support():
    with pytest.raises(ValueError, match="has no `support` tensor"):
        DistributionalDQNLoss(TensorDictModule(_AtomNet(), ["observation"], ["action_value"]), gamma=0.9)


def test_distributional_categorical_actions():
    loss = TestDistributionalDQNContract().make_loss(reduction="none")
    td = batch()
    expected = loss(td.clone())["loss"]
    cat = td.clone()
    cat["action"] = td["action"].argmax(-1)
    torch.testing.assert_close(loss(cat)["loss"], expected)


def test_dqn_refuses_multi_agent_gae():
    loss = DQNLoss(QValueActor(torch.nn.Linear(3, 2), spec=OneHot(2)), action_space="one-hot")
    with pytest.raises(NotImplementedError, match="DQNLoss does not support the MAGAE value estimator"):
        loss.make_value_estimator(ValueEstimators.MAGAE)
