"""Samplers of ``torchrl.data.replay_buffers.samplers`` and the pure-torch segment trees."""
from __future__ import annotations

import doctest
import importlib
import math
import pickle

import pytest
import torch
from hypothesis import given, settings, strategies as st
from tensordict import TensorDict

from torchrl.data.replay_buffers import (
    LazyTensorStorage,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerEnsemble,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    StorageEnsemble,
    TensorDictReplayBuffer,
    find_start_stop_traj,
)
from torchrl.data.replay_buffers.samplers import (
    MinSegmentTreeFp32,
    MinSegmentTreeFp64,
    SumSegmentTreeFp32,
    SumSegmentTreeFp64,
)
from torchrl.data.replay_buffers.samplers._segment_tree import PriorityTree


# ---------------------------------------------------------------------------- segment trees
@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 300),
    branching=st.sampled_from([2, 3, 8, 64]),
    top=st.sampled_from([1, 4, 16384]),
    seed=st.integers(0, 1000),
)
def test_segment_trees_match_brute_force(size, branching, top, seed):
    gen = torch.Generator().manual_seed(seed)
    values = torch.rand(size, generator=gen, dtype=torch.float64) + 0.01
    sum_tree = SumSegmentTreeFp64(size, branching=branching, top_size=top)
    min_tree = MinSegmentTreeFp64(size, branching=branching, top_size=top)
    order = torch.randperm(size, generator=gen)
    sum_tree[order] = values[order]
    min_tree.update(order, values[order])
    left = torch.randint(0, size + 1, (64,), generator=gen)
    right = torch.randint(0, size + 1, (64,), generator=gen)
    prefix = torch.cat([torch.zeros(1, dtype=torch.float64), values.cumsum(0)])
    expected_sum = torch.where(left < right, prefix[right] - prefix[left], 0.0)
    torch.testing.assert_close(sum_tree.query(left, right), expected_sum)
    expected_min = torch.tensor(
        [values[a:b].min().item() if a < b else math.inf for a, b in zip(left.tolist(), right.tolist())],
        dtype=torch.float64,
    )
    assert torch.equal(min_tree.query(left, right), expected_min)
    mass = torch.rand(128, generator=gen, dtype=torch.float64) * values.sum()
    expected = torch.searchsorted(values.cumsum(0), mass, right=True).clamp_max(size - 1)
    assert torch.equal(sum_tree.scan_lower_bound(mass), expected)


class TestSegmentTree:
    def test_api(self):
        tree = SumSegmentTreeFp32(10, branching=4)
        assert tree.size == 10 and tree.capacity == 12 and tree.identity_element == 0.0
        tree[3] = 2.0
        tree.update(torch.tensor([0, 9]), torch.tensor([1.0, 4.0]))
        assert tree[3] == 2.0 and tree[torch.tensor([0, 9])].tolist() == [1.0, 4.0]
        assert tree.query(0, 10) == 7.0 and tree.query(1, 9) == 2.0
        assert tree.scan_lower_bound(0.5) == 0 and tree.scan_lower_bound(1.0) == 3
        assert tree.scan_lower_bound(7.0) == 10  # at or above the total: size
        assert MinSegmentTreeFp32(5).identity_element == math.inf

    def test_repeated_indices_last_write_wins(self):
        tree = SumSegmentTreeFp32(8)
        tree.update(torch.tensor([2, 5, 2, 2]), torch.tensor([1.0, 3.0, 7.0, 4.0]))
        assert tree.leaves.tolist() == [0, 0, 4.0, 0, 0, 3.0, 0, 0]
        assert tree.query(0, 8) == 7.0

    def test_errors(self):
        tree = SumSegmentTreeFp64(4)
        with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\)"):
            tree.update(torch.tensor([4]), torch.tensor([1.0]))
        with pytest.raises(ValueError, match="got 2 values for 3 indices"):
            tree.update(torch.tensor([0, 1, 2]), torch.tensor([1.0, 2.0]))


# ---------------------------------------------------------------------------- the prioritized samplers' tree
def check_draws(tree: PriorityTree, leaves: torch.Tensor, seed: int, limit: int | None = None) -> None:
    """Draws of ``tree`` land on the leaf whose prefix-sum interval holds the (reproduced) random mass."""
    n = leaves.numel() if limit is None else limit
    drawn = tree.sample(64, limit=limit, beta=0.5, generator=torch.Generator().manual_seed(seed))
    if leaves[:n].sum() == 0:
        assert drawn is None
        return
    index, weight = drawn
    total = leaves[:n].sum().item()
    mass = torch.empty(64, dtype=torch.float64).uniform_(0.0, total, generator=torch.Generator().manual_seed(seed))
    upper = leaves[:n].cumsum(0)
    tol = 1e-9 * total
    assert index.dtype == torch.long and ((index >= 0) & (index < n)).all()
    assert (leaves[index] > 0).all()  # a zero leaf is never drawn
    assert ((upper[index] - leaves[index] <= mass + tol) & (mass < upper[index] + tol)).all()
    smallest = leaves[tree.written].min()
    torch.testing.assert_close(weight, (leaves[index] / smallest) ** -0.5)


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 300),
    branching=st.sampled_from([2, 4, 64]),
    top=st.sampled_from([2, 8, 16384]),
    backend=st.sampled_from(["numpy", "torch"]),
    seed=st.integers(0, 10_000),
)
def test_priority_tree_matches_brute_force(size, branching, top, backend, seed):
    gen = torch.Generator().manual_seed(seed)
    tree = PriorityTree(size, dtype=torch.float64, branching=branching, top_size=top, backend=backend)
    leaves = torch.zeros(size, dtype=torch.float64)
    written = torch.zeros(size, dtype=torch.bool)
    assert tree.min_positive().item() == math.inf and tree.sample(4) is None
    for step in range(8):
        if step % 4 == 3:  # a contiguous write, as extend() does
            start = int(torch.randint(0, size, (1,), generator=gen))
            stop = int(torch.randint(start, size + 1, (1,), generator=gen))
            value = float(torch.rand(1, generator=gen)) * 4
            tree.update_range(start, stop, value)
            leaves[start:stop], written[start:stop] = value, True
        else:  # repeated indices (the last write wins), values over six decades, some written zeros
            n = int(torch.randint(1, 2 * size + 1, (1,), generator=gen))
            index = torch.randint(0, size, (n,), generator=gen)
            value = torch.rand(n, generator=gen, dtype=torch.float64) * 10.0 ** torch.randint(-3, 3, (n,), generator=gen)
            value[torch.rand(n, generator=gen) < 0.05] = 0.0
            tree.update(index, value)
            for i, v in zip(index.tolist(), value.tolist()):
                leaves[i], written[i] = v, True
        assert torch.equal(tree.leaves, leaves) and torch.equal(tree.written, written)
        assert tree.min_positive().item() == (leaves[written].min().item() if written.any() else math.inf)
        torch.testing.assert_close(tree.total(), leaves.sum())
        check_draws(tree, leaves, seed + step)
        limit = int(written.nonzero().max()) + 1 if written.any() else size  # nothing written past the limit
        check_draws(tree, leaves, seed + step, limit=limit)


class TestPriorityTree:
    def test_minimum_stays_exact(self):
        tree = PriorityTree(200, branching=4, top_size=4)
        tree.update_range(0, 100, 5.0)
        tree.update(torch.tensor([7, 9]), torch.tensor([1.0, 2.0]))
        assert tree.min_positive().item() == 1.0
        tree.update(torch.tensor([7]), torch.tensor([8.0]))  # the holder of the minimum grows
        assert tree.min_positive().item() == 2.0
        tree.update(torch.tensor([9, 9]), torch.tensor([0.5, 3.0]))  # repeated index: 3.0 is what is stored
        assert tree.min_positive().item() == 3.0
        tree.update(torch.tensor([150]), torch.tensor([0.0]))  # a written zero counts; unwritten leaves do not
        assert tree.min_positive().item() == 0.0
        tree.update_range(140, 160, 4.0)
        assert tree.min_positive().item() == 3.0
        tree.reset()
        assert tree.min_positive().item() == math.inf and not tree.written.any() and tree.total() == 0

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
    def test_backends_draw_the_same_leaves(self, dtype):
        values = torch.rand(5000, generator=torch.Generator().manual_seed(1), dtype=dtype) ** 4
        trees = [PriorityTree(6000, dtype=dtype, branching=8, top_size=64, backend=b) for b in ("numpy", "torch")]
        for tree in trees:
            tree.update(torch.arange(5000), values)
            tree.update(torch.tensor([3, 17, 3]), torch.tensor([2.0, 0.0, 0.25], dtype=dtype))
        (i_np, w_np), (i_t, w_t) = (t.sample(512, limit=5000, beta=0.4, generator=torch.Generator().manual_seed(2))
                                    for t in trees)
        assert torch.equal(i_np, i_t)
        torch.testing.assert_close(w_np, w_t)
        assert trees[0].backend == "numpy" and trees[1].backend == "torch"

    @pytest.mark.parametrize("backend", ["numpy", "torch"])
    def test_frequencies_follow_leaves(self, backend):
        # a four-level tree (branching 4, top of 4 nodes), 200k draws, chi-square against the leaf values
        values = torch.rand(150, generator=torch.Generator().manual_seed(3)) + 0.05
        values[::10] = 0.0
        tree = PriorityTree(150, branching=4, top_size=4, backend=backend)
        tree.update(torch.arange(150), values)
        gen = torch.Generator().manual_seed(4)
        counts = sum(torch.bincount(tree.sample(10_000, generator=gen)[0], minlength=150) for _ in range(20))
        expected = values / values.sum() * 200_000
        assert counts[values == 0].sum() == 0
        chi2 = ((counts - expected)[values > 0] ** 2 / expected[values > 0]).sum().item()
        assert chi2 < 200  # 134 degrees of freedom: mean 134, sd 16

    def test_pickle_and_shared_memory_keep_working(self):
        tree = PriorityTree(100)
        tree.update(torch.arange(10), torch.arange(1.0, 11.0))
        copy = pickle.loads(pickle.dumps(tree))
        copy.update(torch.tensor([0]), torch.tensor([100.0]))  # independent of the original
        assert tree.leaves[0].item() == 1.0 and copy.leaves[0].item() == 100.0
        assert copy.sample(50, generator=torch.Generator().manual_seed(0))[0].max() < 10
        tree.share_memory_()
        tree.update(torch.tensor([5]), torch.tensor([0.5]))
        assert tree.leaves.is_shared() and tree.min_positive().item() == 0.5
        assert tree.sample(50)[0].max() < 10

    @pytest.mark.parametrize("backend", ["numpy", "torch"])
    def test_last_write_wins_in_large_batches(self, backend):
        index = torch.randint(0, 100, (50_000,), generator=torch.Generator().manual_seed(0))
        value = torch.arange(50_000, dtype=torch.float32)
        tree = PriorityTree(100, branching=4, top_size=4, backend=backend)
        tree.update(index, value)
        last = torch.zeros(100).scatter_reduce_(0, index, value, reduce="amax")  # values increase with position
        assert torch.equal(tree.leaves, last)
        torch.testing.assert_close(tree.total(), last.sum())

    def test_backend_errors(self):
        with pytest.raises(ValueError, match="backend must be 'torch', or 'numpy' on CPU; got 'cuda'"):
            PriorityTree(4, backend="cuda")


@pytest.mark.parametrize("name", ["_segment_tree", "prioritized", "prioritized_slice"])
def test_docstring_examples(name):
    module = importlib.import_module(f"torchrl.data.replay_buffers.samplers.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------------------- uniform samplers
def counting_buffer(n: int, capacity: int, sampler) -> ReplayBuffer:
    rb = ReplayBuffer(storage=LazyTensorStorage(capacity), sampler=sampler)
    rb.extend(torch.arange(n))
    return rb


def test_random_sampler_uniform_and_seeded():
    rb = counting_buffer(10, 20, RandomSampler())
    draws = rb.sample(20000)
    counts = torch.bincount(draws, minlength=10).float()
    assert draws.max() < 10 and (counts / 20000 - 0.1).abs().max() < 0.015
    rb.set_rng(torch.Generator().manual_seed(3))
    first = rb.sample(5)
    rb.set_rng(torch.Generator().manual_seed(3))
    assert torch.equal(first, rb.sample(5))


def test_empty_buffer_error():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    with pytest.raises(RuntimeError, match="RandomSampler: cannot sample from an empty replay buffer"):
        rb.sample(4)


class TestWithoutReplacement:
    def test_every_index_once_per_epoch(self):
        rb = counting_buffer(10, 10, SamplerWithoutReplacement())
        for _ in range(3):
            seen = []
            while True:
                seen += rb.sample(3).tolist()
                if rb.sampler.ran_out:
                    break
            assert sorted(seen) == list(range(10))

    def test_drop_last_and_shuffle(self):
        rb = counting_buffer(10, 10, SamplerWithoutReplacement(drop_last=True, shuffle=False))
        assert rb.sample(4).tolist() == [0, 1, 2, 3]
        assert rb.sample(4).tolist() == [4, 5, 6, 7]
        assert rb.sampler.ran_out
        assert rb.sample(4).tolist() == [0, 1, 2, 3]  # new epoch; 8 and 9 were dropped

    def test_batch_larger_than_epoch(self):
        rb = counting_buffer(5, 10, SamplerWithoutReplacement(drop_last=True))
        with pytest.raises(ValueError, match=r"batch_size=8 is larger than the 5 elements stored"):
            rb.sample(8)
        loose = counting_buffer(5, 10, SamplerWithoutReplacement())
        assert sorted(loose.sample(8).tolist()) == [0, 1, 2, 3, 4]

    def test_state_dict_has_torchrl_layout_and_resumes_the_epoch(self):
        rb = counting_buffer(10, 10, SamplerWithoutReplacement(shuffle=False))
        assert rb.sampler.state_dict() == {"len_storage": 0, "_sample_list": None, "drop_last": False, "_ran_out": False}
        rb.sample(4)
        state = rb.sampler.state_dict()
        assert sorted(state) == ["_ran_out", "_sample_list", "drop_last", "len_storage"]
        assert state["len_storage"] == 10 and state["_sample_list"].tolist() == [4, 5, 6, 7, 8, 9]
        fresh = counting_buffer(10, 10, SamplerWithoutReplacement(shuffle=False))
        fresh.sampler.load_state_dict(state)
        assert fresh.sample(4).tolist() == [4, 5, 6, 7]
        assert fresh.sample(4).tolist() == [8, 9] and fresh.sampler.ran_out
        assert fresh.sample(4).tolist() == [0, 1, 2, 3]  # a new epoch over the whole storage

    def test_load_state_dict_of_the_earlier_layout(self):
        sampler = SamplerWithoutReplacement(shuffle=False)
        sampler.load_state_dict({"_order": torch.arange(10), "_has_order": torch.tensor(True), "_position": torch.tensor(8),
                                 "_epoch_len": torch.tensor(10), "_ran_out": torch.tensor(False)})
        rb = counting_buffer(10, 10, sampler)
        assert rb.sample(4).tolist() == [8, 9]

    def test_writes_start_a_new_epoch(self):
        rb = counting_buffer(4, 10, SamplerWithoutReplacement())
        rb.sample(2)
        rb.extend(torch.arange(4, 6))
        seen = rb.sample(6).tolist()
        assert sorted(seen) == list(range(6))


# ---------------------------------------------------------------------------- prioritized
class TestPrioritized:
    def make(self, n=4, **kwargs) -> ReplayBuffer:
        kwargs = {"alpha": 1.0, "beta": 0.5, "eps": 0.0, **kwargs}
        return counting_buffer(n, 8, PrioritizedSampler(8, **kwargs))

    def test_known_importance_weights(self):
        rb = self.make()
        rb.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
        data, info = rb.sample(400, return_info=True)
        expected = torch.tensor([1.0, 2.0**-0.5, 3.0**-0.5, 0.5])
        torch.testing.assert_close(info["priority_weight"], expected[data])
        # N * P(i) normalised by the largest weight, written out for element 3: (4 * 4/10)^-0.5 / (4 * 1/10)^-0.5
        assert info["priority_weight"][data == 3][0].item() == pytest.approx((1.6**-0.5) / (0.4**-0.5))

    def test_alpha_and_eps_transform_priorities(self):
        rb = self.make(alpha=0.5, beta=1.0, eps=1.0)
        rb.update_priority(torch.arange(4), torch.tensor([0.0, 3.0, 8.0, 15.0]))
        stored = rb.sampler._tree.leaves[:4]
        torch.testing.assert_close(stored, torch.tensor([1.0, 2.0, 3.0, 4.0]))
        _, info = rb.sample(50, return_info=True)
        torch.testing.assert_close(info["priority_weight"], 1.0 / stored[info["index"]])

    def test_sampling_frequencies_follow_priorities(self):
        rb = self.make()
        rb.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
        draws = rb.sample(40000)
        freq = torch.bincount(draws, minlength=4).float() / 40000
        torch.testing.assert_close(freq, torch.tensor([0.1, 0.2, 0.3, 0.4]), atol=0.012, rtol=0)

    def test_new_elements_get_the_max_priority(self):
        rb = self.make(n=2)
        assert rb.sampler.default_priority == 1.0
        rb.update_priority(torch.tensor([0]), torch.tensor([5.0]))
        rb.extend(torch.tensor([2]))
        assert rb.sampler._tree.leaves[2].item() == 5.0
        rb.update_priority(torch.tensor([0]), torch.tensor([0.5]))
        assert rb.sampler.default_priority == 5.0  # max ever seen

    def test_max_priority_within_buffer(self):
        rb = self.make(n=2, max_priority_within_buffer=True)
        rb.update_priority(torch.tensor([0, 1]), torch.tensor([5.0, 2.0]))
        rb.update_priority(torch.tensor([0]), torch.tensor([0.5]))
        assert rb.sampler.default_priority == 2.0

    def test_zero_priority_is_never_drawn(self):
        rb = self.make()
        rb.update_priority(torch.arange(4), torch.tensor([0.0, 0.0, 1.0, 0.0]))
        assert rb.sample(100).unique().tolist() == [2]

    def test_bad_priorities_are_rejected_without_change(self):
        rb = self.make()
        rb.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
        before = rb.sampler._tree.leaves.clone()
        with pytest.raises(ValueError, match=r"1 negative \(at positions \[1\]\)"):
            rb.update_priority(torch.arange(3), torch.tensor([1.0, -2.0, 3.0]))
        with pytest.raises(ValueError, match=r"1 NaN \(at positions \[0\]\)"):
            rb.update_priority(torch.arange(2), torch.tensor([float("nan"), 1.0]))
        with pytest.raises(ValueError, match="got 3 priorities .* for 2 indices"):
            rb.update_priority(torch.arange(2), torch.tensor([1.0, 2.0, 3.0]))
        with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\) \(the stored elements\)"):
            rb.update_priority(torch.tensor([6]), torch.tensor([1.0]))
        assert torch.equal(rb.sampler._tree.leaves, before)

    def test_per_step_priorities_are_reduced(self):
        rb = self.make(reduction="mean")
        rb.update_priority(torch.arange(2), torch.tensor([[1.0, 3.0], [4.0, 8.0]]))
        assert rb.sampler._tree.leaves[:2].tolist() == [2.0, 6.0]

    def test_frequencies_follow_priorities_to_the_alpha(self):
        sampler = PrioritizedSampler(1000, alpha=0.7, beta=0.5, eps=1e-8)
        rb = counting_buffer(600, 1000, sampler)
        priority = torch.rand(600, generator=torch.Generator().manual_seed(0)) * 5
        rb.update_priority(torch.arange(600), priority)
        rb.set_rng(torch.Generator().manual_seed(1))
        counts = sum(torch.bincount(rb.sample(20_000), minlength=600) for _ in range(15))
        expected = (priority + 1e-8) ** 0.7
        expected = expected / expected.sum() * 300_000
        chi2 = ((counts - expected) ** 2 / expected).sum().item()
        assert chi2 < 750  # 599 degrees of freedom: mean 599, sd 35

    def test_weights_follow_the_minimum_up_and_down(self):
        rb = self.make(beta=1.0)
        rb.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, 4.0, 8.0]))
        rb.update_priority(torch.tensor([0]), torch.tensor([16.0]))  # the smallest priority grows: min is now 2
        data, info = rb.sample(200, return_info=True)
        torch.testing.assert_close(info["priority_weight"], 2.0 / torch.tensor([16.0, 2.0, 4.0, 8.0])[data])
        rb.update_priority(torch.tensor([3]), torch.tensor([0.5]))
        data, info = rb.sample(200, return_info=True)
        torch.testing.assert_close(info["priority_weight"], 0.5 / torch.tensor([16.0, 2.0, 4.0, 0.5])[data])

    def test_edge_priorities_and_indices(self):
        rb = self.make()
        rb.update_priority(torch.arange(2), torch.tensor([-0.0, 1.0]))  # -0.0 is a valid (zero) priority
        assert rb.sampler._tree.leaves[:2].tolist() == [0.0, 1.0]
        with pytest.raises(ValueError, match=r"1 infinite \(at positions \[1\]\)"):
            rb.update_priority(torch.arange(2), torch.tensor([1.0, float("inf")]))
        with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\) .* got values in \[-1, 1\]"):
            rb.update_priority(torch.tensor([-1, 1]), torch.tensor([1.0, 1.0]))
        double = counting_buffer(4, 8, PrioritizedSampler(8, alpha=1.0, beta=1.0, eps=0.0, dtype=torch.double))
        with pytest.raises(ValueError, match="1 negative"):
            double.update_priority(torch.arange(2), torch.tensor([1.0, -3.0], dtype=torch.double))
        double.update_priority(torch.arange(2), torch.tensor([3.0, 2.0], dtype=torch.double))
        assert double.sampler._max_priority == 3.0 and double.sampler._tree.leaves.dtype == torch.double

    def test_state_dict(self):
        rb = self.make()
        rb.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
        other = PrioritizedSampler(8, alpha=0.3, beta=0.3)
        other.load_state_dict(rb.sampler.state_dict())
        assert torch.equal(other._tree.leaves, rb.sampler._tree.leaves)
        assert (other.alpha, other.beta, other._max_priority) == (1.0, 0.5, 4.0)
        assert other._tree.min_positive().item() == 1.0


# ---------------------------------------------------------------------------- slices
def episodes(lengths, capacity=None, ndim_env=None) -> TensorDictReplayBuffer:
    ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    steps = torch.cat([torch.arange(n) for n in lengths])
    done = torch.cat([torch.arange(n) == n - 1 for n in lengths]).unsqueeze(-1)
    return TensorDict(episode=ids, step=steps, next=TensorDict(done=done, batch_size=[len(ids)]), batch_size=[len(ids)])


def assert_slices_within_episodes(sample: TensorDict, seq_len: int) -> None:
    for chunk in sample.split(seq_len):
        assert chunk["episode"].unique().numel() == 1
        assert (chunk["step"].diff() == 1).all()


class TestSliceSampler:
    @pytest.mark.parametrize("boundary", [{}, {"end_key": ("next", "done")}, {"traj_key": "episode"}])
    def test_slices_never_cross_trajectories(self, boundary):
        data = episodes([7, 3, 12, 5, 9])
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(50), sampler=SliceSampler(slice_len=4, **boundary))
        rb.extend(data)
        sample = rb.sample(40)
        assert_slices_within_episodes(sample, 4)
        assert set(sample["episode"].tolist()) <= {0, 2, 3, 4}  # episode 1 is too short
        truncated = sample["next", "truncated"].reshape(10, 4)
        done = sample["next", "done"].reshape(10, 4)
        assert not truncated[:, :-1].any() and done[:, -1].all()
        # as in TorchRL: every slice end is truncated (also at its trajectory's real end); terminated is
        # reported (all False here, nothing terminated is stored)
        assert truncated[:, -1].all()
        assert not sample["next", "terminated"].any()

    def test_index_is_a_coordinate_tuple(self):
        # as TorchRL: the info's "index" is a tuple of coordinates, the sample's "index" their stack ([N, 1])
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30), sampler=SliceSampler(num_slices=2), batch_size=8)
        rb.extend(episodes([10, 10]))
        sample, info = rb.sample(return_info=True)
        assert isinstance(info["index"], tuple) and len(info["index"]) == 1
        assert sample["index"].shape == (8, 1)
        assert torch.equal(sample["index"].squeeze(-1), info["index"][0])
        assert torch.equal(rb[info["index"]]["step"], sample["step"])
        loose = TensorDictReplayBuffer(storage=LazyTensorStorage(30), batch_size=8,
                                       sampler=SliceSampler(num_slices=2, strict_length=False, traj_key="episode"))
        loose.extend(episodes([3, 10]))
        assert loose.sample()["index"].shape[1:] == (1,)

    def test_circular_storage_splits_at_the_cursor(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sampler=SliceSampler(slice_len=3, traj_key="episode"))
        rb.extend(episodes([12]))  # one episode in 10 slots: steps 10, 11 in slots 0, 1; steps 2..9 in 2..9
        sample = rb.sample(600)
        assert_slices_within_episodes(sample, 3)  # slot 1 (newest) and slot 2 (oldest) never share a slice
        starts = set(sample["index"].reshape(-1, 3)[:, 0].tolist())
        assert starts == {2, 3, 4, 5, 6, 7, 8, 9}  # slices may wrap from slot 9 to slot 0: [8, 9, 0], [9, 0, 1]

    def test_wrap_across_the_storage_end(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), sampler=SliceSampler(slice_len=4, traj_key="episode"))
        rb.extend(episodes([3]))
        rb.extend(episodes([8]))  # episode "0" again, written at slots 3..7 then 0..2
        sample = rb.sample(200)
        assert_slices_within_episodes(sample, 4)
        assert (sample["index"] < 8).all() and sample["index"].unique().numel() == 8

    def test_num_slices_and_batch_errors(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30), sampler=SliceSampler(num_slices=2))
        rb.extend(episodes([10, 10]))
        assert rb.sample(8).shape == torch.Size([8])
        with pytest.raises(RuntimeError, match="batch_size=9 is not a multiple of num_slices=2"):
            rb.sample(9)
        strict = TensorDictReplayBuffer(storage=LazyTensorStorage(30), sampler=SliceSampler(slice_len=12))
        strict.extend(episodes([10, 10]))
        with pytest.raises(RuntimeError, match="no stored trajectory is at least 12 steps long"):
            strict.sample(24)
        with pytest.raises(TypeError, match="exactly one of num_slices and slice_len"):
            SliceSampler(num_slices=2, slice_len=3)

    def test_short_trajectories_and_padding(self):
        loose = TensorDictReplayBuffer(
            storage=LazyTensorStorage(30), sampler=SliceSampler(slice_len=5, strict_length=False)
        )
        loose.extend(episodes([2, 2]))
        sample = loose.sample(10)
        assert sample.shape[0] == 4 and (sample["step"].reshape(2, 2) == torch.tensor([0, 1])).all()
        padded = TensorDictReplayBuffer(
            storage=LazyTensorStorage(30), sampler=SliceSampler(slice_len=5, strict_length=False, pad_output=True)
        )
        padded.extend(episodes([2, 2]))
        sample, info = padded.sample(10, return_info=True)
        assert sample.shape[0] == 10 and torch.equal(sample["collector", "mask"], info[("collector", "mask")])
        assert info[("collector", "mask")].reshape(2, 5).tolist() == [[True, True, False, False, False]] * 2
        unpadded = TensorDictReplayBuffer(
            storage=LazyTensorStorage(30), sampler=SliceSampler(slice_len=2, strict_length=False, pad_output=True)
        )
        unpadded.extend(episodes([2, 2]))
        assert ("collector", "mask") not in unpadded.sample(4, return_info=True)[1]  # no slice was padded
        assert (sample["step"].reshape(2, 5) == torch.tensor([0, 1, 1, 1, 1])).all()

    def test_span(self):
        sampler = SliceSampler(slice_len=4, span=True, strict_length=False, traj_key="episode")
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(50), sampler=sampler)
        rb.extend(episodes([6, 6]))
        lengths = set()
        for _ in range(20):
            sample, info = rb.sample(40, return_info=True)
            ends = info[("next", "truncated")].squeeze(-1) | info[("next", "done")].squeeze(-1)
            positions = ends.nonzero().squeeze(-1)
            lengths |= set(torch.diff(positions, prepend=torch.tensor([-1])).tolist())
            assert sample.shape[0] == positions[-1] + 1
        assert min(lengths) == 1 and max(lengths) == 4  # slices overhanging a trajectory edge are cut short
        assert SliceSampler(slice_len=4, span=True).strict_length is False  # span implies it, as in TorchRL

    def test_ndim_2_storage(self):
        # [time, env] layout: 2 envs, trajectories of length 4 in env 0, 2 in env 1
        done = torch.tensor([[0, 0], [0, 1], [0, 0], [1, 1]], dtype=torch.bool).unsqueeze(-1)
        data = TensorDict(
            t=torch.arange(4).unsqueeze(-1).expand(4, 2), env=torch.arange(2).expand(4, 2),
            next=TensorDict(done=done, batch_size=[4, 2]), batch_size=[4, 2],
        )
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8, ndim=2), sampler=SliceSampler(slice_len=2))
        rb.extend(data)
        sample = rb.sample(40)
        for chunk in sample.split(2):
            assert chunk["env"].unique().numel() == 1 and (chunk["t"].diff() == 1).all()
            if chunk["env"][0] == 1:
                assert chunk["t"][0].item() in (0, 2)

    def test_without_replacement_uses_each_trajectory_once(self):
        sampler = SliceSamplerWithoutReplacement(slice_len=2, traj_key="episode")
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(40), sampler=sampler, batch_size=4)
        rb.extend(episodes([3, 4, 5, 3, 2]))
        for _ in range(2):
            episodes_seen = torch.cat([batch["episode"] for batch in rb]).reshape(-1, 2)[:, 0]
            assert sorted(episodes_seen.tolist()) == [0, 1, 2, 3, 4]
        assert isinstance(SliceSampler(slice_len=2, replacement=False), SliceSamplerWithoutReplacement)

    def test_prioritized_slices_start_at_high_priority_steps(self):
        sampler = PrioritizedSliceSampler(max_capacity=20, alpha=1.0, beta=1.0, slice_len=3, traj_key="episode")
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler)
        rb.extend(episodes([5, 5, 5, 5]))
        priority = torch.zeros(20)
        priority[[6, 9]] = 1.0  # step 9 is too close to the end of episode 1 to start a slice
        rb.update_priority(torch.arange(20), priority)
        sample = rb.sample(30)
        assert_slices_within_episodes(sample, 3)
        assert sample["index"].reshape(10, 3)[:, 0].unique().tolist() == [6]
        assert sample["priority_weight"].shape == torch.Size([30])


def test_find_start_stop_traj_known_answers():
    end = torch.tensor([False, True, False, False, True, False])
    start, stop, length = find_start_stop_traj(end=end, at_capacity=False)
    assert (start.tolist(), stop.tolist(), length.tolist()) == ([0, 2, 5], [1, 4, 5], [2, 3, 1])
    start, stop, length = find_start_stop_traj(trajectory=torch.tensor([2, 0, 0, 1, 1, 2]), at_capacity=True, cursor=0)
    assert (start.tolist(), stop.tolist(), length.tolist()) == ([5, 1, 3], [0, 2, 4], [2, 2, 2])
    ends = torch.tensor([[False, True], [True, False], [False, True]])
    start, stop, length = find_start_stop_traj(end=ends, at_capacity=False)
    assert start.tolist() == [[0, 0], [2, 0], [0, 1], [1, 1]] and length.tolist() == [2, 1, 1, 2]
    with pytest.raises(ValueError, match="exactly one of trajectory= and end="):
        find_start_stop_traj(at_capacity=False)


def test_sampler_ensemble():
    storages = StorageEnsemble(LazyTensorStorage(4), LazyTensorStorage(4))
    storages[0].set(torch.arange(4), torch.zeros(4))
    storages[1].set(torch.arange(4), torch.ones(4))
    sampler = SamplerEnsemble(RandomSampler(), RandomSampler(), p=[0.0, 1.0], num_buffer_sampled=2)
    index, info = sampler.sample(storages, 6)
    assert info["buffer_ids"].tolist() == [1, 1] and [len(i) for _, i in index] == [3, 3]
    assert all(x.eq(1).all() for x in storages.get(index))
    with pytest.raises(ValueError, match="p must hold 2 non-negative weights"):
        SamplerEnsemble(RandomSampler(), RandomSampler(), p=[1.0])


def test_slice_flags_keep_stored_episode_starts():
    import torch
    from tensordict import TensorDict

    from torchrl.data import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer

    n = 20
    is_init = torch.zeros(n, 1, dtype=torch.bool)
    is_init[[0, 5, 10, 15]] = True  # episodes of 5 steps, but slices use one trajectory id for all
    data = TensorDict(
        {"obs": torch.arange(n).float(), "traj": torch.zeros(n, dtype=torch.long), "is_init": is_init}, batch_size=[n]
    )
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(n), sampler=SliceSampler(slice_len=10, traj_key="traj"), batch_size=10
    )
    rb.extend(data)
    sample = rb.sample()
    starts = sample["obs"].long()
    expected = (starts % 5 == 0) | (torch.arange(10) == 0)
    assert sample["is_init"].squeeze(-1).tolist() == expected.tolist()


class TestSliceSamplerArguments:
    """TorchRL 0.14.1's argument combinations and their exception types."""

    @staticmethod
    def _data():
        done = torch.zeros(20, 1, dtype=torch.bool)
        done[[5, 9, 19]] = True
        episode = torch.tensor([0] * 6 + [1] * 4 + [2] * 10)
        return TensorDict({"episode": episode, "obs": torch.arange(20.0), "next": {"done": done}}, batch_size=[20])

    @pytest.mark.parametrize(
        "kwargs, error, match",
        [
            ({}, TypeError, "exactly one of num_slices and slice_len"),
            ({"num_slices": 2, "slice_len": 2}, TypeError, "got num_slices=2 and slice_len=2"),
            ({"num_slices": 2, "end_key": "a", "end_keys": ["b"]}, RuntimeError, "end_key and end_keys are exclusive"),
            ({"num_slices": 2, "ends": torch.zeros(3, dtype=torch.bool), "trajectories": torch.zeros(3)}, RuntimeError,
             "trajectories and ends are exclusive"),
            ({"num_slices": 2, "ends": torch.zeros(3, dtype=torch.bool), "traj_key": "t", "cache_values": True},
             RuntimeError, "ends= gives the trajectories directly"),
            ({"num_slices": 2, "trajectories": torch.zeros(3), "end_key": "d", "cache_values": True}, RuntimeError,
             "trajectories= gives the trajectories directly"),
            ({"num_slices": 2, "ends": torch.zeros(3, dtype=torch.bool)}, RuntimeError, "requires cache_values=True"),
            ({"num_slices": 2, "pad_output": True}, ValueError, "pad_output=True is incompatible with strict_length"),
        ],
    )
    def test_wrong_combinations(self, kwargs, error, match):
        with pytest.raises(error, match=match):
            SliceSampler(**kwargs)

    def test_without_replacement_takes_fixed_boundaries_without_cache_values(self):
        ends = torch.zeros(20, dtype=torch.bool)
        ends[[5, 9, 19]] = True
        sampler = SliceSamplerWithoutReplacement(num_slices=2, ends=ends)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, batch_size=8)
        rb.extend(self._data())
        assert rb.sample().shape == (8,)

    def test_traj_key_wins_over_end_key(self):
        data = self._data()
        data["one"] = torch.zeros(20, dtype=torch.long)  # a single trajectory, whatever the done flags say
        sampler = SliceSampler(slice_len=10, end_key=("next", "done"), traj_key="one")
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, batch_size=20)
        rb.extend(data)
        torch.manual_seed(0)
        # TorchRL 0.14.1 draws these slices for seed 0 (they cross the stored done flags)
        assert rb.sample()["obs"].int().tolist() == list(range(10)) + list(range(1, 11))

    @pytest.mark.parametrize("kwargs", [{"end_key": ("next", "done")}, {"traj_key": "episode"},
                                        {"ends": "ends", "cache_values": True},
                                        {"trajectories": "episode", "cache_values": True}])
    def test_boundary_sources_give_torchrl_slices(self, kwargs):
        data = self._data()
        kwargs = dict(kwargs)
        if kwargs.get("ends") == "ends":
            kwargs["ends"] = data["next", "done"].squeeze(-1)
        if kwargs.get("trajectories") == "episode":
            kwargs["trajectories"] = data["episode"]
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=4, **kwargs),
                                    batch_size=12)
        rb.extend(data)
        torch.manual_seed(3)
        sample = rb.sample()
        # seeded slices and flags observed on TorchRL 0.14.1
        assert sample["obs"].int().tolist() == [6, 7, 8, 9, 13, 14, 15, 16, 6, 7, 8, 9]
        assert sample["next", "truncated"].flatten().int().tolist() == [0, 0, 0, 1] * 3
        assert sample["next", "done"].flatten().int().tolist() == [0, 0, 0, 1] * 3
        assert sample["next", "terminated"].flatten().int().tolist() == [0] * 12

    def test_stored_terminations_survive(self):
        data = self._data()
        data["next", "terminated"] = data["next", "done"].clone()
        data["next", "truncated"] = torch.zeros_like(data["next", "done"])
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=4), batch_size=12)
        rb.extend(data)
        torch.manual_seed(3)
        sample = rb.sample()
        assert sample["next", "terminated"].flatten().int().tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]
        assert sample["next", "truncated"].flatten().int().tolist() == [0, 0, 0, 1] * 3

    def test_span_implies_loose_length_and_padding_mask(self):
        data = self._data()
        for strict in (True, False):
            rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=8,
                                        sampler=SliceSampler(slice_len=4, span=(True, False), strict_length=strict))
            rb.extend(data)
            torch.manual_seed(1)
            assert rb.sample()["obs"].int().tolist() == [6, 7, 14, 15, 16, 17]  # TorchRL 0.14.1, seed 1
        sampler = SliceSampler(slice_len=8, pad_output=True, strict_length=False)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, batch_size=16)
        rb.extend(data)
        torch.manual_seed(2)
        sample, info = rb.sample(return_info=True)
        assert sample["obs"].int().tolist() == [0, 1, 2, 3, 4, 5, 5, 5] * 2
        assert info[("collector", "mask")].int().tolist() == [1, 1, 1, 1, 1, 1, 0, 0] * 2
        assert sample["next", "done"].flatten().int().tolist() == [0, 0, 0, 0, 0, 1, 1, 1] * 2

    def test_compile_cache_values_and_use_gpu_are_accepted(self):
        data = self._data()
        for kwargs in ({"compile": True}, {"compile": {"mode": "reduce-overhead"}}, {"cache_values": True},
                       {"use_gpu": "cpu"}):
            rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=8,
                                        sampler=SliceSampler(num_slices=2, **kwargs))
            rb.extend(data)
            torch.manual_seed(0)
            assert rb.sample().shape == (8,)
        if not torch.cuda.is_available():
            rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=8,
                                        sampler=SliceSampler(num_slices=2, use_gpu=True))
            rb.extend(data)
            with pytest.warns(UserWarning, match="CUDA is not available"):
                assert rb.sample().shape == (8,)

    def test_prioritized_slice_sampler_positional_arguments(self):
        sampler = PrioritizedSliceSampler(20, 0.7, 0.5, 1e-6, torch.float64, "mean", num_slices=2)
        assert (sampler._max_capacity, sampler._alpha, sampler._beta, sampler._eps) == (20, 0.7, 0.5, 1e-6)
        assert sampler.dtype is torch.float64
        with pytest.raises(TypeError):
            PrioritizedSliceSampler(20, 0.7, 0.5, num_slices=2, use_gpu=True)  # not a TorchRL argument
        with pytest.raises(TypeError, match="exactly one of num_slices and slice_len"):
            PrioritizedSliceSampler(20, 0.7, 0.5)

    def test_repr(self):
        assert repr(SliceSampler(num_slices=3)) == (
            "SliceSampler(num_slices=3, slice_len=None, end_key=('next', 'done'), end_keys=None, traj_key=None, "
            "truncated_key=('next', 'truncated'), strict_length=True, pad_output=False)"
        )
