"""Search at play time and for self-play: PUCT Monte-Carlo tree search over a game's own state.

`mcts.MCTS` searches any `GameState` with a policy-value `evaluate`; `games.PettingZooState` is the state of a
PettingZoo AEC game whose position lives in its env's attributes (Connect Four, Tic-Tac-Toe).
"""
from menger.search.games import PettingZooState, searchable
from menger.search.mcts import MCTS, GameState, Node, SearchResult
from menger.search.player import SearchPlayer

__all__ = ["MCTS", "GameState", "Node", "PettingZooState", "SearchPlayer", "SearchResult", "searchable"]
