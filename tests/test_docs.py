"""The documentation site says what the code does: its config reference lists every key `menger config` lists,
every algorithm has a page that shows its section's keys and its presets, and a page that asks for something
the code does not have stops the build naming it. (`make docs` builds the site with `mkdocs build --strict`.)"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from menger import registry

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _hook():
    spec = importlib.util.spec_from_file_location("menger_docs_hook", DOCS / "hooks" / "menger_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(relative: str) -> str:
    """A page as the site shows it: its directives expanded by the build hook."""
    return _hook().expand((DOCS / relative).read_text(), relative)


def _table_keys(markdown: str) -> list[str]:
    """The keys a page shows: a table's first column, or a section's heading."""
    return re.findall(r"^(?:\| |#+ )`([a-z0-9_.]+)`(?: \||$)", markdown, re.MULTILINE)


def _menger_config_keys() -> list[str]:
    done = subprocess.run([sys.executable, "-m", "menger.cli", "config"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return [line.split(":", 1)[0] for line in done.stdout.splitlines() if line and not line[0].isspace()]


def test_the_config_reference_lists_every_key_menger_config_lists():
    listed = _menger_config_keys()
    documented = _table_keys(_page("reference/config.md"))
    assert len(listed) > 200, "menger config printed too few keys to be the whole schema"
    missing = [key for key in listed if key not in documented]
    assert not missing, f"docs/reference/config.md (generated) lacks keys that `menger config` lists: {missing}"
    extra = [key for key in documented if key not in listed]
    assert not extra, f"docs/reference/config.md lists keys that `menger config` does not: {extra}"


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def _mkdocs_config() -> dict:
    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold tags for mkdocs' own loader; none are read here
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


@pytest.mark.parametrize("algo", registry.names())
def test_every_algorithm_has_a_page_with_its_keys_and_presets(algo):
    page = f"algorithms/{algo}.md"
    assert (DOCS / page).exists(), f"docs/{page} is missing: every algorithm has a page (what it is, its keys, " \
                                   f"its presets, its results), linked from mkdocs.yml's nav"
    assert page in _nav_pages(_mkdocs_config()["nav"]), f"docs/{page} is not in mkdocs.yml's nav"
    shown = _page(page)
    for section, cls in registry.get(algo).sections.items():
        keys = [key for key in _table_keys(shown) if key.startswith(section + ".")]
        assert keys, f"docs/{page} does not show the keys of its section: add <!-- menger:section {section} -->"
    for preset in registry.get(algo).presets:
        assert f"| `{preset}` |" in shown, f"docs/{page} does not list the preset {preset}: add " \
                                           f"<!-- menger:presets algo={algo} -->"


def test_every_page_in_the_docs_folder_is_in_the_nav_and_every_nav_page_exists():
    nav = _nav_pages(_mkdocs_config()["nav"])
    missing = [page for page in nav if not (DOCS / page).exists()]
    assert not missing, f"mkdocs.yml's nav names pages that do not exist: {missing}"
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md") if "hooks" not in path.parts)
    unlisted = [page for page in pages if page not in nav]
    assert not unlisted, f"pages in docs/ that mkdocs.yml's nav does not list: {unlisted}"


@pytest.mark.parametrize("directive, named", [
    ("<!-- menger:section ppoo -->", "no config section 'ppoo'"),
    ("<!-- menger:presets algo=dqn -->", "no algorithm 'dqn'"),
    ("<!-- menger:presets cartpole-ppo cartpole-dqn -->", "no preset named cartpole-dqn"),
    ("<!-- menger:keys ppo -->", "unknown directive"),
])
def test_a_directive_naming_what_the_code_lacks_stops_the_build_naming_it(directive, named):
    with pytest.raises(ValueError, match=named) as error:
        _hook().expand(f"# A page\n\n{directive}\n", "guides/x.md")
    assert "guides/x.md" in str(error.value)


def test_generated_tables_keep_one_row_per_key():
    """A value with a `|` (a union type) or markup characters stays inside its cell."""
    from menger.experiment.reference import section_table

    table = section_table("env.normalize")
    rows = table.splitlines()[2:]
    assert rows and all(re.fullmatch(r"\|(?:[^|]|\\\|)*?(?<!\\)\|" + r"(?:[^|]|\\\|)*?(?<!\\)\|" * 3, row)
                        for row in rows), table
