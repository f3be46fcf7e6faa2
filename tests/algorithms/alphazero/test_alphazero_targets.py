"""AlphaZero's pure parts: each position's outcome from its mover's view, the loss, and the replay of positions."""
from __future__ import annotations

import pytest
import torch

from menger.algorithms.alphazero.learning import PositionReplay
from menger.algorithms.alphazero.losses import alphazero_loss, outcome_targets


def _unroll(columns):
    """columns: per game column, a list of (reward, terminated, truncated, valid) steps -> time-major tensors."""
    steps = len(columns[0])
    r, term, dones, valid = (torch.zeros(steps, len(columns)) for _ in range(4))
    for b, column in enumerate(columns):
        for t, (reward, te, tr, va) in enumerate(column):
            r[t, b], term[t, b], valid[t, b] = reward, te, va
            dones[t, b] = float(te or tr or not va)
    return r, term, dones, valid


def test_the_winner_of_the_last_move_and_every_earlier_position_alternate():
    # game 0: five moves, the fifth wins for its mover (the first player), then it sits out the round
    # game 1: a draw at the fourth move; game 2: cut by the round's end; game 3: a loss at the third move
    live = (0.0, 0, 0, 1)
    out = (0.0, 0, 0, 0)
    columns = [[live] * 4 + [(1.0, 1, 0, 1)] + [out],
               [live] * 3 + [(0.0, 1, 0, 1)] + [out] * 2,
               [live] * 5 + [(0.0, 0, 1, 1)],
               [live] * 2 + [(-1.0, 1, 0, 1)] + [out] * 3]
    z, known = outcome_targets(*_unroll(columns))
    assert z[:, 0].tolist() == [1.0, -1.0, 1.0, -1.0, 1.0, 0.0]
    assert known[:, 0].tolist() == [True] * 5 + [False]
    assert z[:4, 1].tolist() == [0.0] * 4 and known[:, 1].tolist() == [True] * 4 + [False] * 2
    assert not known[:, 2].any()  # a cut game has no outcome: nothing of it is trained on
    assert z[:3, 3].tolist() == [-1.0, 1.0, -1.0] and known[:, 3].sum() == 3


def test_a_new_game_after_a_cut_does_not_lend_its_outcome_to_the_old_one():
    live = (0.0, 0, 0, 1)
    column = [live, (0.0, 0, 1, 1), live, (1.0, 1, 0, 1)]  # a game cut at step 1, a new one won at step 3
    z, known = outcome_targets(*_unroll([column]))
    assert known[:, 0].tolist() == [False, False, True, True]
    assert z[2:, 0].tolist() == [-1.0, 1.0]


def test_the_loss_is_the_policy_cross_entropy_plus_the_weighted_value_error():
    logits = torch.tensor([[0.0, 0.0, -1e9], [1.0, 0.0, 0.0]])
    values = torch.tensor([0.5, -0.5])
    pi = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    z = torch.tensor([1.0, -1.0])
    loss, parts = alphazero_loss(logits, values, pi, z, value_weight=2.0)
    log_p1 = torch.log_softmax(logits[1], -1)[0]
    expected_policy = (torch.log(torch.tensor(2.0)) - log_p1) / 2
    assert parts["policy_loss"] == pytest.approx(float(expected_policy), rel=1e-6)
    assert parts["value_loss"] == pytest.approx(0.25)
    assert float(loss) == pytest.approx(float(expected_policy) + 0.5, rel=1e-6)
    assert torch.isfinite(loss)  # a masked action's 0 target times its very negative log-probability is 0


def test_the_replay_keeps_the_newest_positions_and_survives_a_save():
    replay = PositionReplay(capacity=5)
    replay.add({"obs.observation": torch.arange(3).view(3, 1), "value": torch.tensor([0.0, 1.0, 2.0])})
    replay.add({"obs.observation": torch.arange(3, 7).view(4, 1), "value": torch.tensor([3.0, 4.0, 5.0, 6.0])})
    assert replay.size == 5
    assert sorted(replay.data["value"].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]  # 0 and 1 were the oldest
    replay.add({"obs.observation": torch.arange(7, 15).view(8, 1), "value": torch.arange(7, 15).float()})
    assert sorted(replay.data["value"].tolist()) == [10.0, 11.0, 12.0, 13.0, 14.0]  # more than room: the newest
    copy = PositionReplay(capacity=5)
    copy.load_state_dict(replay.state_dict(), torch.device("cpu"))
    a, b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(replay.sample(16, a)["value"], copy.sample(16, b)["value"])
    with pytest.raises(ValueError, match="replay_size"):
        PositionReplay(capacity=6).load_state_dict(replay.state_dict(), torch.device("cpu"))


def test_the_learner_trains_replay_ratio_samples_per_new_position_once_the_replay_has_enough():
    """Two Tic-Tac-Toe columns of three moves each, won by the first mover: 6 positions with outcomes an update.
    replay_ratio 4 and batches of 8 owe 3 steps an update; nothing is trained before min_replay positions."""
    import gymnasium
    import numpy as np

    from menger.algorithms.alphazero.learning import AlphaZeroLearner
    from menger.algorithms.alphazero.spec import AlphaZeroConfig
    from menger.experiment import load_experiment
    from menger.models import build_policy

    config = load_experiment("tictactoe-alphazero")
    space = gymnasium.spaces.Dict({"observation": gymnasium.spaces.Box(0, 1, (3, 3, 2), np.int8),
                                   "action_mask": gymnasium.spaces.Box(0, 1, (9,), np.int8)})
    policy = build_policy(space, gymnasium.spaces.Discrete(9), config.model, "alphazero", config.env.normalize)
    cfg = AlphaZeroConfig(batch_size=8, replay_ratio=4.0, min_replay=10, replay_size=100)
    learner = AlphaZeroLearner(policy, cfg, device=torch.device("cpu"), total_frames=None, amp=False, seed=0)
    steps, games = 3, 2
    batch = {"obs": {"observation": torch.zeros(steps + 1, games, 3, 3, 2, dtype=torch.int8),
                     "action_mask": torch.ones(steps + 1, games, 9, dtype=torch.int8)},
             "search_policy": torch.full((steps, games, 9), 1 / 9),
             "rewards": torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]),
             "terminated": torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]),
             "dones": torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), "valid": torch.ones(steps, games)}
    first = learner.update(batch, frames=6)
    assert first["sgd_steps"] == 0 and first["replay_size"] == 6  # 6 < min_replay: 3 steps owed, not taken
    second = learner.update(batch, frames=12)
    assert second["sgd_steps"] == 6 and second["replay_size"] == 12  # the owed 3 and this update's 3
    assert second["loss"] == pytest.approx(second["policy_loss"] + second["value_loss"])  # read by the stop rules
    assert sorted(learner.replay.data["value"][:6].tolist()) == [-1.0, -1.0, 1.0, 1.0, 1.0, 1.0]
    # with the search's values mixed in at a quarter: 0.75 z + 0.25 q, q = 0.5 at every position
    mixed = AlphaZeroLearner(policy, AlphaZeroConfig(min_replay=100, search_value_weight=0.25),
                             device=torch.device("cpu"), total_frames=None, amp=False, seed=0)
    mixed.update(dict(batch, search_value=torch.full((steps, games), 0.5)), frames=6)
    assert sorted(mixed.replay.data["value"][:6].tolist()) == [-0.625, -0.625, 0.875, 0.875, 0.875, 0.875]


def test_a_mirrored_connect_four_position_is_the_position_the_mirrored_moves_reach():
    """mirror_board on the rows where flip is set: the board by its columns, the mask and the target policy
    reversed, the outcome kept. Checked against the env: the moves played in mirrored columns reach the board
    mirror_board makes, with the mirrored mask."""
    from pettingzoo.classic import connect_four_v3

    from menger.algorithms.alphazero.learning import mirror_board

    def position(moves):
        env = connect_four_v3.env()
        env.reset(seed=0)
        for move in moves:
            env.step(move)
        obs = env.observe(env.agent_selection)
        return torch.as_tensor(obs["observation"]), torch.as_tensor(obs["action_mask"])

    moves = [0, 0, 0, 0, 0, 0, 1, 5, 6]  # column 0 full: its mask entry is 0, the mirror's is column 6's
    board, mask = position(moves)
    mirror_image, mirror_mask = position([6 - move for move in moves])
    assert not torch.equal(board, mirror_image)
    policy = torch.tensor([[0.0, 0.5, 0.0, 0.0, 0.0, 0.25, 0.25]])
    rows = {"obs.observation": torch.stack([board, board]), "obs.action_mask": torch.stack([mask, mask]),
            "policy": torch.cat([policy, policy]), "value": torch.tensor([1.0, 1.0])}
    out = mirror_board(rows, "observation", torch.tensor([False, True]))
    assert torch.equal(out["obs.observation"][0], board) and torch.equal(out["obs.observation"][1], mirror_image)
    assert torch.equal(out["obs.action_mask"][1], mirror_mask) and mirror_mask[6] == 0 and mask[0] == 0
    assert out["policy"][1].tolist() == [0.25, 0.25, 0.0, 0.0, 0.0, 0.5, 0.0]
    assert torch.equal(out["policy"][0], policy[0]) and out["value"].tolist() == [1.0, 1.0]


def test_mirror_is_refused_for_a_game_whose_actions_are_not_the_columns():
    import gymnasium
    import numpy as np

    from menger.algorithms.alphazero.learning import AlphaZeroLearner
    from menger.algorithms.alphazero.spec import AlphaZeroConfig
    from menger.experiment import load_experiment
    from menger.models import build_policy

    config = load_experiment("tictactoe-alphazero")
    space = gymnasium.spaces.Dict({"observation": gymnasium.spaces.Box(0, 1, (3, 3, 2), np.int8),
                                   "action_mask": gymnasium.spaces.Box(0, 1, (9,), np.int8)})
    policy = build_policy(space, gymnasium.spaces.Discrete(9), config.model, "alphazero", config.env.normalize)
    with pytest.raises(ValueError, match="one action per column.*unset alphazero.mirror"):
        AlphaZeroLearner(policy, AlphaZeroConfig(mirror=True), device=torch.device("cpu"), total_frames=None,
                         amp=False, seed=0)
    connect4 = load_experiment("connect4-alphazero")  # mirror on: its actions are the board's seven columns
    space = gymnasium.spaces.Dict({"observation": gymnasium.spaces.Box(0, 1, (6, 7, 2), np.int8),
                                   "action_mask": gymnasium.spaces.Box(0, 1, (7,), np.int8)})
    policy = build_policy(space, gymnasium.spaces.Discrete(7), connect4.model, "alphazero", connect4.env.normalize)
    learner = AlphaZeroLearner(policy, connect4.alphazero, device=torch.device("cpu"), total_frames=None, amp=False,
                               seed=0)
    assert connect4.alphazero.mirror and learner.board_key == "observation"
