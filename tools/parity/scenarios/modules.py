"""Networks of torchrl.modules.models: outputs on fixed inputs with identical (shape-determined) weights."""
import torch
from torch import nn

import parity
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import (
    MLP,
    Conv3dNet,
    ConvNet,
    DdpgCnnActor,
    DdpgCnnQNet,
    DdpgMlpActor,
    DdpgMlpQNet,
    DuelingCnnDQNet,
    MultiAgentConvNet,
    MultiAgentMLP,
    NoisyLazyLinear,
    NoisyLinear,
    QMixer,
    VDNMixer,
    reset_noise,
)
from torchrl.modules.models import DuelingMlpDQNet
from torchrl.testing import LSTMNet


def _fill(module, scale=1.0):
    """Deterministic weights that depend only on each parameter's shape (so the layer order does not matter)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.linspace(-0.6, 0.7, p.numel()).reshape(p.shape) * scale / max(1.0, p.shape[-1] ** 0.5))
    return module


def _x(*shape, phase=0.0):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * 0.37 + phase).reshape(shape)


def _shapes(module):
    return sorted((name, list(p.shape)) for name, p in module.named_parameters())


# ------------------------------------------------------------------------------------------------- MLP
def scenario_mlp_values():
    out = {}
    for i, kw in enumerate([dict(num_cells=[8, 6]), dict(depth=2, num_cells=5), dict(num_cells=[4], activate_last_layer=True),
                            dict(num_cells=[4], bias_last_layer=False), dict(num_cells=[4], activation_class=nn.ReLU),
                            dict(num_cells=[4], norm_class=nn.LayerNorm, norm_kwargs={"normalized_shape": 4}),
                            dict(num_cells=[4], single_bias_last_layer=True),
                            dict(num_cells=[4, 4], activation_kwargs=[{"alpha": 0.5}, {"alpha": 2.0}],
                                 activation_class=nn.ELU)]):
        res = parity.attempt(lambda: _fill(MLP(in_features=3, out_features=2, **kw)))
        out[i] = res if isinstance(res, Exception) else [res(_x(5, 3)), _shapes(res), res.out_features]
    return out


def scenario_mlp_shapes_and_lazy():
    out = [list(MLP(out_features=(2, 3), num_cells=[4])(_x(5, 3)).shape),
           list(MLP(in_features=3, out_features=torch.Size([2, 2]), num_cells=[4])(_x(7, 5, 3)).shape),
           list(MLP(out_features=4, num_cells=[8, 8])(_x(2, 6)).shape),
           parity.attempt(lambda: MLP(in_features=3, out_features=2, depth=2, num_cells=[4, 4, 4])),
           parity.attempt(lambda: MLP(in_features=3, num_cells=[4])(_x(2, 3)).shape)]
    m = MLP(in_features=3, out_features=2, num_cells=[4], dropout=0.5)
    out.append([type(layer).__name__ for layer in m])
    return out


def scenario_mlp_layer_class():
    m = _fill(MLP(in_features=3, out_features=2, num_cells=[4], layer_class=NoisyLinear, layer_kwargs={"std_init": 0.1}))
    m.eval()
    return [[type(layer).__name__ for layer in m], parity.structure(m(_x(5, 3)))]


# --------------------------------------------------------------------------------------------- ConvNet
def scenario_convnet_values():
    out = {}
    for i, kw in enumerate([dict(num_cells=[4, 5], kernel_sizes=3), dict(num_cells=[4], kernel_sizes=[2], strides=2),
                            dict(num_cells=[3, 3], kernel_sizes=3, paddings=1, activation_class=nn.ReLU),
                            dict(num_cells=[4], kernel_sizes=3, aggregator_class=None),
                            dict(num_cells=[4], kernel_sizes=3, norm_class=nn.BatchNorm2d,
                                 norm_kwargs={"num_features": 4})]):
        net = _fill(ConvNet(in_features=2, **kw)).eval()
        out[i] = [net(_x(2, 2, 6, 6)), _shapes(net)]
    return out


def scenario_conv3dnet_values():
    net = _fill(Conv3dNet(in_features=2, num_cells=[3], kernel_sizes=2, strides=1))
    return [net(_x(2, 2, 3, 3, 3)), _shapes(net), list(Conv3dNet(num_cells=[2, 2])(_x(3, 2, 1, 6, 6, 6)).shape)]


# --------------------------------------------------------------------------------------------- DQN nets
def scenario_dueling_mlp():
    net = _fill(DuelingMlpDQNet(3, mlp_kwargs_feature={"num_cells": [6], "out_features": 5},
                                mlp_kwargs_output={"num_cells": [4]}))
    return [net(_x(4, 7)), _shapes(net)]


def scenario_dueling_cnn():
    net = _fill(DuelingCnnDQNet(3, cnn_kwargs={"num_cells": [4], "kernel_sizes": 3, "strides": 1},
                                mlp_kwargs={"num_cells": [6]}))
    return [net(_x(2, 3, 6, 6)), _shapes(net)]


def scenario_dueling_defaults():
    net = DuelingCnnDQNet(2)
    mlp = DuelingMlpDQNet(2)
    return [repr(net), list(net(_x(1, 3, 84, 84)).shape), repr(mlp), list(mlp(_x(4, 5)).shape)]


# --------------------------------------------------------------------------------------------- DDPG nets
def scenario_ddpg_mlp():
    actor = _fill(DdpgMlpActor(2, mlp_net_kwargs={"num_cells": [6, 5]}))
    qnet = _fill(DdpgMlpQNet(mlp_net_kwargs_net1={"num_cells": [6], "out_features": 4},
                             mlp_net_kwargs_net2={"num_cells": [5]}))
    obs, act = _x(4, 3), torch.tanh(_x(4, 2, phase=1.0))
    return [actor(obs), qnet(obs, act), _shapes(actor), _shapes(qnet)]


def scenario_ddpg_cnn():
    actor = _fill(DdpgCnnActor(2, conv_net_kwargs={"num_cells": [4], "kernel_sizes": 3, "strides": 1},
                               mlp_net_kwargs={"num_cells": [5]}))
    qnet = _fill(DdpgCnnQNet(conv_net_kwargs={"num_cells": [4], "kernel_sizes": 3, "strides": 1},
                             mlp_net_kwargs={"num_cells": [5]}))
    obs, act = _x(2, 3, 8, 8), torch.tanh(_x(2, 2, phase=1.0))
    return [actor(obs), qnet(obs, act), _shapes(actor), _shapes(qnet)]


def scenario_ddpg_defaults():
    qnet = DdpgCnnQNet()
    # the QNet's trunk without its squeezing layer (see scenario_convnet_squeeze_output_module)
    trunk = [repr(m) for m in qnet.convnet if not type(m).__name__.startswith("Squeeze")]
    return [repr(DdpgMlpActor(3)), repr(DdpgMlpQNet()), repr(DdpgCnnActor(2)), trunk, repr(qnet.mlp),
            list(qnet(_x(2, 3, 64, 64), _x(2, 4)).shape), list(DdpgCnnActor(2)(_x(2, 3, 64, 64))[0].shape),
            parity.attempt(lambda: DdpgCnnActor(3, conv_net_kwargs={"num_cells": [4, 4]}))]


def scenario_convnet_squeeze_output_module():
    return [repr(ConvNet(num_cells=[4], squeeze_output=True)),
            repr(ConvNet(num_cells=[4], aggregator_class=nn.AdaptiveAvgPool2d,
                         aggregator_kwargs={"output_size": (1, 1)}, squeeze_output=True))]


# ----------------------------------------------------------------------------------------------- noisy
def scenario_noisy_linear():
    layer = _fill(NoisyLinear(3, 2, std_init=0.3))
    out = [sorted(n for n, _ in layer.named_parameters()), sorted(n for n, _ in layer.named_buffers()),
           layer.std_init]
    layer.eval()
    out.append(layer(_x(4, 3)))
    layer.train()
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        out.append(layer(_x(4, 3)))
    with set_exploration_type(ExplorationType.RANDOM):
        out.append(parity.structure(layer(_x(4, 3))))
    out.append(layer.weight.shape)
    return out


def scenario_noisy_init_and_reset():
    torch.manual_seed(0)
    layer = NoisyLinear(4, 2, std_init=0.5)
    sigma = layer.weight_sigma.detach().clone()
    eps = layer.weight_epsilon.clone()
    layer.reset_noise()
    changed = not torch.equal(eps, layer.weight_epsilon)
    net = nn.Sequential(NoisyLinear(4, 2), nn.Linear(2, 2))
    net.apply(reset_noise)
    lazy = NoisyLazyLinear(2)
    lazy(_x(3, 5))
    return [sigma, changed, type(lazy).__name__, list(lazy.weight_mu.shape), layer.bias_sigma.detach()]


# ------------------------------------------------------------------------------------------ multi-agent
def scenario_multiagent_mlp_values():
    out = {}
    for centralized in (False, True):
        for share in (False, True):
            net = _fill(MultiAgentMLP(n_agent_inputs=3, n_agent_outputs=2, n_agents=4, centralized=centralized,
                                      share_params=share, depth=1, num_cells=5))
            out[f"{centralized}-{share}"] = [net(_x(6, 4, 3)), sorted(list(p.shape) for p in net.parameters())]
    return out


def scenario_multiagent_mlp_errors():
    net = MultiAgentMLP(n_agent_inputs=3, n_agent_outputs=2, n_agents=4, centralized=False, share_params=False)
    return [parity.attempt(lambda: net(_x(6, 3, 3))), parity.attempt(lambda: net(_x(6, 4, 5))),
            parity.attempt(lambda: MultiAgentMLP(n_agent_inputs=3, n_agent_outputs=2, n_agents=4)),
            list(net(_x(2, 6, 4, 3)).shape)]


def scenario_multiagent_convnet_values():
    out = {}
    for centralized in (False, True):
        for share in (False, True):
            net = _fill(MultiAgentConvNet(n_agents=2, centralized=centralized, share_params=share, in_features=2,
                                          num_cells=[3], kernel_sizes=3, strides=1))
            out[f"{centralized}-{share}"] = [net(_x(3, 2, 2, 5, 5)), sorted(list(p.shape) for p in net.parameters())]
    return out


# ------------------------------------------------------------------------------------------------ mixers
def scenario_vdn_mixer():
    mixer = VDNMixer(n_agents=3, device="cpu")
    q = _x(5, 3, 1)
    return [mixer(q, _x(5, 4)), parity.attempt(lambda: mixer(_x(5, 2, 1), _x(5, 4)))]


def scenario_qmixer():
    mixer = _fill(QMixer(state_shape=(4,), mixing_embed_dim=6, n_agents=3, device="cpu"))
    return [mixer(_x(5, 3, 1), _x(5, 4, phase=0.5)), _shapes(mixer),
            parity.attempt(lambda: mixer(_x(5, 2, 1), _x(5, 4)))]


# ------------------------------------------------------------------------------------------------ LSTMNet
def scenario_lstm_net():
    net = _fill(LSTMNet(out_features=2, lstm_kwargs={"input_size": 3, "hidden_size": 4}, mlp_kwargs={"num_cells": [5]}))
    y, h0, h1 = net(_x(2, 5, 3))[:3]
    out = [y, h0, h1, _shapes(net)]
    y2 = net(_x(2, 5, 3), h0, h1)
    out.append(y2[0])
    return out
