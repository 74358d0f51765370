"""Tests of ``torchrl.modules.models``: shapes for the options that matter, lazy layers, known answers."""
from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torch.nn import functional as F

import torchrl._utils._deprecation as _deprecation
from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.modules.models import (
    BatchRenorm1d,
    biased_softplus,
    ConsistentDropout,
    Conv2dNet,
    Conv3dNet,
    ConvNet,
    CrossCriticGroupSpec,
    CrossGroupCritic,
    DdpgCnnActor,
    DdpgCnnQNet,
    DdpgMlpActor,
    DdpgMlpQNet,
    DistributionalDQNnet,
    DreamerActor,
    DuelingCnnDQNet,
    DuelingMlpDQNet,
    inv_softplus,
    LSTMNet,
    mappings,
    MLP,
    MultiAgentConvNet,
    MultiAgentMLP,
    NoisyLazyLinear,
    NoisyLinear,
    ObsDecoder,
    ObsEncoder,
    QMixer,
    reset_noise,
    RSSMPosterior,
    RSSMPrior,
    RSSMRollout,
    SquashDims,
    Squeeze2dLayer,
    SqueezeLayer,
    SymExpTwoHot,
    VDNMixer,
)


# ---------------------------------------------------------------------------------------------- MLP
class TestMLP:
    def test_seed_examples(self):
        assert MLP(in_features=64, out_features=10, num_cells=[128, 128])(torch.randn(4, 64)).shape == (4, 10)
        mlp = MLP(in_features=4, out_features=2, num_cells=[64, 64])
        assert [type(m) for m in mlp] == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear]
        assert [m.out_features for m in mlp if isinstance(m, nn.Linear)] == [64, 64, 2]

    @pytest.mark.parametrize(
        "depth,num_cells,hidden",
        # TorchRL 0.14.1: without depth and num_cells the MLP is a single linear layer
        [(None, None, []), (2, None, [32, 32]), (0, None, []), (2, 16, [16, 16]), (None, [8, 9, 10], [8, 9, 10]),
         (3, [8, 9, 10], [8, 9, 10])],
    )
    def test_depth_and_num_cells(self, depth, num_cells, hidden):
        mlp = MLP(in_features=3, out_features=5, depth=depth, num_cells=num_cells)
        assert [m.out_features for m in mlp if isinstance(m, nn.Linear)] == hidden + [5]
        assert mlp.depth == len(hidden)
        assert mlp(torch.randn(2, 3)).shape == (2, 5)

    def test_depth_num_cells_errors(self):
        with pytest.raises(RuntimeError, match=r"depth=2 conflicts with num_cells=\[8, 9, 10\]"):
            MLP(in_features=3, out_features=5, depth=2, num_cells=[8, 9, 10])
        with pytest.raises(RuntimeError, match="num_cells is an int"):  # TorchRL's type
            MLP(in_features=3, out_features=5, num_cells=8)
        with pytest.raises(RuntimeError, match="depth=-1 is negative"):
            MLP(in_features=3, out_features=5, depth=-1)
        with pytest.raises(ValueError, match="out_features must be given"):
            MLP(in_features=3, num_cells=[8])

    def test_lazy_input_and_shaped_output(self):
        mlp = MLP(out_features=(2, 3), depth=1, num_cells=16)
        assert isinstance(mlp[0], nn.LazyLinear)
        assert mlp(torch.randn(5, 4, 7)).shape == (5, 4, 2, 3)
        assert mlp[0].in_features == 7 and mlp[-1].out_features == 6

    def test_multiple_inputs_are_concatenated(self):
        mlp = MLP(in_features=5, out_features=1, num_cells=[4])
        obs, action = torch.randn(3, 3), torch.randn(3, 2)
        torch.testing.assert_close(mlp(obs, action), mlp(torch.cat([obs, action], -1)))

    def test_layer_order_norm_dropout_activation(self):
        mlp = MLP(
            in_features=3, out_features=4, num_cells=[8, 8], dropout=0.1, norm_class=nn.LayerNorm,
            norm_kwargs={"normalized_shape": 8}, activation_class=nn.ReLU,
        )
        kinds = [type(m) for m in mlp]
        assert kinds == [nn.Linear, nn.Dropout, nn.LayerNorm, nn.ReLU] * 2 + [nn.Linear]
        assert mlp[1].p == 0.1

    def test_activation_kwargs_per_layer_and_activate_last_layer(self):
        mlp = MLP(
            in_features=2, out_features=3, num_cells=[4, 4], activation_class=nn.LeakyReLU,
            activation_kwargs=[{"negative_slope": 0.1}, {"negative_slope": 0.2}, {"negative_slope": 0.3}],
            activate_last_layer=True,
        )
        slopes = [m.negative_slope for m in mlp if isinstance(m, nn.LeakyReLU)]
        assert slopes == [0.1, 0.2, 0.3]
        with pytest.raises(ValueError, match="activation_kwargs has 2 entries but the network has 3 layers"):
            MLP(in_features=2, out_features=3, num_cells=[4, 4], activation_class=nn.LeakyReLU,
                activation_kwargs=[{}, {}], activate_last_layer=True)

    def test_bias_options(self):
        no_bias = MLP(in_features=2, out_features=3, num_cells=[4], bias_last_layer=False)
        assert no_bias[-1].bias is None and no_bias[0].bias is not None
        single = MLP(in_features=2, out_features=3, num_cells=[4], single_bias_last_layer=True)
        biases = [p for name, p in single.named_parameters() if name.endswith("bias")]
        assert biases[-1].shape == (1,)
        with torch.no_grad():
            biases[-1].fill_(2.0)
        x = torch.randn(5, 2)
        torch.testing.assert_close(single(x), single[:-1](x) + 2.0)

    def test_layer_class_and_kwargs(self):
        mlp = MLP(in_features=3, out_features=2, num_cells=[4], layer_class=NoisyLinear, layer_kwargs={"std_init": 0.25})
        assert all(isinstance(m, NoisyLinear) and m.std_init == 0.25 for m in mlp if isinstance(m, nn.Linear))
        lazy = MLP(out_features=2, num_cells=[4], layer_class=NoisyLinear)
        assert isinstance(lazy[0], NoisyLazyLinear)
        assert lazy(torch.randn(3, 6)).shape == (3, 2)

        class MyLinear(nn.Linear):
            pass

        with pytest.raises(ValueError, match="has no lazy version"):
            MLP(out_features=2, num_cells=[4], layer_class=MyLinear)

    def test_device_and_gradients(self):
        mlp = MLP(in_features=3, out_features=2, num_cells=[4], device="cpu")
        mlp(torch.randn(2, 3)).sum().backward()
        assert all(p.grad is not None for p in mlp.parameters())


# ---------------------------------------------------------------------------------------------- ConvNet
class TestConvNet:
    def test_seed_example_shape_inference(self):
        cnn = ConvNet(num_cells=[32, 64], kernel_sizes=[8, 4], strides=[4, 2])
        assert cnn(torch.randn(4, 3, 84, 84)).shape == (4, 5184)
        assert isinstance(cnn[0], nn.Conv2d) and cnn[0].in_channels == 3

    def test_defaults_paddings_and_batch_dims(self):
        cnn = ConvNet(in_features=3)
        assert [m.out_channels for m in cnn if isinstance(m, nn.Conv2d)] == [32, 32, 32]
        assert cnn(torch.randn(2, 5, 3, 10, 10)).shape == (2, 5, 32 * 4 * 4)
        padded = ConvNet(in_features=3, num_cells=[4, 4], kernel_sizes=3, paddings=1)
        assert padded(torch.randn(3, 10, 10)).shape == (4 * 10 * 10,)

    def test_aggregator_squeeze_norm(self):
        maps = ConvNet(in_features=1, num_cells=[4], aggregator_class=None)
        assert maps(torch.randn(2, 1, 5, 5)).shape == (2, 4, 3, 3)
        pooled = ConvNet(in_features=1, num_cells=[4], aggregator_class=nn.AdaptiveAvgPool2d,
                         aggregator_kwargs={"output_size": (1, 1)}, squeeze_output=True)
        assert pooled(torch.randn(2, 1, 5, 5)).shape == (2, 4)
        normed = ConvNet(in_features=1, num_cells=[4, 4], norm_class=nn.BatchNorm2d, norm_kwargs={"num_features": 4})
        # TorchRL's order: convolution, activation, normalisation
        assert [type(m) for m in normed][:3] == [nn.Conv2d, nn.ELU, nn.BatchNorm2d]
        maps1 = ConvNet(in_features=1, num_cells=[4], kernel_sizes=5, aggregator_class=None, squeeze_output=True)
        assert maps1(torch.randn(2, 1, 5, 5)).shape == (2, 4)
        # squeeze_output needs singleton spatial dims (TorchRL raises RuntimeError / IndexError otherwise)
        with pytest.raises(RuntimeError, match=r"Tried to squeeze an input over dims \(-2, -1\)"):
            ConvNet(in_features=1, num_cells=[4], squeeze_output=True)(torch.randn(2, 1, 5, 5))
        with pytest.raises(IndexError, match="needs 3 trailing dims to squeeze"):
            Conv3dNet(in_features=1, num_cells=[4], squeeze_output=True)(torch.randn(2, 1, 5, 5, 5))

    def test_errors(self):
        # TorchRL: per-layer lists that disagree with depth raise RuntimeError (ConvNet) / ValueError (Conv3dNet)
        with pytest.raises(RuntimeError, match=r"depth=2 conflicts with kernel_sizes=\[3, 3, 3\]"):
            ConvNet(num_cells=[4, 4], kernel_sizes=[3, 3, 3], depth=2)
        with pytest.raises(RuntimeError, match=r"depth=3 conflicts with num_cells=\[4, 4\]"):
            ConvNet(num_cells=[4, 4], kernel_sizes=[3, 3, 3])  # depth is taken from the last list
        with pytest.raises(RuntimeError, match="depth=3 conflicts"):
            ConvNet(num_cells=[4, 4], depth=3)
        with pytest.raises(RuntimeError, match=r"num_cells=\[32, 32, 32\]"):
            ConvNet(depth=2)  # ConvNet's default num_cells has 3 layers whatever the depth
        with pytest.raises(ValueError, match=r"depth=2 conflicts with kernel_sizes"):
            Conv3dNet(num_cells=[4, 5], depth=2, kernel_sizes=[3, 3, 3])
        with pytest.raises(ValueError, match="depth=None needs one of num_cells"):
            ConvNet(num_cells=4)
        with pytest.raises(ValueError, match="depth=0"):
            Conv3dNet(depth=0)
        with pytest.raises(ValueError, match="must have at least 4 dimensions"):
            Conv3dNet()(torch.randn(8, 8, 8))
        with pytest.raises(ValueError, match="must have at least 3 dimensions"):
            ConvNet()(torch.randn(8, 8))

    def test_depth_inference_and_attributes(self):
        net = ConvNet(num_cells=4, kernel_sizes=[3, 3])
        assert net.depth == 2 and net.num_cells == [4, 4] and net.out_features == 4
        net3 = Conv3dNet(depth=2)
        assert net3.num_cells == [32, 32] and net3.aggregator_kwargs == {"ndims_in": 4}
        assert net3.activation_kwargs == {} and net3.norm_kwargs == {} and net3.aggregator_class is SquashDims
        assert ConvNet(num_cells=[4, 5], strides=(1, 2)).strides == (1, 2)  # lists kept as given
        x = torch.randn(4, 2, 3, 8, 8, 8)  # extra batch dims are folded and restored
        assert Conv3dNet(in_features=3)(x).shape == (4, 2, 256) and Conv3dNet()(x[0, 0]).shape == (256,)

    def test_conv3d_alias_and_atari(self):
        assert Conv2dNet is ConvNet
        assert Conv3dNet(num_cells=[8, 16], kernel_sizes=3, strides=[1, 2])(torch.randn(2, 1, 9, 9, 9)).shape == (2, 432)
        assert ConvNet.default_atari_dqn(6)(torch.randn(2, 4, 84, 84)).shape == (2, 6)
        assert not ConvNet(in_features=1, num_cells=[2], bias_last_layer=False)[0].bias is not None


# ---------------------------------------------------------------------------------------------- DQN heads
class TestDQNNetworks:
    def test_dueling_mlp_identity(self):
        net = DuelingMlpDQNet(4, mlp_kwargs_feature={"in_features": 8, "num_cells": [16]}, mlp_kwargs_output={"num_cells": 8})
        x = torch.randn(3, 8)
        q = net(x)
        assert q.shape == (3, 4)
        value = net.value(net.features(x))
        torch.testing.assert_close(q.mean(-1, keepdim=True), value)

    def test_dueling_mlp_heads_are_lazy(self):
        net = DuelingMlpDQNet(2)  # as TorchRL: the heads' input size is inferred
        assert isinstance(net.advantage[0], torch.nn.LazyLinear) and isinstance(net.value[0], torch.nn.LazyLinear)
        assert net(torch.randn(4, 5)).shape == (4, 2) and net.advantage[0].in_features == 256

    def test_dueling_cnn(self):
        net = DuelingCnnDQNet(6, cnn_kwargs={"num_cells": [4, 4], "kernel_sizes": 3, "strides": 2}, mlp_kwargs={"num_cells": 8})
        x = torch.randn(2, 3, 16, 16)
        q = net(x)
        assert q.shape == (2, 6)
        torch.testing.assert_close(q.mean(-1, keepdim=True), net.value(net.features(x)))

    def test_distributional_dqn_net(self):
        td = TensorDict(action_value=torch.randn(10, 51, 4), other=torch.randn(10, 3, 2), batch_size=[10])
        out = DistributionalDQNnet()(td.clone())
        torch.testing.assert_close(out["action_value"], td["action_value"].log_softmax(-2))
        out = DistributionalDQNnet(in_keys=["other"], out_keys=["logp"])(td.clone())
        torch.testing.assert_close(out["logp"].exp().sum(-2), torch.ones(10, 2))
        with pytest.raises(ValueError, match="same length"):
            DistributionalDQNnet(in_keys=["a", "b"], out_keys=["c"])

    def test_ddpg_networks(self):
        small = {"num_cells": [4, 4], "kernel_sizes": 3, "strides": 2, "paddings": 0}
        action, hidden = DdpgCnnActor(3, conv_net_kwargs=small)(torch.randn(2, 3, 16, 16))
        assert action.shape == (2, 3) and hidden.shape[0] == 2
        pooled_action, pooled_hidden = DdpgCnnActor(3, conv_net_kwargs=small, use_avg_pooling=True)(
            torch.randn(2, 3, 16, 16)
        )
        assert pooled_hidden.shape == (2, 4)
        one = {"num_cells": [4], "kernel_sizes": 3, "strides": 1, "paddings": 0}
        assert DdpgCnnQNet(conv_net_kwargs=one)(torch.randn(2, 3, 8, 8), torch.randn(2, 4)).shape == (2, 1)
        # TorchRL's default trunks (Atari-style 8/4/3 kernels, 4/2/1 strides): per-layer lists of 3 entries
        actor = DdpgCnnActor(2)
        convs = [m for m in actor.convnet if isinstance(m, (torch.nn.Conv2d, torch.nn.LazyConv2d))]
        assert [c.kernel_size for c in convs] == [(8, 8), (4, 4), (3, 3)] and [c.stride for c in convs] == [
            (4, 4), (2, 2), (1, 1)]
        assert [c.out_channels for c in DdpgCnnQNet().convnet if isinstance(c, torch.nn.Conv2d)] == [32, 64, 128]
        with pytest.raises(RuntimeError, match="depth=3 conflicts with num_cells"):
            DdpgCnnActor(3, conv_net_kwargs={"num_cells": [4, 4]})
        assert DdpgMlpActor(2)(torch.randn(5, 11)).shape == (5, 2)
        assert DdpgMlpQNet()(torch.randn(5, 11), torch.randn(5, 2)).shape == (5, 1)


# ---------------------------------------------------------------------------------------------- noisy layers
class TestNoisy:
    def test_initialisation_known_answers(self):
        layer = NoisyLinear(16, 4, std_init=0.5)
        assert (layer.weight_mu.abs() <= 1 / 4).all()
        torch.testing.assert_close(layer.weight_sigma, torch.full((4, 16), 0.5 / 4))
        torch.testing.assert_close(layer.bias_sigma, torch.full((4,), 0.5 / 2))
        # factorised noise: weight_epsilon is an outer product f(eps_out) f(eps_in)^T, bias_epsilon = f(eps_out)
        eps = layer.weight_epsilon
        assert torch.linalg.matrix_rank(eps) == 1
        torch.testing.assert_close(eps[:, 0] / eps[0, 0], layer.bias_epsilon / layer.bias_epsilon[0])

    def test_noise_in_training_not_in_eval(self):
        layer = NoisyLinear(3, 2)
        x = torch.randn(5, 3)
        y0 = layer(x)
        layer.reset_noise()
        assert not torch.allclose(layer(x), y0)
        layer.eval()
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight_mu, layer.bias_mu))

    def test_exploration_type_switch(self):
        layer = NoisyLinear(3, 2).eval()
        x = torch.randn(5, 3)
        clean = F.linear(x, layer.weight_mu, layer.bias_mu)
        with set_exploration_type(ExplorationType.RANDOM):
            assert not torch.allclose(layer(x), clean)
        layer.train()
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            torch.testing.assert_close(layer(x), clean)
        ignoring = NoisyLinear(3, 2, use_exploration_type=False).eval()
        with set_exploration_type(ExplorationType.RANDOM):
            torch.testing.assert_close(ignoring(x), F.linear(x, ignoring.weight_mu, ignoring.bias_mu))

    def test_lazy_and_reset_noise_helper(self):
        lazy = NoisyLazyLinear(4, bias=False)
        assert lazy(torch.randn(2, 7)).shape == (2, 4)
        assert type(lazy) is NoisyLinear and lazy.in_features == 7 and lazy.bias is None
        net = nn.Sequential(NoisyLinear(3, 4), nn.Tanh(), NoisyLinear(4, 1))
        before = [m.weight_epsilon.clone() for m in net if isinstance(m, NoisyLinear)]
        net.apply(reset_noise)
        after = [m.weight_epsilon for m in net if isinstance(m, NoisyLinear)]
        assert all(not torch.equal(a, b) for a, b in zip(before, after))


# ---------------------------------------------------------------------------------------------- LSTMNet
class TestLSTMNet:
    def _net(self, backend=None):
        torch.manual_seed(0)
        return LSTMNet(6, {"input_size": 5, "hidden_size": 5, "num_layers": 2}, {"out_features": 5, "num_cells": [8]},
                       lstm_backend=backend)

    def test_shapes(self):
        net = self._net()
        y, h0_in, h1_in, h0, h1 = net(torch.randn(7, 4, 3))
        assert y.shape == (7, 4, 6) and h0_in.shape == h0.shape == (7, 4, 2, 5)
        assert (h0[:, :-1] == 0).all() and (h0_in == 0).all()
        y, *hidden = net(torch.randn(7, 3))
        assert y.shape == (7, 6) and all(h.shape == (7, 2, 5) for h in hidden)
        y, *hidden = net(torch.randn(3))
        assert y.shape == (6,) and all(h.shape == (2, 5) for h in hidden)

    def test_step_by_step_matches_sequence(self):
        net = self._net()
        x = torch.randn(2, 4, 3)
        y_seq, *_ , h_last, c_last = net(x)
        h = c = None
        for t in range(4):
            y_t, _, _, h, c = net(x[:, t], h, c)
        torch.testing.assert_close(y_t, y_seq[:, -1])
        torch.testing.assert_close(h, h_last[:, -1])

    def test_python_backend_matches_torch(self):
        x = torch.randn(2, 4, 3)
        torch.testing.assert_close(self._net("torchrl")(x)[0], self._net("torch")(x)[0])

    def test_errors(self):
        with pytest.raises(ValueError, match="lstm_backend must be"):
            self._net("cudnn")
        with pytest.raises(RuntimeError, match="pass both hidden0_in and hidden1_in"):
            self._net()(torch.randn(2, 3), torch.zeros(2, 2, 5))


# ---------------------------------------------------------------------------------------------- multi-agent
def _agent_reference(net: MultiAgentMLP, x: torch.Tensor, i: int) -> torch.Tensor:
    """Agent ``i``'s output computed with an ordinary MLP holding agent ``i``'s parameters."""
    mlp = net.get_stateful_net(copy=True)
    if not net.share_params:
        TensorDict.from_module(mlp).apply(lambda t: t[i]).to_module(mlp)
    inp = x.flatten(-2, -1) if net.centralized else x[..., i, :]
    return mlp(inp)


class TestMultiAgentMLP:
    @pytest.mark.parametrize("centralized", [False, True])
    @pytest.mark.parametrize("share_params", [False, True])
    @pytest.mark.parametrize("n_agent_inputs", [4, None])
    @pytest.mark.parametrize("batch", [(), (5,), (2, 3)])
    def test_shapes_and_reference(self, centralized, share_params, n_agent_inputs, batch):
        torch.manual_seed(0)
        net = MultiAgentMLP(n_agent_inputs, 2, n_agents=3, centralized=centralized, share_params=share_params,
                            num_cells=[8, 8])
        x = torch.randn(*batch, 3, 4)
        out = net(x)
        assert out.shape == (*batch, 3, 2)
        for i in range(3):
            torch.testing.assert_close(out[..., i, :], _agent_reference(net, x, i))

    def test_independent_agents_differ_shared_agents_agree(self):
        x = torch.randn(6, 1, 4).expand(6, 3, 4)  # every agent sees the same input
        shared = MultiAgentMLP(4, 2, 3, centralized=False, share_params=True)(x)
        torch.testing.assert_close(shared[:, 0], shared[:, 1])
        independent = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False)(x)
        assert not torch.allclose(independent[:, 0], independent[:, 1])

    @pytest.mark.parametrize("centralized", [False, True])
    def test_centralised_agents_see_other_inputs(self, centralized):
        net = MultiAgentMLP(4, 2, 3, centralized=centralized, share_params=False)
        x = torch.randn(5, 3, 4)
        x2 = x.clone()
        x2[:, 1] += 1.0
        changed = ~torch.isclose(net(x)[:, 0], net(x2)[:, 0]).all(-1)
        assert bool(changed.all()) is centralized

    def test_generic_vmap_path_and_td_params_off(self):
        torch.manual_seed(0)
        for use_td_params in (True, False):
            net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False, num_cells=[8],
                                norm_class=nn.LayerNorm, norm_kwargs={"normalized_shape": 8}, use_td_params=use_td_params)
            assert net._plan is None  # LayerNorm has parameters: vmap path
            x = torch.randn(5, 3, 4)
            out = net(x)
            for i in range(3):
                torch.testing.assert_close(out[:, i], _agent_reference(net, x, i))
            assert net.params.batch_size == (3,)

    def test_gradients_reach_every_agent(self):
        net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False, depth=2, num_cells=32)
        net(torch.randn(5, 3, 4))[:, 1].sum().backward()
        grad = net.params["0", "weight"].grad
        assert grad.shape == (3, 32, 4) and grad[1].abs().sum() > 0 and grad[0].abs().sum() == 0

    def test_repr_as_torchrl(self):
        net = MultiAgentMLP(3, 2, 4, centralized=True, share_params=True)  # no depth/num_cells: one linear layer
        assert repr(net) == (
            "MultiAgentMLP(\n    MLP(\n      (0): Linear(in_features=12, out_features=2, bias=True)\n    ),\n"
            "    n_agents=4,\n    share_params=True,\n    centralized=True,\n    agent_dim=-2)"
        )
        conv = MultiAgentConvNet(2, centralized=False, share_params=False, num_cells=[4], kernel_sizes=3)
        assert repr(conv).startswith("MultiAgentConvNet(\n    ConvNet(\n      (0): LazyConv2d(0, 4, kernel_size=(3, 3)")
        assert repr(conv).endswith("    n_agents=2,\n    share_params=False,\n    centralized=False,\n    agent_dim=-4)")

    def test_stateful_net_round_trip_and_reset(self):
        net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False, num_cells=[8])
        stateful = net.get_stateful_net()
        for p in stateful.parameters():
            nn.init.constant_(p, 0.0)
        net.from_stateful_net(stateful)
        assert (net(torch.randn(2, 3, 4)) == 0).all()
        net.reset_parameters()
        weights = net.params["0", "weight"]
        assert weights.abs().sum() > 0 and not torch.equal(weights[0], weights[1])
        in_place = net.get_stateful_net(copy=False)
        with torch.no_grad():
            next(in_place.parameters()).fill_(1.0)
        assert (net.params["0", "weight"] == 1.0).all()

    def test_state_dict_round_trip_and_dropout_eval(self):
        net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False, dropout=0.5)
        other = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False, dropout=0.5)
        other.load_state_dict(net.state_dict())
        net.eval(), other.eval()
        x = torch.randn(5, 3, 4)
        torch.testing.assert_close(net(x), other(x))
        torch.testing.assert_close(net(x), net(x))  # no dropout in eval mode

    def test_errors(self):
        with pytest.raises(TypeError, match="the centralized argument must be passed"):
            MultiAgentMLP(4, 2, 3, share_params=True)
        with pytest.raises(TypeError, match="the share_params argument must be passed"):
            MultiAgentMLP(4, 2, 3, centralized=True)
        net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=True)
        with pytest.raises(ValueError, match=r"n_agents=3, features\), got \(5, 2, 4\)"):
            net(torch.randn(5, 2, 4))
        with pytest.raises(ValueError, match="expected 4 features per agent, got 5"):
            net(torch.randn(5, 3, 5))
        with pytest.raises(RuntimeError):  # TorchRL's type there
            net(torch.randn(5, 3, 5))
        assert MultiAgentMLP(4, 2, 3, centralised=True, share_params=True).centralized

    def test_as_tensordict_module(self):
        policy = TensorDictModule(
            MultiAgentMLP(4, 2, 3, centralized=False, share_params=False),
            in_keys=[("agents", "observation")],
            out_keys=[("agents", "action")],
        )
        td = TensorDict({"agents": TensorDict(observation=torch.randn(8, 3, 4), batch_size=[8, 3])}, batch_size=[8])
        assert policy(td)["agents", "action"].shape == (8, 3, 2)


class TestMultiAgentConvNet:
    @pytest.mark.parametrize("centralized", [False, True])
    @pytest.mark.parametrize("share_params", [False, True])
    def test_shapes_and_centralisation(self, centralized, share_params):
        torch.manual_seed(0)
        net = MultiAgentConvNet(2, centralized=centralized, share_params=share_params, num_cells=[4, 4],
                                kernel_sizes=3, strides=1)
        x = torch.randn(3, 2, 3, 6, 6)
        out = net(x)
        assert out.shape == (3, 2, 4 * 2 * 2)
        x2 = x.clone()
        x2[:, 1] += 1.0
        assert (not torch.allclose(net(x2)[:, 0], out[:, 0])) is centralized
        if share_params:
            same = net(x[:, :1].expand_as(x).contiguous())
            torch.testing.assert_close(same[:, 0], same[:, 1])

    def test_bad_input(self):
        net = MultiAgentConvNet(2, centralized=False, share_params=True, in_features=3, num_cells=[4])
        with pytest.raises(ValueError, match=r"n_agents=2, C, H, W\)"):
            net(torch.randn(3, 3, 3, 8, 8))


# ---------------------------------------------------------------------------------------------- mixers
class TestMixers:
    def test_vdn_sums(self):
        vdn = VDNMixer(n_agents=3, device="cpu")
        values = torch.tensor([[[1.0], [2.0], [4.0]], [[0.5], [-1.0], [0.0]]])
        torch.testing.assert_close(vdn(values), torch.tensor([[7.0], [-0.5]]))
        assert vdn(torch.randn(4, 5, 3, 1)).shape == (4, 5, 1)

    def test_qmix_shapes_and_monotonicity(self):
        torch.manual_seed(0)
        qmix = QMixer(state_shape=(4, 2), mixing_embed_dim=8, n_agents=3, device="cpu")
        q = torch.randn(6, 5, 3, 1, requires_grad=True)
        state = torch.randn(6, 5, 4, 2)
        out = qmix(q, state)
        assert out.shape == (6, 5, 1)
        out.sum().backward()
        assert (q.grad >= 0).all() and (q.grad > 0).any()

    def test_qmix_in_tensordict_module(self):
        qmix = TensorDictModule(
            QMixer(state_shape=(5,), mixing_embed_dim=4, n_agents=2, device="cpu"),
            in_keys=[("agents", "chosen_action_value"), "state"],
            out_keys=["chosen_action_value"],
        )
        td = TensorDict(
            {"agents": TensorDict(chosen_action_value=torch.randn(7, 2, 1), batch_size=[7, 2]), "state": torch.randn(7, 5)},
            batch_size=[7],
        )
        assert qmix(td)["chosen_action_value"].shape == (7, 1)

    def test_errors(self):
        with pytest.raises(ValueError, match=r"shape \(\*B, n_agents=3, 1\), got \(4, 2, 1\)"):
            VDNMixer(n_agents=3, device="cpu")(torch.randn(4, 2, 1))
        qmix = QMixer(state_shape=(5,), mixing_embed_dim=4, n_agents=2, device="cpu")
        with pytest.raises(ValueError, match="expected 2 input"):
            qmix(torch.randn(4, 2, 1))
        with pytest.raises(ValueError, match=r"state must have shape \(\*B, \*state_shape\) = \(4, 5\)"):
            qmix(torch.randn(4, 2, 1), torch.randn(4, 6))


# ---------------------------------------------------------------------------------------------- small layers
class TestSmallLayers:
    def test_squash_and_squeeze(self):
        assert SquashDims()(torch.zeros(4, 3, 5, 6)).shape == (4, 90)
        assert SquashDims(ndims_in=2)(torch.zeros(4, 3, 5, 6)).shape == (4, 3, 30)
        assert Squeeze2dLayer()(torch.zeros(4, 8, 1, 1)).shape == (4, 8)
        assert SqueezeLayer()(torch.zeros(4, 1)).shape == (4,)
        with pytest.raises(ValueError, match="dims must be negative"):
            SqueezeLayer((1,))
        with pytest.raises(RuntimeError, match="dimension -1 has size 3, not 1"):
            SqueezeLayer()(torch.zeros(4, 3))

    def test_scale_mappings_known_answers(self):
        x = torch.tensor([-3.0, 0.0, 2.0])
        torch.testing.assert_close(mappings("biased_softplus_1.0")(torch.zeros(3)), torch.ones(3))
        torch.testing.assert_close(biased_softplus(2.0)(torch.zeros(1)), torch.tensor([2.0]))
        torch.testing.assert_close(mappings("exp")(x), x.exp())
        torch.testing.assert_close(torch.as_tensor(inv_softplus(F.softplus(x))), x, rtol=1e-4, atol=1e-4)
        assert math.isclose(float(F.softplus(torch.tensor(inv_softplus(1.5)))), 1.5, rel_tol=1e-6)

    def test_batch_renorm_warmup_is_batch_norm(self):
        torch.manual_seed(0)
        norm = BatchRenorm1d(3, warmup_steps=5)
        x = torch.randn(32, 3) * 4 + 1
        torch.testing.assert_close(norm(x), F.batch_norm(x, None, None, training=True, eps=1e-5))
        torch.testing.assert_close(norm.running_mean, 0.01 * x.mean(0))
        torch.testing.assert_close(norm.running_var, 0.99 + 0.01 * x.var(0))
        assert int(norm.steps) == 1

    def test_batch_renorm_after_warmup_and_eval(self):
        torch.manual_seed(0)
        norm = BatchRenorm1d(2, warmup_steps=0, max_r=2.0, max_d=0.5)
        x = torch.randn(64, 2) * 3 + 4
        mean, std = x.mean(0), (x.var(0, unbiased=False) + 1e-5).sqrt()
        r = (std / (1.0 + 1e-5) ** 0.5).clamp(0.5, 2.0)
        d = (mean / (1.0 + 1e-5) ** 0.5).clamp(-0.5, 0.5)
        torch.testing.assert_close(norm(x), (x - mean) / std * r + d)
        norm.eval()
        expected = (x - norm.running_mean) / (norm.running_var + 1e-5).sqrt()
        torch.testing.assert_close(norm(x), expected)
        with pytest.raises(ValueError, match="expected 2 features"):
            norm(torch.randn(4, 3))

    def test_consistent_dropout(self):
        drop = ConsistentDropout(p=0.5)
        x = torch.ones(100, 8)
        y, mask = drop(x)
        assert mask.dtype == torch.bool
        torch.testing.assert_close(y, mask.float() * 2.0)
        torch.testing.assert_close(drop(x, mask)[0], y)
        assert drop.make_mask(shape=(3, 4)).shape == (3, 4)
        assert ConsistentDropout(p=0.0).make_mask(input=x).all()
        drop.eval()
        assert drop(x) is x


# ---------------------------------------------------------------------------------------------- Dreamer
class TestDreamerModels:
    def test_actor_scale_at_zero_output(self):
        actor = DreamerActor(2, depth=1, num_cells=8)
        loc, scale = actor(torch.randn(4, 3), torch.randn(4, 5))
        assert loc.shape == scale.shape == (4, 2)
        last = [m for m in actor.backbone if isinstance(m, nn.Linear)][-1]
        with torch.no_grad():
            last.weight.zero_()
            last.bias.zero_()
        loc, scale = actor(torch.randn(4, 3), torch.randn(4, 5))
        torch.testing.assert_close(loc, torch.zeros(4, 2))
        torch.testing.assert_close(scale, torch.full((4, 2), 5.0), atol=1e-3, rtol=0)

    def test_encoder_decoder_shapes(self):
        assert ObsEncoder()(torch.randn(2, 7, 3, 64, 64)).shape == (2, 7, 1024)
        enc = ObsEncoder(channels=8, num_layers=2, in_channels=1)
        assert isinstance(enc.encoder[0], nn.Conv2d) and enc(torch.randn(5, 1, 16, 16)).shape == (5, 16 * 2 * 2)
        assert ObsDecoder()(torch.randn(2, 5, 30), torch.randn(2, 5, 200)).shape == (2, 5, 3, 64, 64)
        gray = ObsDecoder(channels=8, latent_dim=12, out_channels=1)
        assert isinstance(gray.state_to_latent[0], nn.Linear)
        assert gray(torch.randn(3, 4), torch.randn(3, 8)).shape == (3, 1, 64, 64)
        with pytest.raises(ValueError, match="kernel_sizes has 2 entries, expected 4"):
            ObsDecoder(kernel_sizes=[5, 5])

    def test_deprecated_depth(self):
        _deprecation._WARNED.discard("ObsEncoder: the depth argument is deprecated; use channels instead.")
        with pytest.warns(DeprecationWarning, match="use channels instead"):
            enc = ObsEncoder(depth=4, num_layers=1, in_channels=3)
        assert enc.encoder[0].out_channels == 4

    def test_prior_posterior_known_answers(self):
        torch.manual_seed(0)
        prior = RSSMPrior(None, hidden_dim=6, rnn_hidden_dim=5, state_dim=3, action_dim=2, scale_lb=0.1)
        state, belief, action = torch.randn(2, 4, 3), torch.randn(2, 4, 5), torch.randn(2, 4, 2)
        noise = torch.randn(2, 4, 3)
        mean, std, next_state, next_belief = prior(state, belief, action, noise=noise)
        torch.testing.assert_close(next_state, mean + std * noise)
        assert (std >= 0.1).all() and next_belief.shape == (2, 4, 5)
        projected = prior.action_state_projector(torch.cat([state, action], -1))
        expected_belief = prior.rnn(projected.reshape(8, 6), belief.reshape(8, 5)).reshape(2, 4, 5)
        torch.testing.assert_close(next_belief, expected_belief)
        posterior = RSSMPosterior(hidden_dim=6, state_dim=3, rnn_hidden_dim=5, obs_embed_dim=7, scale_lb=0.2)
        mean, std, post_state = posterior(next_belief, torch.randn(2, 4, 7), noise=torch.zeros(2, 4, 3))
        torch.testing.assert_close(post_state, mean)
        assert (std >= 0.2).all()

    def test_rollout_matches_manual_loop(self):
        torch.manual_seed(0)
        prior = TensorDictModule(
            RSSMPrior(None, action_dim=2, hidden_dim=8, rnn_hidden_dim=8, state_dim=4),
            in_keys=["state", "belief", "action"],
            out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")],
        )
        posterior = TensorDictModule(
            RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=8, obs_embed_dim=6),  # not lazy: same RNG stream
            in_keys=[("next", "belief"), ("next", "encoded_latents")],
            out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")],
        )
        td = TensorDict(
            {"state": torch.zeros(3, 5, 4), "belief": torch.zeros(3, 5, 8), "action": torch.randn(3, 5, 2),
             "next": {"encoded_latents": torch.randn(3, 5, 6)}},
            [3, 5],
        )
        torch.manual_seed(1)
        out = RSSMRollout(prior, posterior)(td.clone())
        torch.manual_seed(1)
        state, belief = td["state"][:, 0], td["belief"][:, 0]
        for t in range(5):
            _, _, _, belief = prior.module(state, belief, td["action"][:, t])
            _, _, state = posterior.module(belief, td["next", "encoded_latents"][:, t])
            torch.testing.assert_close(out["next", "state"][:, t], state)
            torch.testing.assert_close(out["next", "belief"][:, t], belief)
        torch.testing.assert_close(out["belief"][:, 1], out["next", "belief"][:, 0])


class TestSymExpTwoHot:
    def test_encode_known_answers(self):
        two_hot = SymExpTwoHot(num_bins=5)
        bins = two_hot.bins
        torch.testing.assert_close(bins, torch.tensor([-math.expm1(20), -math.expm1(10), 0.0, math.expm1(10), math.expm1(20)]))
        target = torch.tensor([[0.0, 0.25 * math.expm1(10)], [1e12, -1e12]])
        enc = two_hot.encode(target)
        assert enc.shape == (2, 2, 5)
        torch.testing.assert_close(enc[0, 1], torch.tensor([0.0, 0.0, 0.75, 0.25, 0.0]))
        torch.testing.assert_close(enc[1, 0], torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]))  # saturates
        torch.testing.assert_close(enc.sum(-1), torch.ones(2, 2))

    def test_decode_forward_loss(self):
        two_hot = SymExpTwoHot()
        assert two_hot.decode(torch.zeros(3, 255)).eq(0).all()  # uniform decodes to exactly zero
        target = torch.tensor([-3.0, 0.5, 120.0])
        logits = (two_hot.encode(target) + 1e-12).log()
        torch.testing.assert_close(two_hot(logits), target.unsqueeze(-1), rtol=1e-4, atol=1e-4)
        random_logits = torch.randn(3, 255, requires_grad=True)
        loss = two_hot.loss(random_logits, target.unsqueeze(-1))
        expected = -(two_hot.encode(target) * random_logits.log_softmax(-1)).sum(-1)
        torch.testing.assert_close(loss, expected)
        loss.sum().backward()
        assert torch.isfinite(random_logits.grad).all()
        with pytest.raises(ValueError, match="num_bins must be at least 2"):
            SymExpTwoHot(1)


class TestCrossGroupCritic:
    def _critic(self, **kwargs):
        torch.manual_seed(0)
        return CrossGroupCritic(
            {
                "red": CrossCriticGroupSpec(4, 2, ("red", "observation"), ("red", "state_value")),
                "blue": CrossCriticGroupSpec(6, 3, ("blue", "observation"), ("blue", "state_value")),
            },
            d_model=8,
            trunk_cells=16,
            **kwargs,
        )

    def _td(self, requires_grad=False):
        return TensorDict(
            {"red": {"observation": torch.randn(5, 2, 4, requires_grad=requires_grad)},
             "blue": {"observation": torch.randn(5, 3, 6, requires_grad=requires_grad)}},
            [5],
        )

    def test_values_depend_on_all_groups(self):
        critic = self._critic()
        td = self._td()
        out = critic(td.clone())
        assert out["red", "state_value"].shape == (5, 2, 1) and out["blue", "state_value"].shape == (5, 3, 1)
        td2 = td.clone()
        td2["blue", "observation"] = td2["blue", "observation"] + 1.0
        assert not torch.allclose(critic(td2)["red", "state_value"], out["red", "state_value"])
        assert len(self._critic(share_params=True).module.heads) == 1 and len(critic.module.heads) == 2

    def test_detach_groups(self):
        critic = self._critic(detach_groups=["blue"])
        td = self._td(requires_grad=True)
        critic(td)["red", "state_value"].sum().backward()
        assert critic.module.encoders[1].weight.grad is None
        assert critic.module.encoders[0].weight.grad.abs().sum() > 0

    def test_errors(self):
        with pytest.raises(ValueError, match="at least one group"):
            CrossGroupCritic({})
        with pytest.raises(ValueError, match=r"detach_groups \['green'\] are not in group_map"):
            self._critic(detach_groups=["green"])
        td = self._td()
        td["red", "observation"] = torch.randn(5, 2, 3)
        with pytest.raises(ValueError, match=r"must end with \(n_agents=2, obs_dim=4\), got shape \(5, 2, 3\)"):
            self._critic()(td)
