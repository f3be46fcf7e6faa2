"""A saved league state as a table of players and a heat map of the payoff (``menger league RUN``).

Both read the plain data of ``League.state_dict()`` (RUN_DIR/league/state.json), never a live league::

    state = read_state(run_dir / STATE_FILE)
    print(format_players(state))                 # name, role, Elo, games, snapshot of; best Elo first
    write_payoff_png(state, run_dir / "league" / "payoff.png")
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from menger.extras import require
from menger.league.payoff import PayoffTable

__all__ = ["format_players", "payoff_matrix", "write_payoff_png"]

ANNOTATE_UP_TO = 16  # players; beyond that the numbers would not fit in their cells
MAX_PLAYERS = 40  # in the heat map: the learners, the fixed opponents and the newest snapshots


def payoff_matrix(state: dict) -> tuple[list[str], np.ndarray]:
    """Names (league order) and the win rate of each row's player against each column's; NaN where a pair
    played fewer than min_games games (the table reads 0.5 there) and on the diagonal."""
    names = [player["name"] for player in state["players"]]
    payoff = PayoffTable.from_state(state["payoff"])
    matrix = np.full((len(names), len(names)), np.nan)
    for row, player in enumerate(names):
        for column, opponent in enumerate(names):
            if row != column and payoff.games(player, opponent) >= max(payoff.min_games, 1):
                matrix[row, column] = payoff.win_rate(player, opponent)
    return names, matrix


def format_players(state: dict) -> str:
    """One line per member, highest Elo first: name, role, Elo, games, the learner a snapshot was taken of."""
    ratings = state["elo"]["ratings"]
    players = sorted(state["players"], key=lambda player: (-ratings[player["name"]], player["name"]))
    rows = [("name", "role", "Elo", "games", "snapshot of")]
    for player in players:
        role = player["role"] if player["spec"] is None or player["spec"] == player["name"] else \
            f"{player['role']} ({player['spec']})"
        rows.append((player["name"], role, f"{ratings[player['name']]:.0f}", str(player["games"]),
                     player["parent"] or "-"))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    align = ("<", "<", ">", ">", "<")
    return "\n".join("  ".join(f"{cell:{how}{width}}" for cell, how, width in zip(row, align, widths)).rstrip()
                     for row in rows)


def write_payoff_png(state: dict, path: str | os.PathLike[str], max_players: int = MAX_PLAYERS) -> Path:
    """A heat map of the payoff matrix (row player's win rate against the column's) with the players' names.

    A league of more than ``max_players`` members shows its learners, its fixed opponents and its newest
    snapshots (the title says how many were left out)."""
    require("matplotlib", "plot", "the payoff heat map of `menger league` (payoff.png)")
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    names, matrix = payoff_matrix(state)
    shown = _shown(state["players"], max_players)
    names, matrix = [names[index] for index in shown], matrix[np.ix_(shown, shown)]
    left_out = len(state["players"]) - len(shown)
    size = max(4.0, 0.3 * len(names) + 2.5)
    figure = Figure(figsize=(size + 1.2, size))
    axes = figure.add_subplot()
    cmap = colormaps["RdYlGn"].with_extremes(bad="#dddddd")
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=0.0, vmax=1.0)
    axes.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    axes.set_yticks(range(len(names)), names, fontsize=8)
    axes.set_xlabel("opponent")
    axes.set_ylabel("player")
    min_games = state["payoff"]["min_games"]
    title = f"win rate of row against column (grey: under {min_games} games)"
    if left_out:
        title += f"\n{left_out} older snapshots not shown"
    axes.set_title(title, fontsize=9)
    if len(names) <= ANNOTATE_UP_TO:
        for (row, column), value in np.ndenumerate(matrix):
            if np.isfinite(value):
                axes.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=7)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04, label="win rate")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    figure.savefig(partial, format="png", dpi=100)
    os.replace(partial, path)
    return path


def _shown(players: list[dict], max_players: int) -> list[int]:
    """Indices (league order) of the learners, the fixed opponents and as many of the newest snapshots as fit."""
    others = [index for index, player in enumerate(players) if player["role"] != "historical"]
    snapshots = [index for index, player in enumerate(players) if player["role"] == "historical"]
    room = max(max_players - len(others), 0)
    return sorted(others + (snapshots[-room:] if room else []))
