"""The league (AlphaStar): who plays whom, payoff, Elo and snapshots, as bookkeeping the runtime drives.

``League`` (``menger.league.league``) is the role and its loop; ``LeagueConfig`` its settings; ``pfsp_weights``,
``PayoffTable`` and ``EloRatings`` the pure parts; ``menger.league.report`` draws and prints a saved state.
"""
from menger.league.config import LeagueConfig
from menger.league.elo import EloRatings, elo_update, expected_score
from menger.league.league import STATE_FILE, League, Opponent, read_state, write_state
from menger.league.payoff import PayoffTable
from menger.league.pfsp import pfsp_weights
from menger.league.players import Player

__all__ = ["EloRatings", "League", "LeagueConfig", "Opponent", "PayoffTable", "Player", "STATE_FILE",
           "elo_update", "expected_score", "pfsp_weights", "read_state", "write_state"]
