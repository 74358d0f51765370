"""``SerialEnv``: ``num_workers`` sub-environments stepped one after the other in this process."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl._fast import fast_get
from torchrl.envs.batched._base import BatchedEnvBase
from torchrl.envs.batched._specs import describe, first_difference
from torchrl.envs.common import EnvBase

__all__ = ["SerialEnv"]


class SerialEnv(BatchedEnvBase):
    """Runs ``num_workers`` environments in the current process, as one env of batch size ``num_workers``.

    Each step splits the input along the first dim, steps every sub-env and stacks the outputs; resets
    with ``"_reset"`` masks restart only the selected sub-envs. Unknown attributes are looked up on the
    sub-envs and returned as a list (methods are called on each and return a list of results).

    See :class:`~torchrl.envs.batched.BatchedEnvBase` for the arguments.

    Examples:
        >>> from torchrl.envs import PendulumEnv, SerialEnv
        >>> env = SerialEnv(3, PendulumEnv)
        >>> env.set_seed(0) is not None
        True
        >>> data = env.rollout(5)
        >>> data.batch_size
        torch.Size([3, 5])
        >>> len(env.td_params)  # attribute of every sub-env, as a list
        3
        >>> env.close()
    """

    # -- lifetime -------------------------------------------------------------------------------------
    def _start_workers(self) -> None:
        envs = []
        try:
            for i, (fn, kwargs) in enumerate(zip(self._fns, self._kwargs)):
                env = fn(**kwargs)
                if not isinstance(env, EnvBase):
                    raise TypeError(f"SerialEnv: create_env_fn returned {type(env).__name__} for worker {i}, not an EnvBase.")
                diff = first_difference(self._worker_metas[i].specs, describe(env))
                if diff is not None:
                    raise ValueError(
                        f"SerialEnv: worker {i}'s env has different specs from the ones the batched env was built "
                        f"with: {diff}. Every sub-environment must have the same spec structure."
                    )
                envs.append(env)
        except BaseException:
            for env in envs:
                env.close(raise_if_closed=False)
            raise
        self._envs = envs
        self._step_fns = [env._step_output for env in envs]

    def _shutdown_workers(self) -> None:
        for env in getattr(self, "_envs", None) or ():
            env.close(raise_if_closed=False)
        self._envs = None
        self._step_fns = None

    # -- step / reset ---------------------------------------------------------------------------------------
    def _columns(self, leaves: list) -> list:
        cast = self._cast_in
        if cast is not None:
            leaves = [x.to(cast) if x is not None else None for x in leaves]
        return [x.unbind(0) if x is not None else None for x in leaves]

    def _stack(self, layout, outs: list, what: str, rows: list[int] | None = None) -> list:
        """Per layout leaf, the sub-env outputs stacked along a new first dim.

        With ``rows`` (a partial reset), only those sub-envs have outputs; the other rows are zeros
        (the caller fills them), and a leaf missing from the reset outputs is left out (``None``).
        """
        cast = self._cast_out
        stack = torch.stack
        leaves = []
        for key in layout.keys:
            values = [fast_get(o, key) if o is not None else None for o in outs]
            try:
                stacked = stack(values)
            except TypeError:  # some values are missing
                if rows is None:
                    raise KeyError(
                        f"SerialEnv: sub-env {values.index(None)} did not return {key!r} from {what}, although its "
                        f"specs declare it."
                    ) from None
                if any(values[i] is None for i in rows):
                    leaves.append(None)  # the sub-envs do not return this entry from reset
                    continue
                filler = torch.zeros_like(values[rows[0]])
                stacked = stack([filler if v is None else v for v in values])
            leaves.append(stacked.to(cast) if cast is not None else stacked)
        return leaves

    def _step(self, tensordict: TensorDictBase, rows: list[int] | None = None) -> TensorDictBase:
        layouts = self._layouts
        lin = layouts["step_in"]
        columns = self._columns(lin.read(tensordict))
        sub, build = self._sub_batch, lin.build
        lout = layouts["step_out"]
        if rows is None:
            outs = [step(build([c[i] if c is not None else None for c in columns], sub)) for i, step in enumerate(self._step_fns)]
            leaves = self._last_step = self._stack(lout, outs, "step")
            return lout.build(leaves, self.batch_size, self.device)
        # a "_step" mask: only these sub-envs step (each gets its own rows of the mask when it is batched)
        mask = fast_get(tensordict, "_step").reshape(self.num_workers, *sub) if sub else None
        outs = [None] * self.num_workers
        for i in rows:
            td = build([c[i] if c is not None else None for c in columns], sub)
            if mask is not None and not bool(mask[i].all()):
                td.set("_step", mask[i])
            outs[i] = self._step_fns[i](td)
        leaves = self._stack(lout, outs, "step", rows)
        if self._last_step is not None:  # the skipped sub-envs keep their last outputs
            keep = torch.ones(self.num_workers, dtype=torch.bool)
            keep[rows] = False
            for new, old in zip(leaves, self._last_step):
                if new is not None and old is not None:
                    new[keep] = old[keep]
        self._last_step = leaves
        return lout.build([x if x is not None else z for x, z in zip(leaves, lout.zeros())], self.batch_size, self.device)

    def _reset_workers(self, tensordict: TensorDictBase | None, rows: list[int], kwargs: dict) -> list:
        layouts = self._layouts
        lin, lout = layouts["reset_in"], layouts["reset_out"]
        inputs = self._reset_inputs(tensordict)
        columns = self._columns(inputs) if inputs is not None else None
        sub = self._sub_batch
        envs = self._envs
        outs = [None] * self.num_workers
        for i in rows:
            td = lin.build([c[i] if c is not None else None for c in columns], sub) if columns is not None else None
            outs[i] = envs[i].reset(td, **kwargs)
        if not rows:
            return [z.to(self.device) if self.device is not None else z for z in lout.zeros()]
        return self._stack(lout, outs, "reset", rows)

    # -- seeding and remote attributes -------------------------------------------------------------------------
    def _seed_worker(self, idx: int, seed: int | None, static_seed: bool) -> int | None:
        return self._envs[idx].set_seed(seed, static_seed=static_seed)

    def _remote_getattr(self, name: str):
        envs = self._envs
        try:
            values = [getattr(env, name) for env in envs]
        except AttributeError:
            raise AttributeError(f"SerialEnv has no attribute {name!r}, and neither have its sub-envs.") from None
        if all(callable(v) and not isinstance(v, (torch.Tensor, torch.nn.Module)) for v in values):

            def call_all(*args, **kwargs):
                return [v(*args, **kwargs) for v in values]

            return call_all
        return values

    def _remote_call(self, name: str, args: tuple, kwargs: dict, workers: list[int] | None = None) -> list:
        envs = self._envs
        idx = range(len(envs)) if workers is None else workers
        return [getattr(envs[i], name)(*args, **kwargs) for i in idx]

    def __getitem__(self, index):
        """The sub-env(s) at ``index`` (starts the env if needed)."""
        self._check_open()
        return self._envs[index]

    def __setitem__(self, index: int, env: EnvBase) -> None:
        """Replaces sub-env ``index`` by ``env`` (same spec structure required)."""
        self._check_open()
        if not isinstance(env, EnvBase):
            raise TypeError(f"SerialEnv[{index}] = ...: expected an EnvBase, got {type(env).__name__}.")
        diff = first_difference(self._worker_metas[index].specs, describe(env))
        if diff is not None:
            raise ValueError(f"SerialEnv[{index}] = env: the env has different specs from sub-env {index}: {diff}.")
        self._envs[index] = env
        self._step_fns[index] = env._step_output
