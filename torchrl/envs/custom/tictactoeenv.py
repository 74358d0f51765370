"""``TicTacToeEnv``: two-player tic-tac-toe as a batched, stateless torch environment."""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import fast_get, new_td
from torchrl.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl.envs.common import EnvBase

__all__ = ["TicTacToeEnv"]

# The 8 winning lines as flat cell indices.
_LINES = torch.tensor([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]])


class TicTacToeEnv(EnvBase):
    """Tic-tac-toe for two players taking turns (or one player against a uniformly random opponent).

    Observations: ``"board"`` (``3 x 3`` int32: 0 empty, 1 for player 0's marks, -1 for player 1's),
    ``"turn"`` (whose move it is, 0 or 1) and ``"mask"`` (which of the 9 cells are free; ``rand_action``
    honours it). The action is the index of the cell to mark (``Categorical(9)``, shape ``(1,)``).
    Rewards are per player, ``("player0", "reward")`` and ``("player1", "reward")``: +1 for a win, -1 for a
    loss, 0 otherwise. The game ends (``terminated``) on a win or a full board.

    The env is stateless (the board travels in the TensorDict), so any batch size works:
    ``env.reset(TensorDict(batch_size=[n]))``.

    Keyword Args:
        single_player: player 1 plays uniformly at random inside the env, so each step is one move of
            player 0 (followed, unless the game ended, by player 1's reply).
        device: the env's device.

    Raises:
        ValueError: on a move to an occupied cell.

    Examples:
        >>> from torchrl.envs import TicTacToeEnv
        >>> env = TicTacToeEnv()
        >>> data = env.rollout(10)
        >>> 5 <= data.shape[0] <= 9 and bool(data["next", "done"][-1])
        True
    """

    _batch_locked = False

    def __init__(self, *, single_player: bool = False, device=None, **kwargs) -> None:
        super().__init__(device=device, **kwargs)
        self.single_player = single_player
        shape, dev = self.batch_size, self.device
        self.observation_spec = Composite(
            board=Bounded(-1, 1, shape=(*shape, 3, 3), dtype=torch.int32, device=dev),
            turn=Categorical(2, shape=(*shape, 1), dtype=torch.int32, device=dev),
            mask=Categorical(2, shape=(*shape, 9), dtype=torch.bool, device=dev),
            shape=shape,
            device=dev,
        )
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Categorical(9, shape=(*shape, 1), dtype=torch.int64, device=dev)
        self.reward_spec = Composite(
            player0=Composite(reward=Unbounded(shape=(*shape, 1), device=dev), shape=shape),
            player1=Composite(reward=Unbounded(shape=(*shape, 1), device=dev), shape=shape),
            shape=shape,
            device=dev,
        )

    # -- helpers exposed by TorchRL -----------------------------------------------------------------------
    @staticmethod
    def full(board: torch.Tensor) -> torch.Tensor:
        """Whether every cell of ``board`` (``[..., 3, 3]``) is taken."""
        return (board != 0).flatten(-2, -1).all(-1)

    @staticmethod
    def win(board: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Whether the player who marked ``action`` (``[..., 1]``) on ``board`` owns a full line through it."""
        flat = board.flatten(-2, -1)
        player = flat.gather(-1, action)
        lines = flat[..., _LINES.to(flat.device)]  # [..., 8, 3]
        through = (_LINES.to(flat.device) == action.unsqueeze(-1)).any(-1)  # [..., 8]
        owned = (lines == player.unsqueeze(-1)).all(-1)
        return (owned & through).any(-1) & (player.squeeze(-1) != 0)

    @staticmethod
    def get_action_mask():
        """The mask of an empty board (every cell free)."""
        return torch.ones(9, dtype=torch.bool)

    # -- env contract -------------------------------------------------------------------------------------
    def _set_seed(self, seed: int | None) -> None:
        self._generator = torch.Generator(device=self.device or "cpu")
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(int(seed))

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        batch = tensordict.batch_size if tensordict is not None else self.batch_size
        dev = self.device
        board = torch.zeros((*batch, 3, 3), dtype=torch.int32, device=dev)
        turn = torch.zeros((*batch, 1), dtype=torch.int32, device=dev)
        mask = torch.ones((*batch, 9), dtype=torch.bool, device=dev)
        reset = fast_get(tensordict, "_reset") if tensordict is not None else None
        if reset is not None and fast_get(tensordict, "board") is not None:
            keep = ~reset.reshape(*batch, 1)
            board = torch.where(keep.unsqueeze(-1), fast_get(tensordict, "board"), board)
            turn = torch.where(keep, fast_get(tensordict, "turn"), turn)
            mask = torch.where(keep, fast_get(tensordict, "mask"), mask)
        return TensorDict({"board": board, "turn": turn, "mask": mask}, batch_size=batch, device=dev)

    def _play(self, board, turn, mask, action):
        taken = ~mask.gather(-1, action)
        if taken.any():
            raise ValueError(
                f"TicTacToeEnv: cell(s) {action[taken.squeeze(-1)].flatten().tolist()} are already taken; "
                f"choose a free cell (see the 'mask' entry)."
            )
        sign = 1 - 2 * turn  # player 0 -> 1, player 1 -> -1
        flat = board.flatten(-2, -1).scatter(-1, action, sign.to(board.dtype))
        board = flat.unflatten(-1, (3, 3))
        mask = mask.scatter(-1, action, False)
        won = self.win(board, action).unsqueeze(-1)
        over = won | ~mask.any(-1, keepdim=True)
        return board, mask, won, over

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        board = fast_get(tensordict, "board")
        turn = fast_get(tensordict, "turn")
        mask = fast_get(tensordict, "mask")
        action = fast_get(tensordict, "action")
        board, mask, won, over = self._play(board, turn, mask, action)
        # +1 when player 0 wins, -1 when player 1 wins, 0 otherwise
        winner_sign = torch.where(won, torch.where(turn == 0, 1.0, -1.0), 0.0)
        if self.single_player:
            still = ~over
            reply = self._random_move(mask)
            # boards whose game is over get a dummy all-free mask: the reply is computed, then discarded
            board2, mask2, won2, over2 = self._play(board, torch.ones_like(turn), mask | over, reply)
            board = torch.where(still.unsqueeze(-1), board2, board)
            mask = torch.where(still, mask2, mask)
            winner_sign = torch.where(won2 & still, -1.0, winner_sign)
            over = over | (over2 & still)
            next_turn = turn
        else:
            next_turn = 1 - turn
        batch = tensordict.batch_size
        return new_td(
            {
                "board": board,
                "turn": next_turn,
                "mask": mask,
                "player0": new_td({"reward": winner_sign}, batch),
                "player1": new_td({"reward": torch.where(winner_sign != 0, -winner_sign, 0.0)}, batch),
                "done": over,
                "terminated": over.clone(),
            },
            batch,
            self.device,
        )

    def _random_move(self, mask: torch.Tensor) -> torch.Tensor:
        """A uniformly random free cell per board (cell 0 on full boards, where it is never played)."""
        weights = mask.float()
        weights = torch.where(mask.any(-1, keepdim=True), weights, torch.ones_like(weights))
        flat = weights.reshape(-1, 9)
        return torch.multinomial(flat, 1, generator=self._generator).reshape(*mask.shape[:-1], 1)

    def rand_action(self, tensordict: TensorDictBase | None = None):
        """A random *legal* move for each board (reads the ``"mask"`` entry)."""
        if tensordict is None:
            tensordict = self.reset()
        mask = fast_get(tensordict, "mask")
        tensordict.set("action", self._random_move(mask))
        return tensordict
