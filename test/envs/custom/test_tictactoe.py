import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import TicTacToeEnv, check_env_specs


def _board(rows):
    return torch.tensor(rows, dtype=torch.int32)


def test_specs_and_rollout_end_in_terminal_state():
    env = TicTacToeEnv()
    env.set_seed(0)
    check_env_specs(env)
    data = env.rollout(10)
    assert 5 <= data.shape[0] <= 9
    assert data["next", "done"][-1].item() and data["next", "terminated"][-1].item()
    assert not data["next", "done"][:-1].any()
    # turns alternate, and every move lands on a cell that was free
    assert data["turn"].squeeze(-1).tolist() == [i % 2 for i in range(data.shape[0])]
    assert data["mask"].gather(-1, data["action"]).all()


def test_win_detection_known_answers():
    assert TicTacToeEnv.win(_board([[1, 1, 1], [0, -1, 0], [-1, 0, 0]]), torch.tensor([1])).item()
    assert TicTacToeEnv.win(_board([[-1, 1, 0], [0, -1, 1], [1, 0, -1]]), torch.tensor([8])).item()
    assert not TicTacToeEnv.win(_board([[1, 1, 0], [0, -1, 0], [-1, 0, 0]]), torch.tensor([1])).item()
    assert TicTacToeEnv.full(_board([[1, -1, 1], [1, -1, -1], [-1, 1, 1]])).item()


def test_rewards_for_a_scripted_win_of_player0():
    env = TicTacToeEnv()
    data = env.rollout(10, actions=[torch.tensor([m]) for m in (0, 3, 1, 4, 2)])
    assert data.shape == (5,)
    assert data["next", "player0", "reward"].squeeze(-1).tolist() == [0, 0, 0, 0, 1]
    assert data["next", "player1", "reward"].squeeze(-1).tolist() == [0, 0, 0, 0, -1]


def test_occupied_cell_raises():
    env = TicTacToeEnv()
    td = env.reset()
    td["action"] = torch.tensor([4])
    td = env.step_mdp(env.step(td))
    td["action"] = torch.tensor([4])
    with pytest.raises(ValueError, match=r"cell\(s\) \[4\] are already taken"):
        env.step(td)


def test_single_player_replies_randomly_and_batches():
    env = TicTacToeEnv(single_player=True)
    env.set_seed(1)
    check_env_specs(env)
    data = env.rollout(20, tensordict=env.reset(TensorDict(batch_size=[16])), break_when_any_done=False)
    assert data.shape == (16, 20)
    # each step of player 0 is answered by player 1 unless the game ended: marks differ by at most one
    board = data["next", "board"]
    diff = (board == 1).flatten(-2).sum(-1) - (board == -1).flatten(-2).sum(-1)
    assert ((diff == 0) | (diff == 1)).all()
    assert (data["turn"] == 0).all()
