"""Connect Four opponents for PettingZoo's `connect_four_v3`: a random bot, the opportunist (random, but it takes
every four it is left) and alpha-beta search.

Every bot follows the protocol a user's own bot follows (`menger.commands.match`): `act(observation, action_mask) ->
action`, where `observation` is PettingZoo's per-agent array (6, 7, 2) from the mover's view (plane 0 its own
pieces, plane 1 the opponent's; row 0 is the top) or the whole dict {"observation", "action_mask"}, and
`action_mask` the 7 legal columns (1 = legal).

    from menger.envs.connect_four import make_bot
    bot = make_bot("alphabeta:4", seed=0)
    env = pettingzoo.classic.connect_four_v3.env()
    env.reset(seed=0)
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else bot.act(obs["observation"], obs["action_mask"]))

`AlphaBeta` searches on two bitboards (Python ints, 7 bits per column: 6 cells and a sentinel), so a depth-4
move costs milliseconds on one core (`benchmarks/connect_four.py` measures it).
"""
from __future__ import annotations

import difflib

import numpy as np

ROWS, COLUMNS = 6, 7
HEIGHT = ROWS + 1  # bits per column: the cells and a sentinel that keeps shifted windows from wrapping
CENTRE_FIRST = (3, 2, 4, 1, 5, 0, 6)  # move ordering: central columns take part in the most windows

BOTTOM = tuple(1 << (column * HEIGHT) for column in range(COLUMNS))
TOP = tuple(1 << (column * HEIGHT + ROWS - 1) for column in range(COLUMNS))
COLUMN_MASK = tuple(((1 << ROWS) - 1) << (column * HEIGHT) for column in range(COLUMNS))
CENTRE_MASK = COLUMN_MASK[3]

# The weights of the common window heuristic, from the mover's side.
THREE_WEIGHT, TWO_WEIGHT, OPPONENT_THREE_WEIGHT, CENTRE_WEIGHT = 5, 2, 4, 3
WIN_SCORE = 1_000_000  # a win found `ply` moves down scores WIN_SCORE - ply: faster wins first, losses late
INFINITY = 10 * WIN_SCORE

# bit index = column * HEIGHT + height, height 0 = the bottom row (PettingZoo's row 5)
_BIT_WEIGHTS = np.array([[1 << (column * HEIGHT + ROWS - 1 - row) for column in range(COLUMNS)]
                         for row in range(ROWS)], dtype=np.int64)


def _window_starts(step_column: int, step_height: int) -> int:
    """The bits where a window of 4 cells in direction (step_column, step_height) starts and stays on the board."""
    starts = 0
    for column in range(COLUMNS):
        for height in range(ROWS):
            end_column, end_height = column + 3 * step_column, height + 3 * step_height
            if 0 <= end_column < COLUMNS and 0 <= end_height < ROWS:
                starts |= 1 << (column * HEIGHT + height)
    return starts


# (shift between consecutive cells of a window, the window starts): vertical, horizontal, two diagonals
DIRECTIONS = ((1, _window_starts(0, 1)), (HEIGHT, _window_starts(1, 0)),
              (HEIGHT + 1, _window_starts(1, 1)), (HEIGHT - 1, _window_starts(1, -1)))


def is_win(pieces: int) -> bool:
    """Four of `pieces` in a row, in any direction."""
    for shift, _ in DIRECTIONS:
        pairs = pieces & (pieces >> shift)
        if pairs & (pairs >> (2 * shift)):
            return True
    return False


def heuristic(own: int, opponent: int) -> int:
    """The window score from `own`'s side: +5 per window of 3 own pieces and an empty cell, +2 per window of
    2 and 2 empty, -4 per window of 3 opponent pieces and an empty cell, +3 per own piece in the centre column.

    Each direction's 4-cell windows are counted all at once: the 4 shifted copies of a bitboard are added
    bit by bit (a 3-bit count per window start), so no window is visited in a loop."""
    score = CENTRE_WEIGHT * (own & CENTRE_MASK).bit_count()
    for shift, starts in DIRECTIONS:
        own_two, own_three, own_any = _window_counts(own, shift)
        _, opp_three, opp_any = _window_counts(opponent, shift)
        own_only, opp_only = starts & ~opp_any, starts & ~own_any
        score += THREE_WEIGHT * (own_three & own_only).bit_count() + TWO_WEIGHT * (own_two & own_only).bit_count()
        score -= OPPONENT_THREE_WEIGHT * (opp_three & opp_only).bit_count()
    return score


def _window_counts(pieces: int, shift: int) -> tuple[int, int, int]:
    """Bitmasks of the window starts that hold exactly 2, exactly 3 and at least 1 of `pieces` (a 4 is a win,
    never scored: the search stops at wins before it evaluates)."""
    a, b, c, d = pieces, pieces >> shift, pieces >> (2 * shift), pieces >> (3 * shift)
    sum_ab, carry_ab, sum_cd, carry_cd = a ^ b, a & b, c ^ d, c & d
    low = sum_ab ^ sum_cd  # bit 0 of the count
    carry = sum_ab & sum_cd
    mid = carry_ab ^ carry_cd ^ carry  # bit 1
    high = (carry_ab & carry_cd) | (carry & (carry_ab ^ carry_cd))  # bit 2: four
    return mid & ~low & ~high, low & mid, a | b | c | d


def landing(occupied: int, column: int) -> int:
    """The bit a piece dropped in `column` lands on (0 when the column is full)."""
    return (occupied + BOTTOM[column]) & COLUMN_MASK[column]


def bitboards(observation) -> tuple[int, int]:
    """(the mover's pieces, the opponent's) from PettingZoo's (6, 7, 2) observation (or its dict)."""
    board = _board(observation)
    if board.shape != (ROWS, COLUMNS, 2):
        raise ValueError(f"a Connect Four observation is (6, 7, 2) (rows, columns, own/opponent), got {board.shape}")
    return int(((board[:, :, 0] != 0) * _BIT_WEIGHTS).sum()), int(((board[:, :, 1] != 0) * _BIT_WEIGHTS).sum())


def _board(observation) -> np.ndarray:
    if isinstance(observation, dict):
        observation = observation["observation"]
    return np.asarray(observation)


def legal_columns(observation, action_mask=None) -> list[int]:
    """The columns one may play: the action mask's, or (without one) the columns whose top cell is empty."""
    if action_mask is None and isinstance(observation, dict):
        action_mask = observation.get("action_mask")
    if action_mask is not None:
        legal = [int(column) for column in np.flatnonzero(np.asarray(action_mask))]
    else:
        board = _board(observation)
        legal = [column for column in range(COLUMNS) if not board[0, column].any()]
    if not legal:
        raise ValueError("no legal move: the action mask is all zeros (the game is over, or it is not this "
                         "agent's turn)")
    return legal


class RandomBot:
    """A legal column uniformly at random, from its own seeded generator."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def act(self, observation, action_mask=None) -> int:
        legal = legal_columns(observation, action_mask)
        return legal[int(self.rng.integers(len(legal)))]


class Opportunist(RandomBot):
    """A random player that completes a four whenever it can: it leaves threats open as random does, but every
    four its opponent leaves it it takes at once, so a threat left open against it costs the game (random finds
    the winning column about one time in seven)."""

    blocks = False  # the guard's: block a four the opponent threatens when there is none to complete

    def act(self, observation, action_mask=None) -> int:
        legal = legal_columns(observation, action_mask)
        own, opponent = bitboards(observation)
        occupied = own | opponent
        winning = [column for column in legal if is_win(own | landing(occupied, column))]
        blocking = [column for column in legal if self.blocks and is_win(opponent | landing(occupied, column))]
        choices = winning or blocking or legal
        return choices[int(self.rng.integers(len(choices)))]


class Guard(Opportunist):
    """A random player that takes every four it is left and blocks every four it sees coming: it leaves the
    board as random does, but a win not taken at once it takes away, and a threat not blocked it completes. It
    is the cheapest opponent that punishes both tactical misses in random-looking positions (depth-1 tactics;
    a double threat still beats it)."""

    blocks = True


KNOWN_POSITIONS = 200_000  # positions whose best moves a bot keeps (about 50 MB at most)


class AlphaBeta:
    """Negamax with alpha-beta pruning, `depth` plies deep, then the window heuristic.

    Every node first looks for a move that wins at once (scored WIN_SCORE - ply, so a faster win is better
    and a later loss less bad), so depth 1 also sees the opponent's immediate reply: it takes a win and
    blocks a loss. Moves are tried centre-first; among equally good moves one is drawn with the bot's seeded
    generator, so games against it vary from game to game."""

    def __init__(self, depth: int = 4, seed: int = 0):
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"alpha-beta depth must be an int >= 1, got {depth!r}")
        self.depth = depth
        self.rng = np.random.default_rng(seed)
        self.nodes = 0  # nodes searched since the bot was made (benchmarks read it)
        self._known: dict[tuple[int, int, frozenset], list[int]] = {}  # position -> its best moves (searched once)

    def act(self, observation, action_mask=None) -> int:
        return int(self.rng.choice(self.best_moves(observation, action_mask)))

    def best_moves(self, observation, action_mask=None) -> list[int]:
        """Every legal column with the best search score. The search is a function of the position, so each
        position is searched once and its best moves kept (games repeat their openings: the bot plays several
        times faster against a learner, and draws among the same moves as before)."""
        own, opponent = bitboards(observation)
        legal = frozenset(legal_columns(observation, action_mask))
        key = (own, opponent, legal)
        if key not in self._known:
            if len(self._known) >= KNOWN_POSITIONS:
                self._known.clear()
            self._known[key] = self._search(own, opponent, legal)
        return self._known[key]

    def _search(self, own: int, opponent: int, legal: frozenset) -> list[int]:
        occupied = own | opponent
        moves = [(column, landing(occupied, column))
                 for column in CENTRE_FIRST if column in legal and not occupied & TOP[column]]
        if not moves:
            raise ValueError(f"the action mask allows columns {sorted(legal)}, but they are full on this board")
        winning = [column for column, bit in moves if is_win(own | bit)]
        if winning:
            return winning
        best, best_moves = -INFINITY, []
        for column, bit in moves:
            # a window just below `best`: a move as good as the best is scored exactly, a worse one only bounded
            score = -self._negamax(opponent, own | bit, self.depth - 1, -INFINITY, 1 - best, 1)
            if score > best:
                best, best_moves = score, [column]
            elif score == best:
                best_moves.append(column)
        return best_moves

    def _negamax(self, own: int, opponent: int, depth: int, alpha: int, beta: int, ply: int) -> int:
        """The score of the position for `own`, the side to move (fail-soft)."""
        self.nodes += 1
        occupied = own | opponent
        moves = [(occupied + BOTTOM[column]) & COLUMN_MASK[column] for column in CENTRE_FIRST
                 if not occupied & TOP[column]]
        if not moves:
            return 0  # a full board: a draw
        for bit in moves:
            if is_win(own | bit):
                return WIN_SCORE - ply
        if depth <= 0:
            return heuristic(own, opponent)
        best = -INFINITY
        for bit in moves:
            score = -self._negamax(opponent, own | bit, depth - 1, -beta, -alpha, ply + 1)
            if score > best:
                best = score
                if score > alpha:
                    alpha = score
                    if alpha >= beta:
                        break
        return best


BOTS = {"random": RandomBot, "opportunist": Opportunist, "guard": Guard, "alphabeta": AlphaBeta}
DEFAULT_DEPTH = 4


def make_bot(spec: str, seed: int = 0):
    """A bot from its name: "random", "opportunist", "guard", "alphabeta" (depth 4) or "alphabeta:DEPTH"."""
    name, _, argument = str(spec).partition(":")
    if name not in BOTS:
        close = difflib.get_close_matches(name, BOTS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown Connect Four bot {spec!r}{hint} Known: random, opportunist, guard, "
                         "alphabeta:DEPTH")
    if name in ("random", "opportunist", "guard"):
        if argument:
            raise ValueError(f"the {name} bot takes no argument, got {spec!r}; write {name!r}")
        return BOTS[name](seed)
    try:
        depth = int(argument) if argument else DEFAULT_DEPTH
    except ValueError:
        raise ValueError(f"alpha-beta's depth must be a whole number, got {spec!r}; write e.g. 'alphabeta:4'") from None
    return AlphaBeta(depth, seed)
