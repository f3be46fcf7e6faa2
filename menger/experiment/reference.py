"""The config reference and the preset tables of the documentation site, made from the schema itself, so the site
lists exactly the keys `menger config` lists (the site's build hook, docs/hooks/menger_docs.py, calls these).

    config_reference()        every key of an experiment, a table per top-level section
    section_table("ppo")      one section's keys (and its nested sections')
    preset_table(["ppo"])     presets with the summaries `menger presets` prints
    algorithm_presets("ppo")  the presets an algorithm's registry entry ships
"""
from __future__ import annotations

from menger import registry
from menger.config import KeyDoc, key_docs
from menger.experiment import ExperimentConfig
from menger.experiment.presets import list_presets

_HEADER = "| key | type | default | meaning |\n| --- | --- | --- | --- |"


def _cell(text: str) -> str:
    """Text that stays inside one Markdown table cell (a `|` would end it) and is not read as markup."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*").replace("\n", " ")


def _row(row: KeyDoc) -> str:
    if row.section:
        return f"| `{row.key}` | section {row.type} | | {_cell(row.doc)} |"
    default = f"`{_cell(row.default)}`" if row.default != "(required)" else "(required)"
    limits = f" ({_cell(row.limits)})" if row.limits else ""
    return f"| `{row.key}` | {_cell(row.type)}{limits} | {default} | {_cell(row.doc)} |"


def section_table(section: str) -> str:
    """A table of the keys under `section` (a dotted prefix such as `ppo` or `env.multiagent`); a name that is
    no section of the schema is an error naming the sections there are."""
    rows = [row for row in key_docs(ExperimentConfig) if row.key.startswith(section + ".")]
    if not rows:
        sections = [row.key for row in key_docs(ExperimentConfig) if row.section]
        raise ValueError(f"no config section {section!r}; the sections are: {', '.join(sections)}")
    return "\n".join([_HEADER, *map(_row, rows)])


def config_reference() -> str:
    """Every key `menger config` lists, under one heading per top-level section (the top-level keys that are no
    section first, in one table)."""
    rows = key_docs(ExperimentConfig)
    top = [row for row in rows if "." not in row.key and not row.section]
    parts = ["## Top-level keys", "", _HEADER, *map(_row, top)]
    for row in rows:
        if row.section and "." not in row.key:
            parts += ["", f"## `{row.key}`", "", _cell(row.doc), "", section_table(row.key)]
    return "\n".join(parts)


def algorithm_presets(algo: str) -> list[str]:
    """The presets an algorithm's registry entry ships; an unknown name is an error naming the known ones."""
    if algo not in registry.names():
        raise ValueError(f"no algorithm {algo!r}; the algorithms are: {', '.join(registry.names())}")
    return list(registry.get(algo).presets)


def preset_table(names: list[str]) -> str:
    """A table of presets and their summaries (as `menger presets` prints them); a name that ships no preset is
    an error naming it."""
    summaries = list_presets()
    missing = [name for name in names if name not in summaries]
    if missing:
        raise ValueError(f"no preset named {', '.join(missing)}; `menger presets` lists those that ship")
    lines = ["| preset | what it is |", "| --- | --- |"]
    lines += [f"| `{name}` | {_cell(summaries[name])} |" for name in names]
    return "\n".join(lines)
