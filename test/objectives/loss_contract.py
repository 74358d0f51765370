"""The contract every loss honours, as a test class each loss's test file subclasses.

A subclass sets ``loss_cls`` and ``loss_terms`` (the ``"loss*"`` output entries) and implements:

* ``make_loss(**kwargs)``: a loss on fresh small networks (``kwargs`` go to the loss constructor);
* ``make_batch(batch_size)``: input data for that loss (``batch_size`` is a tuple; the last dim is time);
* ``reference(loss, td)``: the same losses written in plain torch on the loss's own networks, as a dict
  ``{term: tensor}`` (unreduced, per element, so the contract can check every reduction);
* ``renames``: ``{key-table name: new key}`` used by the ``set_keys`` test, and ``data_key(name)`` mapping a
  key-table name to where it lives in the batch (e.g. ``("next", "reward")``).

Optionally ``random_forward = True`` when the loss draws random numbers (the contract then seeds both sides).
"""
from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict

from torchrl.objectives import HardUpdate, SoftUpdate, ValueEstimators

ATOL = 1e-5


def _terms(out) -> dict:
    return {k: v for k, v in out.items() if isinstance(k, str) and k.startswith("loss")}


class LossContract:
    loss_cls = None
    loss_terms: tuple = ()
    renames: dict = {}
    random_forward = False
    batch_size = (8,)

    # ------------------------------------------------------------------------ to implement
    def make_loss(self, **kwargs):
        raise NotImplementedError

    def make_batch(self, batch_size=None) -> TensorDict:
        raise NotImplementedError

    def reference(self, loss, td) -> dict:
        raise NotImplementedError

    def data_key(self, name):
        return {"reward": ("next", "reward"), "done": ("next", "done"), "terminated": ("next", "terminated")}.get(
            name, name
        )

    # ------------------------------------------------------------------------------ helpers
    def run(self, loss, td, seed=0):
        torch.manual_seed(seed)
        return loss(td)

    def run_reference(self, loss, td, seed=0):
        torch.manual_seed(seed)
        return self.reference(loss, td)

    def grads(self, loss, total):
        params = list(loss.parameters())
        for p in params:
            p.grad = None
        total.backward()
        return [None if p.grad is None else p.grad.clone() for p in params]

    # -------------------------------------------------------------------------------- tests
    def test_output_terms(self):
        loss = self.make_loss()
        out = self.run(loss, self.make_batch())
        assert sorted(_terms(out)) == sorted(self.loss_terms)
        for name in self.loss_terms:
            assert out[name].shape == torch.Size([]), name
            assert torch.isfinite(out[name])
        assert set(self.loss_terms) <= set(loss.out_keys)

    def test_matches_reference_values_and_gradients(self):
        loss = self.make_loss(reduction="none")
        td = self.make_batch()
        out = self.run(loss, td.clone())
        ref = self.run_reference(loss, td.clone())
        for name in self.loss_terms:
            torch.testing.assert_close(out[name], ref[name], atol=ATOL, rtol=1e-5, msg=name)
        for name in self.loss_terms:
            ours = self.grads(loss, self.run(loss, td.clone())[name].mean())
            theirs = self.grads(loss, self.run_reference(loss, td.clone())[name].mean())
            for g1, g2 in zip(ours, theirs):
                assert (g1 is None) == (g2 is None), name
                if g1 is not None:
                    torch.testing.assert_close(g1, g2, atol=ATOL, rtol=1e-4, msg=name)

    @pytest.mark.parametrize("reduction", ["mean", "sum"])
    def test_reduction(self, reduction):
        loss_none = self.make_loss(reduction="none")
        loss = self.make_loss(reduction=reduction)
        loss.load_state_dict(loss_none.state_dict())
        td = self.make_batch()
        per_elem = _terms(self.run(loss_none, td.clone()))
        reduced = _terms(self.run(loss, td.clone()))
        for name in self.loss_terms:
            expected = per_elem[name].mean() if reduction == "mean" else per_elem[name].sum()
            torch.testing.assert_close(reduced[name], expected, atol=ATOL, rtol=1e-5, msg=name)

    def test_bad_reduction(self):
        with pytest.raises(NotImplementedError, match="reduction must be one of"):  # TorchRL's type
            self.make_loss(reduction="average")

    def test_backward_reaches_every_parameter(self):
        loss = self.make_loss()
        out = self.run(loss, self.make_batch())
        sum(_terms(out).values()).backward()
        params = list(loss.named_parameters())
        assert params
        for name, p in params:
            assert p.grad is not None, name
            assert torch.isfinite(p.grad).all(), name
        assert not any(name.startswith("_target_") for name, _ in params)

    def test_set_keys_renames_inputs(self):
        assert self.renames, f"{type(self).__name__}: declare the loss's renamable input entries in `renames`"
        loss = self.make_loss()
        td = self.make_batch()
        expected = _terms(self.run(loss, td.clone()))
        renamed = td.clone()
        for name, new in self.renames.items():
            renamed.rename_key_(self.data_key(name), self.data_key_renamed(name, new))
        loss.set_keys(**self.renames)
        for name, new in self.renames.items():
            assert getattr(loss.tensor_keys, name) == new
        got = _terms(self.run(loss, renamed))
        for name in self.loss_terms:
            torch.testing.assert_close(got[name], expected[name], msg=name)

    def data_key_renamed(self, name, new):
        old = self.data_key(name)
        if isinstance(old, tuple) and old[0] == "next":
            return ("next", new) if isinstance(new, str) else ("next", *new)
        return new

    def test_set_keys_unknown_name(self):
        loss = self.make_loss()
        with pytest.raises(ValueError, match="is not a key of this loss; its keys are"):
            loss.set_keys(not_a_key="x")

    def test_missing_key_names_key_and_table(self):
        loss = self.make_loss()
        td = self.make_batch()
        key = self.data_key("reward")
        del td[key]
        with pytest.raises(KeyError, match="not found in the input tensordict.*key table"):
            self.run(loss, td)

    def test_in_keys_are_in_the_batch(self):
        loss = self.make_loss()
        td = self.make_batch()
        keys = set(td.keys(True, True))
        for key in loss.in_keys:
            if key in (("next", "terminated"),) + tuple(getattr(self, "optional_in_keys", ())):
                continue
            assert key in keys, key

    def test_value_estimators(self):
        td = self.make_batch((2, 4))
        for value_type in ValueEstimators:
            loss = self.make_loss()
            if value_type in loss.supported_value_estimators:
                loss.make_value_estimator(value_type, gamma=0.9)
                assert loss.value_type is value_type
                assert float(loss.value_estimator.gamma) == pytest.approx(0.9)
                out = self.run(loss, td.clone())
                for name in self.loss_terms:
                    assert torch.isfinite(out[name]), (value_type, name)
            else:
                with pytest.raises(NotImplementedError, match="does not support the .* value estimator"):
                    loss.make_value_estimator(value_type)

    def test_default_value_estimator(self):
        loss = self.make_loss()
        est = loss.value_estimator
        assert loss.value_type is type(loss).default_value_estimator
        assert est is loss.value_estimator

    def test_target_soft_update(self):
        loss = self.make_loss()
        pairs = loss._target_pairs()
        if not pairs:  # a loss without target network refuses updaters with a message saying how to get one
            with pytest.raises(RuntimeError, match="has no target parameters to update"):
                SoftUpdate(loss, tau=0.25)
            return
        updater = SoftUpdate(loss, tau=0.25)
        with torch.no_grad():
            for p in loss.parameters():
                p.add_(1.0)
        before = [(src.detach().clone(), tgt.clone()) for _, src, tgt in loss._target_pairs()]
        updater.step()
        for (src, tgt_before), (_, _, tgt) in zip(before, loss._target_pairs()):
            for key in tgt.keys(True, True):
                want = 0.75 * tgt_before[key] + 0.25 * src[key]
                torch.testing.assert_close(tgt[key], want, msg=str(key))

    def test_target_hard_update(self):
        loss = self.make_loss()
        if not loss._target_pairs():
            with pytest.raises(RuntimeError, match="has no target parameters to update"):
                HardUpdate(loss, value_network_update_interval=3)
            return
        updater = HardUpdate(loss, value_network_update_interval=3)
        with torch.no_grad():
            for p in loss.parameters():
                p.mul_(2.0).add_(0.5)
        updater.step()
        updater.step()
        for _, src, tgt in loss._target_pairs():
            assert not all(torch.equal(tgt[k], src[k].detach()) for k in tgt.keys(True, True))
        updater.step()
        for _, src, tgt in loss._target_pairs():
            for k in tgt.keys(True, True):
                assert torch.equal(tgt[k], src[k].detach()), k

    def test_optimizer_step_is_seen_by_the_loss(self):
        loss = self.make_loss()
        td = self.make_batch()
        before = _terms(self.run(loss, td.clone()))
        opt = torch.optim.SGD(loss.parameters(), lr=0.5)
        sum(before.values()).backward()
        opt.step()
        after = _terms(self.run(loss, td.clone()))
        assert any(not torch.allclose(before[k], after[k]) for k in self.loss_terms)

    def test_state_dict_round_trip(self):
        loss = self.make_loss()
        other = self.make_loss()
        other.load_state_dict(loss.state_dict())
        td = self.make_batch()
        a, b = _terms(self.run(loss, td.clone())), _terms(self.run(other, td.clone()))
        for name in self.loss_terms:
            torch.testing.assert_close(a[name], b[name], msg=name)

    # ------------------------------------------------------------------ lazy networks
    # Losses accept networks with lazy layers (``nn.LazyLinear``, ``MLP`` without ``in_features``): an optimizer
    # built on ``loss.parameters()`` before the first call trains them, target updaters attached before it
    # work, and the first call initialises them (TorchRL's getting-started DQN builds its loss that way).
    def make_lazy_loss(self, monkeypatch, build=None, **kwargs):
        """``make_loss`` (or ``build``) with every ``nn.Linear`` of the networks it registers made a
        ``nn.LazyLinear``."""
        from torchrl.objectives import LossModule

        register = LossModule.convert_to_functional

        def lazy_register(loss, module, name, *args, **kw):
            for net in module if isinstance(module, (list, tuple, torch.nn.ModuleList)) else [module]:
                _lazify(net)
            return register(loss, module, name, *args, **kw)

        monkeypatch.setattr(LossModule, "convert_to_functional", lazy_register)
        try:
            return (build or self.make_loss)(**kwargs)
        finally:
            monkeypatch.undo()

    def test_lazy_networks_initialised_on_first_call(self, monkeypatch):
        from torch.nn.parameter import UninitializedParameter

        loss = self.make_lazy_loss(monkeypatch)
        assert any(isinstance(p, UninitializedParameter) for p in loss.parameters())
        opt = torch.optim.SGD(loss.parameters(), lr=0.1)
        updater = SoftUpdate(loss, tau=0.5) if loss._target_pairs() else None
        td = self.make_batch()
        terms = _terms(self.run(loss, td.clone()))
        assert sorted(terms) == sorted(self.loss_terms) and all(torch.isfinite(v) for v in terms.values())
        assert not any(isinstance(p, UninitializedParameter) for p in loss.parameters())
        before = [p.detach().clone() for p in loss.parameters()]
        sum(terms.values()).backward()
        opt.step()
        assert any(not torch.equal(b, p) for b, p in zip(before, loss.parameters()))
        if updater is not None:
            updater.step()
            for _, src, tgt in loss._target_pairs():
                assert src.keys(True, True) and set(tgt.keys(True, True)) == set(src.keys(True, True))
        again = _terms(self.run(loss, td.clone()))
        assert any(not torch.allclose(terms[k], again[k]) for k in self.loss_terms)

    def test_deepcopy_is_independent(self):
        loss = self.make_loss()
        clone = copy.deepcopy(loss)
        with torch.no_grad():
            for p in clone.parameters():
                p.zero_()
        assert any(p.abs().sum() > 0 for p in loss.parameters())


def _lazify(module: torch.nn.Module) -> None:
    """Replaces every ``nn.Linear`` inside ``module`` by a ``nn.LazyLinear`` with the same outputs."""
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(parent, name, torch.nn.LazyLinear(child.out_features, bias=child.bias is not None))


def functional(module, params, *inputs, detach: bool = False):
    """``module(*inputs)`` with the values of a loss's parameter TensorDict (``module`` = the wrapped
    ``nn.Module``, the TensorDict's leading ``"module"`` level stripped)."""
    from torch.func import functional_call

    names = [".".join(k[1:]) for k in params.keys(True, True)]
    values = [v.detach() if detach else v for v in params.values(True, True)]
    return functional_call(module, dict(zip(names, values)), inputs)

