"""PFSP weights, the payoff table and Elo against numbers worked out by hand."""
import numpy as np
import pytest

from menger.league.elo import EloRatings, elo_update, expected_score
from menger.league.payoff import PayoffTable
from menger.league.pfsp import pfsp_weights

RATES = [0.2, 0.5, 0.9]


@pytest.mark.parametrize("weighting, expected", [
    ("hard", [0.64 / 0.9, 0.25 / 0.9, 0.01 / 0.9]),          # (1-p)^2: 0.64, 0.25, 0.01
    ("squared", [0.64 / 0.9, 0.25 / 0.9, 0.01 / 0.9]),
    ("var", [0.32, 0.5, 0.18]),                              # p(1-p): 0.16, 0.25, 0.09 over 0.5
    ("variance", [0.32, 0.5, 0.18]),
    ("linear", [4 / 7, 5 / 14, 1 / 14]),                     # 1-p: 0.8, 0.5, 0.1 over 1.4
    ("linear_capped", [5 / 11, 5 / 11, 1 / 11]),             # min(0.5, 1-p): 0.5, 0.5, 0.1 over 1.1
])
def test_pfsp_weights_match_hand_computed_numbers(weighting, expected):
    np.testing.assert_allclose(pfsp_weights(RATES, weighting), expected, rtol=1e-12)


def test_pfsp_falls_back_to_uniform_when_nothing_is_left_to_weigh():
    np.testing.assert_array_equal(pfsp_weights([0.0, 0.0, 0.0, 0.0], "var"), [0.25] * 4)  # DI-engine's rule
    np.testing.assert_array_equal(pfsp_weights([1.0, 1.0], "hard"), [0.5, 0.5])  # AlphaStar's: no NaN
    np.testing.assert_array_equal(pfsp_weights([1.0, 0.5], "hard"), [0.0, 1.0])  # a beaten opponent gets 0


def test_pfsp_refuses_what_is_not_a_list_of_win_rates():
    with pytest.raises(ValueError, match="unknown PFSP weighting 'hardest'"):
        pfsp_weights(RATES, "hardest")
    with pytest.raises(ValueError, match="non-empty"):
        pfsp_weights([], "hard")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pfsp_weights([0.5, 1.5], "hard")


def test_payoff_decays_each_pair_per_game_and_mirrors_the_result():
    payoff = PayoffTable(decay=0.99, min_games=3)
    payoff.record("a", "b", 1)      # W=1, G=1
    payoff.record("b", "a", 1)      # a lost: W=0.99, L=1, G=1.99
    payoff.record("a", "b", 0.5)    # W=0.9801, L=0.99, D=1, G=2.9701
    assert payoff.win_rate("a", "b") == pytest.approx((0.9801 + 0.5) / 2.9701, rel=1e-12)
    assert payoff.win_rate("b", "a") == pytest.approx((0.99 + 0.5) / 2.9701, rel=1e-12)
    assert payoff.games("b", "a") == 3
    for _ in range(5):
        payoff.record("a", "c", 0)  # another pair's games do not decay this one
    assert payoff.win_rate("a", "b") == pytest.approx((0.9801 + 0.5) / 2.9701, rel=1e-12)
    assert payoff.win_rate("c", "a") == 1.0


def test_payoff_reads_half_until_min_games_were_played():
    payoff = PayoffTable(decay=0.99, min_games=8)
    for _ in range(7):
        payoff.record("a", "b", 1)
    assert payoff.win_rate("a", "b") == 0.5 and payoff.win_rate("a", "never_played") == 0.5
    payoff.record("a", "b", 1)
    assert payoff.win_rate("a", "b") == 1.0 and payoff.win_rate("b", "a") == 0.0


def test_games_against_oneself_stay_even_and_a_reset_forgets_a_player():
    payoff = PayoffTable(decay=0.99, min_games=1)
    for outcome in (1, 1, 0.5, 1):
        payoff.record("a", "a", outcome)
    assert payoff.win_rate("a", "a") == 0.5
    payoff.record("a", "b", 1)
    payoff.forget("a")
    assert payoff.games("a", "b") == 0 and payoff.games("a", "a") == 0
    with pytest.raises(ValueError, match="1 \\(win\\), 0.5 \\(draw\\) or 0 \\(loss\\)"):
        payoff.record("a", "b", 0.7)


def test_payoff_state_round_trips():
    payoff = PayoffTable(decay=0.99, min_games=2)
    for outcome in (1, 0, 0.5, 1):
        payoff.record("x", "y", outcome)
    again = PayoffTable.from_state(payoff.state_dict())
    assert again.state_dict() == payoff.state_dict()
    assert again.win_rate("y", "x") == payoff.win_rate("y", "x")


def test_elo_matches_hand_computed_updates():
    assert expected_score(1000, 1000) == 0.5
    assert expected_score(1200, 1000) == pytest.approx(1 / (1 + 10 ** -0.5))  # 0.7597
    assert elo_update(1000, 1000, 1) == (1016.0, 984.0)  # 32 * (1 - 0.5)
    ratings = EloRatings(initial=1000, k=32)
    ratings.add("a")
    ratings.add("b")
    ratings.update("a", "b", 1)
    ratings.update("b", "a", 1)  # 984 beats 1016: expected 1 / (1 + 10^0.08) = 0.454078
    assert ratings["b"] == pytest.approx(984 + 32 * (1 - 0.4540780772195163), abs=1e-9)  # 1001.4695
    assert ratings["a"] == pytest.approx(1016 - 32 * (1 - 0.4540780772195163), abs=1e-9)  # 998.5305
    ratings.update("a", "b", 0.5)
    assert ratings["a"] + ratings["b"] == pytest.approx(2000)  # every game conserves the total
    before = ratings["a"]
    ratings.update("a", "a", 1)  # a game against itself moves nothing
    assert ratings["a"] == before
