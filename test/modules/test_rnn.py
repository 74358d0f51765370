"""Tests of the recurrent modules.

The central property: running a recurrent module step by step (as in collection) and running it in
recurrent mode on the same sequences (as in training) give the same outputs and states, also when
episodes restart in the middle of the sequences and after the data went through a replay buffer. And a
recurrent policy never runs silently without memory: a missing state primer is added or reported.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from torchrl.data.replay_buffers import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer
from torchrl.envs import Compose, InitTracker, PendulumEnv, StepCounter, TransformedEnv
from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer
from torchrl.modules.tensordict_module import (
    apply_policy_env_transforms,
    canonicalize_rnn_subset,
    get_env_transforms_from_module,
    get_primers_from_module,
    get_recurrent_matmul_precision,
    GRU,
    GRUCell,
    GRUModule,
    LSTM,
    LSTMCell,
    LSTMModule,
    OrnsteinUhlenbeckProcessModule,
    recurrent_mode,
    set_recurrent_matmul_precision,
    set_recurrent_mode,
)

# -- python recurrences vs torch.nn ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bidirectional,batch_first,use_scan",
    [(False, True, False), (True, True, False), (True, False, False), (False, False, True)],
)
def test_python_lstm_matches_torch(bidirectional, batch_first, use_scan):
    torch.manual_seed(0)
    ours = LSTM(3, 4, num_layers=2, batch_first=batch_first, bidirectional=bidirectional, use_scan=use_scan)
    ref = nn.LSTM(3, 4, num_layers=2, batch_first=batch_first, bidirectional=bidirectional)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(5, 6, 3)
    layers = 4 if bidirectional else 2
    hx = (torch.randn(layers, 5 if batch_first else 6, 4), torch.randn(layers, 5 if batch_first else 6, 4))
    out, (h, c) = ours(x, hx)
    out_ref, (h_ref, c_ref) = ref(x, hx)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h, h_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c, c_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("use_scan", [False, True])
def test_python_gru_matches_torch_and_unbatched(use_scan):
    torch.manual_seed(0)
    ours = GRU(3, 4, num_layers=2, use_scan=use_scan)
    ref = nn.GRU(3, 4, num_layers=2, batch_first=True)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(6, 3)  # unbatched
    out, h = ours(x)
    out_ref, h_ref = ref(x)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h, h_ref, atol=1e-5, rtol=1e-5)


def test_python_lstm_projection():
    torch.manual_seed(0)
    ours = LSTM(3, 5, proj_size=2)
    ref = nn.LSTM(3, 5, proj_size=2, batch_first=True)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(2, 4, 3)
    torch.testing.assert_close(ours(x)[0], ref(x)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cls", [LSTM, GRU])
def test_reset_mask_restarts_sequences(cls):
    torch.manual_seed(0)
    rnn = cls(3, 4)
    x = torch.randn(2, 7, 3)
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[0, 3] = True
    out, _ = rnn(x, mask=mask)
    torch.testing.assert_close(out[0, 3:], rnn(x[:1, 3:])[0][0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out[1], rnn(x[1:])[0][0], atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="unidirectional"):
        cls(3, 4, bidirectional=True)(x, mask=mask)


def test_cells_match_torch():
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    lstm, ref = LSTMCell(3, 5), nn.LSTMCell(3, 5)
    ref.load_state_dict(lstm.state_dict())
    hx = (torch.randn(4, 5), torch.randn(4, 5))
    for a, b in zip(lstm(x, hx), ref(x, hx)):
        torch.testing.assert_close(a, b)
    gru, ref = GRUCell(3, 5), nn.GRUCell(3, 5)
    ref.load_state_dict(gru.state_dict())
    torch.testing.assert_close(gru(x[0]), ref(x[0]))
    assert isinstance(lstm, nn.RNNCellBase) and isinstance(LSTM(3, 4), nn.RNNBase)


# -- module keys and primers --------------------------------------------------------------------------------


class TestKeys:
    def test_lstm_defaults(self):
        module = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="feat")
        assert module.in_keys == ["obs", "recurrent_state_h", "recurrent_state_c", "is_init"]
        assert module.out_keys == ["feat", ("next", "recurrent_state_h"), ("next", "recurrent_state_c")]

    def test_gru_in_keys_with_is_init_and_out_prefix(self):
        module = GRUModule(
            input_size=3, hidden_size=4, in_keys=["obs", "hidden", "first"], out_keys=["feat", "hidden"]
        )
        assert module.in_keys == ["obs", "hidden", "first"]
        assert module.out_keys == ["feat", ("next", "hidden")]

    def test_errors(self):
        with pytest.raises(ValueError, match="either in_key or in_keys"):
            GRUModule(input_size=3, hidden_size=4, in_key="a", in_keys=["a", "h"], out_key="f")
        with pytest.raises(ValueError, match="input entry is required"):
            GRUModule(input_size=3, hidden_size=4, out_key="f")
        with pytest.raises(ValueError, match="memory is lost"):
            GRUModule(input_size=3, hidden_size=4, in_keys=["obs", "h"], out_keys=["f", ("next", "other")])
        with pytest.raises(ValueError, match="bidirectional"):
            LSTMModule(input_size=3, hidden_size=4, bidirectional=True, in_key="a", out_key="b")
        with pytest.raises(ValueError, match="batch_first"):
            LSTMModule(lstm=nn.LSTM(3, 4), in_key="a", out_key="b")
        with pytest.raises(ValueError, match="not both"):
            LSTMModule(input_size=3, lstm=nn.LSTM(3, 4, batch_first=True), in_key="a", out_key="b")
        with pytest.raises(ValueError, match="recurrent_backend"):
            GRUModule(input_size=3, hidden_size=4, in_key="a", out_key="b", recurrent_backend="cuda")

    def test_primer_specs(self):
        lstm = LSTMModule(input_size=3, hidden_size=4, num_layers=2, proj_size=2, in_key="obs", out_key="f")
        primer = lstm.make_tensordict_primer()
        assert isinstance(primer, TensorDictPrimer)
        assert primer.primers["recurrent_state_h"].shape == (2, 2)
        assert primer.primers["recurrent_state_c"].shape == (2, 4)

    def test_given_lstm_and_python_based(self):
        base = nn.LSTM(3, 4, batch_first=True)
        module = LSTMModule(lstm=base, in_key="obs", out_key="f", python_based=True)
        assert isinstance(module.lstm, LSTM)
        torch.testing.assert_close(module.lstm.weight_hh_l0, base.weight_hh_l0)
        assert LSTMModule(lstm=LSTM(3, 4), in_key="obs", out_key="f").python_based


# -- step by step == recurrent mode --------------------------------------------------------------------------


def _make(cls, python_based=False, backend="pad", layers=2, **kwargs):
    torch.manual_seed(0)
    return cls(
        input_size=3, hidden_size=5, num_layers=layers, in_key="obs", out_key="feat", python_based=python_based,
        recurrent_backend=backend, **kwargs,
    )


def _step_by_step(module, obs, is_init, states0):
    """Collects like an env with InitTracker + primer: zero state at episode starts, carried otherwise."""
    n, steps = obs.shape[:2]
    keys = module._state_keys
    state = [s.clone() for s in states0]
    feats, stored, nexts = [], [], []
    for t in range(steps):
        reset = is_init[:, t, 0]
        state = [torch.where(reset[:, None, None], torch.zeros_like(s), s) for s in state]
        td = TensorDict({"obs": obs[:, t], "is_init": is_init[:, t], **dict(zip(keys, state))}, batch_size=[n])
        stored.append([s.clone() for s in state])
        td = module(td)
        feats.append(td["feat"])
        state = [td["next", k] for k in keys]
        nexts.append(state)
    data = TensorDict(
        {"obs": obs, "is_init": is_init, **{k: torch.stack([s[i] for s in stored], 1) for i, k in enumerate(keys)}},
        batch_size=[n, steps],
    )
    ref_next = {k: torch.stack([s[i] for s in nexts], 1) for i, k in enumerate(keys)}
    return data, torch.stack(feats, 1), ref_next


@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
@pytest.mark.parametrize("python_based,backend", [(False, "pad"), (False, "scan"), (True, "pad")])
def test_step_by_step_equals_recurrent_mode(cls, python_based, backend):
    module = _make(cls, python_based, backend)
    n, steps = 3, 12
    obs = torch.randn(n, steps, 3)
    is_init = torch.zeros(n, steps, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[0, 4] = is_init[0, 9] = is_init[2, 7] = True  # episodes restarting mid-sequence
    shapes = module._state_shapes()
    states0 = [torch.randn(n, *shape) for shape in shapes]
    data, ref_feat, ref_next = _step_by_step(module, obs, is_init, states0)
    with set_recurrent_mode(True):
        out = module(data.clone())
    torch.testing.assert_close(out["feat"], ref_feat, atol=1e-5, rtol=1e-5)
    for key, value in ref_next.items():
        torch.testing.assert_close(out["next", key], value, atol=1e-5, rtol=1e-5)


def test_recurrent_mode_mid_episode_start_uses_stored_state():
    """A sequence starting mid-episode (is_init False at t=0) starts from its stored state."""
    module = _make(GRUModule)
    n, steps = 2, 8
    obs = torch.randn(n, steps, 3)
    is_init = torch.zeros(n, steps, 1, dtype=torch.bool)
    is_init[:, 0] = True
    data, ref_feat, _ = _step_by_step(module, obs, is_init, [torch.zeros(n, 2, 5)])
    tail = data[:, 3:].clone()  # no is_init at its first step
    with set_recurrent_mode(True):
        out = module(tail)
    torch.testing.assert_close(out["feat"], ref_feat[:, 3:], atol=1e-5, rtol=1e-5)


def test_backends_agree_with_gradients():
    lstm_pad = _make(LSTMModule, backend="pad")
    lstm_scan = _make(LSTMModule, backend="scan")
    lstm_scan.load_state_dict(lstm_pad.state_dict())
    obs = torch.randn(2, 9, 3, requires_grad=True)
    is_init = torch.rand(2, 9, 1) < 0.3
    is_init[:, 0] = True
    data = TensorDict(obs=obs, is_init=is_init, batch_size=[2, 9])
    grads = []
    for module in (lstm_pad, lstm_scan):
        with set_recurrent_mode(True):
            out = module(data.clone())
        loss = out["feat"].sum() + out["next", "recurrent_state_c"].sum()
        grads.append(torch.autograd.grad(loss, [obs, module.lstm.weight_hh_l0]))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_recompute_and_compute_dtype():
    base = _make(GRUModule)
    recompute = _make(GRUModule, recurrent_recompute="full")
    double = _make(GRUModule, recurrent_compute_dtype=torch.float64)
    data = TensorDict(obs=torch.randn(2, 6, 3), is_init=torch.ones(2, 6, 1, dtype=torch.bool), batch_size=[2, 6])
    with set_recurrent_mode(True):
        ref = base(data.clone())["feat"]
        out = recompute(data.clone())["feat"]
        out64 = double(data.clone())["feat"]
    out.sum().backward()
    torch.testing.assert_close(out, ref)
    # as TorchRL documents, the compute dtype is the "triton" backend's: "pad" ignores it
    assert out64.dtype == torch.float32 and torch.equal(out64, ref)
    assert recompute.gru.weight_ih_l0.grad is not None
    with pytest.raises(ValueError, match="recurrent_compute_dtype must be a floating torch.dtype"):
        _make(GRUModule, recurrent_compute_dtype=torch.int32)


def test_flat_one_dim_sequence():
    module = _make(GRUModule)
    obs = torch.randn(10, 3)
    is_init = torch.zeros(10, 1, dtype=torch.bool)
    is_init[0] = is_init[6] = True
    with set_recurrent_mode(True):
        out = module(TensorDict(obs=obs, is_init=is_init, batch_size=[10]))["feat"]
        first = module(TensorDict(obs=obs[6:], is_init=is_init[6:], batch_size=[4]))["feat"]
    torch.testing.assert_close(out[6:], first, atol=1e-6, rtol=1e-6)


def test_make_python_and_cudnn_based_keep_results():
    module = _make(LSTMModule)
    data = TensorDict(obs=torch.randn(2, 5, 3), is_init=torch.ones(2, 5, 1, dtype=torch.bool), batch_size=[2, 5])
    with set_recurrent_mode(True):
        ref = module(data.clone())["feat"]
        assert isinstance(module.make_python_based().lstm, LSTM) and module.python_based
        torch.testing.assert_close(module(data.clone())["feat"], ref, atol=1e-5, rtol=1e-5)
        assert type(module.make_cudnn_based().lstm) is nn.LSTM
        torch.testing.assert_close(module(data.clone())["feat"], ref, atol=1e-5, rtol=1e-5)


def test_triton_backend_needs_triton_and_cuda(monkeypatch):
    from torchrl.modules.tensordict_module import _recurrent_base

    monkeypatch.setattr(_recurrent_base, "_has_triton", lambda: False)
    with pytest.raises(RuntimeError, match="recurrent_backend='triton' requires the triton package"):
        _make(GRUModule, backend="triton")
    monkeypatch.setattr(_recurrent_base, "_has_triton", lambda: True)
    module = _make(GRUModule, backend="triton")
    data = TensorDict(obs=torch.randn(1, 3, 3), is_init=torch.ones(1, 3, 1, dtype=torch.bool), batch_size=[1, 3])
    with set_recurrent_mode(True), pytest.raises(RuntimeError, match="runs on CUDA only \\(got cpu data\\)"):
        module(data)
    auto = _make(GRUModule, backend="auto")
    with set_recurrent_mode(True):
        assert auto(data.clone())["feat"].shape == (1, 3, 5)


# -- no silent failure ---------------------------------------------------------------------------------------


def _policy(cls=LSTMModule):
    torch.manual_seed(0)
    rnn = cls(input_size=3, hidden_size=6, in_key="observation", out_key="features")
    head = TensorDictModule(nn.Sequential(nn.Linear(6, 1), nn.Tanh()), in_keys=["features"], out_keys=["action"])
    return rnn, TensorDictSequential(rnn, head)


class TestMissingState:
    def test_env_without_primer_raises(self):
        _, policy = _policy()
        with pytest.raises(KeyError, match="make_tensordict_primer"):
            PendulumEnv().rollout(3, policy)

    def test_fresh_reset_uses_zero_states(self):
        rnn, policy = _policy(GRUModule)
        td = TransformedEnv(PendulumEnv(), InitTracker()).reset()  # no primer: no state, but is_init
        out = policy(td.clone())
        zeros = policy(td.clone().set("recurrent_state", torch.zeros(1, 6)))
        torch.testing.assert_close(out["features"], zeros["features"])
        td["is_init"] = torch.zeros(1, dtype=torch.bool)
        with pytest.raises(KeyError, match="silently erase"):
            policy(td)

    def test_is_init_zeroes_carried_state_in_sequential_mode(self):
        rnn, _ = _policy(GRUModule)
        obs = torch.randn(2, 3)
        stale = torch.randn(2, 1, 6)
        is_init = torch.tensor([[True], [False]])
        out = rnn(TensorDict(observation=obs, recurrent_state=stale, is_init=is_init, batch_size=[2]))
        ref = rnn(
            TensorDict(observation=obs, recurrent_state=torch.stack([torch.zeros(1, 6), stale[1]]), batch_size=[2])
        )
        torch.testing.assert_close(out["features"], ref["features"])

    def test_partial_state_raises(self):
        rnn, _ = _policy()
        td = TensorDict(observation=torch.randn(3), recurrent_state_h=torch.zeros(1, 6), is_init=torch.ones(1, dtype=torch.bool))
        with pytest.raises(KeyError, match="needed together"):
            rnn(td)

    def test_recurrent_mode_rules(self):
        rnn, _ = _policy(GRUModule)
        obs = torch.randn(2, 4, 3)
        with set_recurrent_mode(True):
            with pytest.raises(KeyError, match="is_init"):
                rnn(TensorDict(observation=obs, recurrent_state=torch.zeros(2, 4, 1, 6), batch_size=[2, 4]))
            is_init = torch.zeros(2, 4, 1, dtype=torch.bool)
            with pytest.raises(KeyError, match="first step of every sequence"):
                rnn(TensorDict(observation=obs, is_init=is_init, batch_size=[2, 4]))
            is_init[:, 0] = True  # every sequence is an episode start: zeros by construction
            out = rnn(TensorDict(observation=obs, is_init=is_init, batch_size=[2, 4]))
            zeros = rnn(TensorDict(observation=obs, is_init=is_init, recurrent_state=torch.zeros(2, 4, 1, 6), batch_size=[2, 4]))
            torch.testing.assert_close(out["features"], zeros["features"])
            with pytest.raises(ValueError, match="time dimension"):
                rnn(TensorDict(observation=torch.randn(3), is_init=torch.ones(1, dtype=torch.bool)))

    def test_env_policy_option_adds_transforms(self):
        rnn, policy = _policy()
        env = PendulumEnv(policy=policy)
        assert isinstance(env, TransformedEnv)
        keys = set(env.observation_spec.keys())
        assert {"is_init", "recurrent_state_h", "recurrent_state_c"} <= keys
        rollout = env.rollout(6, policy)
        assert rollout["recurrent_state_h"].shape == (6, 1, 6)
        assert rollout["recurrent_state_h"][0].abs().sum() == 0 and rollout["recurrent_state_h"][1].abs().sum() > 0

    def test_apply_is_idempotent_and_skips_plain_policies(self):
        _, policy = _policy()
        env = apply_policy_env_transforms(PendulumEnv(), policy)
        again = apply_policy_env_transforms(env, policy)
        assert len(list(again.transform)) == len(list(env.transform))
        plain = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        base = PendulumEnv()
        assert apply_policy_env_transforms(base, plain) is base
        ou = TensorDictSequential(plain, OrnsteinUhlenbeckProcessModule(base.action_spec))
        assert "is_init" in apply_policy_env_transforms(PendulumEnv(), ou).observation_spec.keys()


# -- env data, resets mid-rollout, replay buffer round trip ---------------------------------------------------


def _collect(cls, steps=20, max_steps=5):
    rnn, policy = _policy(cls)
    env = TransformedEnv(PendulumEnv(batch_size=[3]), StepCounter(max_steps=max_steps))
    env = apply_policy_env_transforms(env, policy)
    rollout = env.rollout(steps, policy, break_when_any_done=False)
    return rnn, rollout


@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
def test_env_rollout_with_resets_equals_recurrent_replay(cls):
    rnn, rollout = _collect(cls)
    assert int(rollout["is_init"].sum()) == 3 * 4  # episodes of 5 steps restart 4 times in 20 steps
    with set_recurrent_mode(True):
        replay = rnn(rollout.clone())
    torch.testing.assert_close(replay["features"], rollout["features"], atol=1e-5, rtol=1e-5)
    for key in rnn.out_keys[1:]:
        torch.testing.assert_close(replay[key], rollout[key], atol=1e-5, rtol=1e-5)


def test_hidden_state_survives_replay_buffer_round_trip():
    rnn, rollout = _collect(LSTMModule, steps=24, max_steps=7)
    flat = rollout.reshape(-1)  # the 3 envs' steps one after the other
    flat["episode"] = flat["is_init"].squeeze(-1).long().cumsum(0)
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100), sampler=SliceSampler(slice_len=5, traj_key="episode"), batch_size=20
    )
    rb.extend(flat)
    torch.manual_seed(0)
    sample = rb.sample()
    assert sample.shape == (20,) and bool(sample["is_init"].reshape(4, 5)[:, 0].all())
    assert sample["recurrent_state_h"].reshape(4, 5, -1)[:, 0].abs().sum() > 0  # some slice starts mid-episode
    with set_recurrent_mode(True):
        flat_replay = rnn(sample.clone())  # flat slices: boundaries recovered from is_init
        shaped_replay = rnn(sample.reshape(4, 5).clone())
    torch.testing.assert_close(flat_replay["features"], sample["features"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shaped_replay["features"].reshape(-1), sample["features"].reshape(-1), atol=1e-5, rtol=1e-5)


def test_flat_slices_across_episode_starts():
    """Slices marked at their first step, with real episode starts inside them, replay exactly."""
    rnn, rollout = _collect(GRUModule, steps=24, max_steps=7)
    flat = rollout.reshape(-1)
    index = torch.cat([torch.arange(3, 12), torch.arange(29, 40), torch.arange(60, 66)])  # cross starts at 7, 31, 63
    sample = flat[index].clone()
    starts = torch.zeros(len(index), 1, dtype=torch.bool)
    starts[[0, 9, 20]] = True
    assert bool((sample["is_init"] & ~starts).any())  # episode starts inside the slices
    sample["is_init"] = sample["is_init"] | starts
    with set_recurrent_mode(True):
        replay = rnn(sample.clone())
    torch.testing.assert_close(replay["features"], sample["features"], atol=1e-5, rtol=1e-5)


# -- modes, primers, helpers ------------------------------------------------------------------------------------


class TestModes:
    def test_context_and_decorator(self):
        assert recurrent_mode() is None
        with set_recurrent_mode("recurrent"):
            assert recurrent_mode() is True
            with set_recurrent_mode("sequential"):
                assert recurrent_mode() is False
            assert recurrent_mode() is True
        assert recurrent_mode() is None

        @set_recurrent_mode(True)
        def inside():
            return recurrent_mode()

        assert inside() is True and recurrent_mode() is None
        with pytest.raises(ValueError, match="recurrent"):
            set_recurrent_mode("parallel")

    def test_module_modes(self):
        module = _make(GRUModule, default_recurrent_mode=True)
        assert module.recurrent_mode and module.temporal_mode
        with set_recurrent_mode(False):
            assert not module.recurrent_mode
        plain = _make(GRUModule)
        # as TorchRL >= 0.8: the method is gone (RuntimeError), and the mode cannot be assigned in place
        with pytest.raises(RuntimeError, match=r"set_recurrent_mode\(\) was removed.*default_recurrent_mode"):
            plain.set_recurrent_mode(True)
        with pytest.raises(RuntimeError, match="cannot be changed in place"):
            plain.recurrent_mode = True
        assert not plain.recurrent_mode

    def test_matmul_precision(self, monkeypatch):
        from torchrl.modules.tensordict_module import _recurrent_mode

        assert get_recurrent_matmul_precision() in ("ieee", "tf32x3", "tf32")
        try:
            set_recurrent_matmul_precision("tf32")
            assert get_recurrent_matmul_precision() == "tf32"
            # presets resolve on the GPU: TF32 only with tensor cores (Ampere or newer)
            set_recurrent_matmul_precision("fast")
            monkeypatch.setattr(_recurrent_mode, "_tensor_cores", lambda device: False)
            assert get_recurrent_matmul_precision() == "ieee"
            monkeypatch.setattr(_recurrent_mode, "_tensor_cores", lambda device: True)
            assert get_recurrent_matmul_precision() == "tf32"
            set_recurrent_matmul_precision("high-prec")
            assert get_recurrent_matmul_precision() == "tf32x3"
            set_recurrent_matmul_precision(None)  # auto: torch's setting ("medium" -> "fast" -> "tf32" here)
            previous = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("medium")
            try:
                assert get_recurrent_matmul_precision() == "tf32"
                assert _recurrent_mode._resolve_precision("ieee") == "ieee"  # a module's own mode wins
            finally:
                torch.set_float32_matmul_precision(previous)
        finally:
            set_recurrent_matmul_precision(None)
        with pytest.raises(ValueError, match=r"Invalid recurrent_matmul_precision='double'. Expected one of"):
            set_recurrent_matmul_precision("double")
        with pytest.raises(ValueError, match=r"Invalid recurrent_matmul_precision='double'"):
            _make(GRUModule, recurrent_matmul_precision="double")
        module = _make(GRUModule, recurrent_matmul_precision="tf32")
        out = module(TensorDict(obs=torch.randn(3), is_init=torch.ones(1, dtype=torch.bool)))
        assert out["feat"].shape == (5,) and torch.get_float32_matmul_precision() == "highest"


def test_get_primers_and_env_transforms():
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="a")
    gru = GRUModule(input_size=4, hidden_size=2, in_key="a", out_key="b")
    primer = get_primers_from_module(TensorDictSequential(lstm, gru))
    assert set(primer.primers.keys()) == {"recurrent_state_h", "recurrent_state_c", "recurrent_state"}
    with pytest.warns(UserWarning, match="no primers"):
        assert get_primers_from_module(nn.Linear(2, 2)) is None
    transforms = get_env_transforms_from_module(gru)
    assert isinstance(transforms, Compose) and isinstance(transforms[0], InitTracker)
    assert isinstance(get_env_transforms_from_module(nn.Linear(2, 2)), InitTracker)


def test_get_primers_non_strict():
    class Broken(nn.Module):
        def make_tensordict_primer(self):
            raise ValueError("no input shape")

    gru = GRUModule(input_size=4, hidden_size=2, in_key="a", out_key="b")
    container = nn.ModuleList([Broken(), gru])
    with pytest.raises(ValueError, match="no input shape"):
        get_primers_from_module(container)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        primer = get_primers_from_module(container, strict=False)
    assert "recurrent_state" in primer.primers.keys() and any("Broken" in str(w.message) for w in record)


def test_canonicalize():
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="h")
    td = TensorDict(obs=torch.zeros(5, 2, 3).transpose(0, 1), other=torch.zeros(5, 2).t(), batch_size=[2, 5])
    out = canonicalize_rnn_subset(td, [lstm])
    assert out["obs"].is_contiguous() and not out["other"].is_contiguous() and not td["obs"].is_contiguous()
    assert lstm.canonicalize(td, inplace=True) is td and td["obs"].is_contiguous()
    assert "obs" in lstm.canonical_keys
