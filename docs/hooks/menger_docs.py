"""The site's build hook: fills the generated parts of a page from the package itself, so the config reference,
each algorithm's keys and its presets are those of the code that builds the site.

A page asks for them with one comment on a line of its own:

    <!-- menger:config-reference -->            every key `menger config` lists, a table per section
    <!-- menger:section ppo -->                 one section's keys (a dotted prefix: env.multiagent)
    <!-- menger:presets algo=ppo -->            the presets an algorithm ships, with their summaries
    <!-- menger:presets marl selfplay league --> the named presets

A directive it does not know, or a section, algorithm or preset that does not exist, stops the build naming it.
"""
from __future__ import annotations

import re

from menger.experiment.reference import algorithm_presets, config_reference, preset_table, section_table

DIRECTIVE = re.compile(r"^<!-- menger:(\S+)((?: [^ >]+)*) -->$", re.MULTILINE)


def expand(markdown: str, where: str = "a page") -> str:
    """The page with every directive replaced by what it names."""
    def replace(match: re.Match) -> str:
        kind, args = match.group(1), match.group(2).split()
        try:
            if kind == "config-reference" and not args:
                return config_reference()
            if kind == "section" and len(args) == 1:
                return section_table(args[0])
            if kind == "presets" and args:
                names = algorithm_presets(args[0][len("algo="):]) if args[0].startswith("algo=") else args
                return preset_table(names)
        except ValueError as error:
            raise ValueError(f"{where}: {match.group(0)}: {error}") from error
        raise ValueError(f"{where}: unknown directive {match.group(0)}; the directives are config-reference, "
                         f"section NAME, presets algo=NAME | presets NAME... (docs/hooks/menger_docs.py)")

    return DIRECTIVE.sub(replace, markdown)


def on_page_markdown(markdown, page, config, files):  # mkdocs' hook signature
    return expand(markdown, page.file.src_uri)
