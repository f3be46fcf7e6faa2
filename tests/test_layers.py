"""Menger's layers: no module imports one above it, and no files import each other in a cycle.

Every ``.py`` file under ``menger/`` is parsed with ``ast``, not imported. All imports count: module
level, inside functions and ``if TYPE_CHECKING:`` blocks, ``import a.b``, ``from a import b``, relative imports
and ``importlib.import_module("literal")``. Each imported ``menger.*`` module is mapped to a layer by the table
below (the longest matching prefix wins); an import of a higher layer is a violation. Same-layer imports are
allowed, but the file-level import graph must have no cycle, and neither may the graph of the package's folders
(each folder right under ``menger/``, and each top-level module, one node): role packages do not build each
other. A string that is a module's full name, alone or
as "module:attribute" (what a table of modules to import later holds, or a gymnasium entry point), counts
as an import for the layers too, but not for cycles; docstrings and logger names (``getLogger("menger.x")``)
do not count.

Cycles are between files, as Python executes them: ``import menger.x.y`` is an edge to ``menger/x/y.py`` (not
to the parents' ``__init__.py``, which a package's own submodules would otherwise always cycle through), and
``from menger.x import name`` is an edge to the submodule that defines ``name`` when ``menger/x/__init__.py``
only re-exports it (followed through chains of re-exports), else to ``menger/x/__init__.py``. A submodule that
imports its own package for a name the ``__init__`` defines (or cannot be traced) therefore does form a cycle
with an ``__init__`` that imports it.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "menger"

# The documented stack, lowest first: (layer, name, modules). A module belongs to the entry with the longest
# prefix naming it ("menger.envs" covers menger.envs.make); "menger" alone is the package's __init__.py only.
LAYERS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    # _moved keeps the module paths of earlier versions importable (a module a path names is imported by name);
    # children stops the learner's child processes and carries their last error, for every role that forks;
    # extras imports the optional packages (naming the extra that installs a missing one) and checks the platform.
    (0, "foundation", ("menger", "menger.core", "menger.config", "menger.device", "menger.forking", "menger._moved",
                        "menger.children", "menger.extras")),
    # experiment is the schema of an experiment file: dataclasses over menger.config, nothing else. It
    # describes the components (env, model, loss, runtime settings) and is read from layer 3 up, so it sits
    # with the components; layer 0 would pass too, but the foundation holds only the contracts and the
    # config machinery, and must not know what an experiment is made of.
    # An algorithm's folder holds both halves of it: its registry entry (`spec`: config section, checks, networks,
    # with the schema at layer 1) and its builder (learner and actor parts, with the workers at layer 2: its
    # `learning` and `acting` modules too).
    # The registry loads every algorithm by name only, so the models, learners and experiment can ask it without
    # importing the folders that import them.
    # search is tree search over a game's state with the network handed in: numpy and the games, nothing above
    (1, "components", ("menger.envs", "menger.models", "menger.losses", "menger.logging", "menger.checkpoint",
                       "menger.experiment", "menger.registry", "menger.algorithms", "menger.search")),
    (2, "workers", ("menger.params", "menger.transport", "menger.inference", "menger.actors", "menger.learners",
                    "menger.replay", "menger.league", "menger.algorithms.builders", "menger.algorithms.*.builder",
                    "menger.algorithms.*.learning", "menger.algorithms.*.acting")),
    (3, "coordination", ("menger.coordinator", "menger.runtime")),
    # a league of several learners runs one Trainer per player: beside the launchers that place them
    (4, "launch", ("menger.launch", "menger.league_runner")),
    # commands on a finished run (eval, match, export, plot) read it through menger.api; explain (what a failure
    # means, RUN_DIR/error.txt) is what api writes when a run fails and what the cli prints; tuning (search, PBT)
    # trains runs through menger.api. The old top-level paths are aliases of the modules that moved.
    # importable: the objects handed to menger.api (env=MyEnv) as the `module:attribute` names a config records.
    (5, "api", ("menger.api", "menger.commands", "menger.tuning", "menger.explain", "menger.tune", "menger.pbt",
                "menger.evaluate", "menger.match", "menger.export", "menger.plot", "menger.importable")),
    (6, "apps", ("menger.apps",)),
    # the command line, and its supervisor (`menger train --supervise`) that runs the command line as a child
    (7, "cli", ("menger.cli", "menger.supervise")),
)

# What the package's own __init__.py may import: it is imported by everything (and by every Ray worker),
# so it must stay free of heavy dependencies and of its own submodules. It names the public API (menger.train,
# menger.load_policy, ...), which loads on first use: those names (in strings, in `if TYPE_CHECKING:` imports)
# are not imports of the layers above, and only what runs at `import menger` is checked (init_heavy_imports).
INIT_ALLOWED_IMPORTS = frozenset(sys.stdlib_module_names) | {"__future__"}

MODULE_NAME_STRING = re.compile(r"^[A-Za-z_]\w*(\.\w+)+(:[\w.]+)?$")


@dataclass(frozen=True)
class Import:
    file: Path          # the importing file, relative to the tree's root
    line: int
    module: str         # the imported menger module, as written (resolved if relative)
    target: Path | None  # the file that defines what is imported (None: no such file in the tree)
    by_name: bool = False  # named in a string, not imported here: counts for the layers, not for cycles


@dataclass
class Tree:
    """The module files of a package: module name -> file, relative to ``root``."""

    root: Path
    package: str
    files: dict[str, Path]
    parsed: dict[str, ast.Module] = field(default_factory=dict, repr=False)

    @classmethod
    def scan(cls, root: Path, package: str = PACKAGE) -> "Tree":
        files = {}
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            parts = list(relative.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = relative
        return cls(root, package, files)

    def is_package(self, module: str) -> bool:
        return self.files.get(module, Path()).name == "__init__.py"

    def parse(self, module: str) -> ast.Module:
        if module not in self.parsed:
            path = self.files[module]
            self.parsed[module] = ast.parse((self.root / path).read_text(), filename=str(path))
        return self.parsed[module]


def _is_ours(tree: Tree, module: str) -> bool:
    return module == tree.package or module.startswith(tree.package + ".")


def _resolve_relative(tree: Tree, importer: str, level: int, module: str | None, package: str | None = None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` inside module ``importer`` (or relative
    to ``package``, as ``importlib.import_module(name, package)`` resolves it)."""
    if package is None:
        package = importer if tree.is_package(importer) else importer.rpartition(".")[0]
    parts = package.split(".")
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{module}" if module else base


def _reexports(tree: Tree, package: str) -> dict[str, tuple[str, str]]:
    """Names a package's __init__.py takes from elsewhere at its top level: name -> (module, name there)."""
    found = {}
    for node in tree.parse(package).body:
        if isinstance(node, ast.ImportFrom):
            source = _resolve_relative(tree, package, node.level, node.module) if node.level else node.module
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = (source, alias.name)
    return found


def _defining_module(tree: Tree, module: str, name: str, seen: frozenset = frozenset()) -> str:
    """The module that ``from module import name`` really depends on: a submodule named ``name``, the
    submodule a package's __init__ re-exports ``name`` from, or ``module`` itself."""
    if f"{module}.{name}" in tree.files:
        return f"{module}.{name}"
    if tree.is_package(module) and (module, name) not in seen:
        source = _reexports(tree, module).get(name)
        if source is not None and _is_ours(tree, source[0]) and source[0] in tree.files:
            return _defining_module(tree, source[0], source[1], seen | {(module, name)})
    return module


def _nearest_file(tree: Tree, module: str) -> Path | None:
    """The file of ``module``, or of its nearest ancestor in the tree (for names like menger.x.attr)."""
    while module:
        if module in tree.files:
            return tree.files[module]
        module = module.rpartition(".")[0]
    return None


def _literal_import_module(tree: Tree, importer: str, node: ast.Call) -> str | None:
    """The module of ``importlib.import_module("literal"[, "package"])`` or ``import_module(...)``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "import_module" or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    target = first.value
    if target.startswith("."):
        level = len(target) - len(target.lstrip("."))
        package = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
        return _resolve_relative(tree, importer, level, target[level:] or None, package)
    return target


def imports_of(tree: Tree, importer: str) -> list[Import]:
    """Every import of a module of the tree made anywhere in ``importer``'s file."""
    file = tree.files[importer]
    found = []

    def add(line: int, module: str, defining: str, by_name: bool = False) -> None:
        if _is_ours(tree, module):
            found.append(Import(file, line, module, _nearest_file(tree, defining), by_name))

    syntax = tree.parse(importer)
    not_references = set()  # ids of the string constants that name no module to import
    for node in ast.walk(syntax):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            not_references.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("getLogger", "import_module"):  # a logger's name; an import counted below
                not_references.add(id(node.args[0]))

    for node in ast.walk(syntax):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node.lineno, alias.name, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(tree, importer, node.level, node.module) if node.level else node.module
            for alias in node.names:
                if alias.name == "*":
                    add(node.lineno, base, base)
                    continue
                defining = _defining_module(tree, base, alias.name)
                # `from menger import api` imports the module menger.api; `from menger.x import f`, menger.x
                module = defining if defining == f"{base}.{alias.name}" else base
                add(node.lineno, module, defining)
        elif isinstance(node, ast.Call):
            module = _literal_import_module(tree, importer, node)
            if module is not None:
                add(node.lineno, module, module)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in not_references
              and MODULE_NAME_STRING.match(node.value)):
            module = node.value.partition(":")[0]
            add(node.lineno, module, module, by_name=True)
    return list(dict.fromkeys(found))  # `from a import b, c` is one import of a


def all_imports(tree: Tree) -> list[Import]:
    return [found for module in tree.files for found in imports_of(tree, module)]


def layer_of(module: str, layers=LAYERS) -> tuple[int, str] | None:
    """(layer, name) of a module: the entry with the longest prefix naming it; None if none does."""
    best = None
    for number, name, prefixes in layers:
        for prefix in prefixes:
            exact_only = "." not in prefix  # the root package stands for its __init__.py alone
            if "*" in prefix:  # one folder of many alike (each algorithm's builder): a pattern, not a prefix
                matched = fnmatch.fnmatchcase(module, prefix) or fnmatch.fnmatchcase(module, prefix + ".*")
            else:
                matched = module == prefix or (not exact_only and module.startswith(prefix + "."))
            if matched:
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), number, name)
    return None if best is None else (best[1], best[2])


def unlayered_modules(tree: Tree, layers=LAYERS) -> list[str]:
    return [f"{path}: module {module} has no layer" for module, path in tree.files.items()
            if layer_of(module, layers) is None]


def layer_violations(tree: Tree, layers=LAYERS) -> list[str]:
    """One message per import of a higher layer: file:line, the imported module and both layers."""
    problems = []
    path_to_module = {path: module for module, path in tree.files.items()}
    for found in all_imports(tree):
        if path_to_module[found.file] == tree.package:  # the public API's names, loaded on first use
            continue
        source = layer_of(path_to_module[found.file], layers)
        imported = layer_of(found.module, layers)
        if source is not None and imported is not None and imported[0] > source[0]:
            verb = "names in a string" if found.by_name else "imports"
            problems.append(f"{found.file}:{found.line} {verb} {found.module} (layer {imported[0]} {imported[1]}) "
                            f"from layer {source[0]} {source[1]}")
    return problems


def strongly_connected_components(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """Tarjan's algorithm, iterative (no recursion limit on long import chains)."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def import_cycles(tree: Tree) -> list[str]:
    """One message per set of files that import each other in a cycle, with the imports that close it."""
    graph: dict[Path, set[Path]] = {path: set() for path in tree.files.values()}
    edges: dict[tuple[Path, Path], list[Import]] = {}
    root_init = tree.files[tree.package]
    for found in all_imports(tree):
        if found.by_name or found.target is None or found.target == found.file:  # importing itself is harmless
            continue
        if found.file == root_init:  # the public API's names: loaded on first use, never as `import menger` runs
            continue
        graph[found.file].add(found.target)
        edges.setdefault((found.file, found.target), []).append(found)
    problems = []
    for component in strongly_connected_components(graph):
        if len(component) < 2:
            continue
        members = set(component)
        links = [f"{found.file}:{found.line} imports {found.module} ({found.target})"
                 for (source, target), found_list in sorted(edges.items())
                 if source in members and target in members for found in found_list]
        problems.append(f"import cycle between {', '.join(map(str, component))}:\n    " + "\n    ".join(links))
    return problems


def _unit(tree: Tree, path: Path) -> str:
    """The role a file belongs to: its folder right under the package (`actors`, `transport`), or itself for a
    module at the top (`api`, `registry`)."""
    parts = path.relative_to(tree.package).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def folder_cycles(tree: Tree) -> list[str]:
    """One message per set of folders (and top-level modules) whose files import each other round a loop, even
    where no two files do: role packages must not build each other."""
    graph: dict[str, set[str]] = {}
    edges: dict[tuple[str, str], list[Import]] = {}
    for found in all_imports(tree):
        if found.by_name or found.target is None:
            continue
        source, target = _unit(tree, found.file), _unit(tree, found.target)
        if source == target or target == "__init__":  # the package's own __init__ imports nothing of ours
            continue
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
        edges.setdefault((source, target), []).append(found)
    problems = []
    for component in strongly_connected_components(graph):
        if len(component) < 2:
            continue
        members = set(component)
        links = [f"{source} -> {target}: {found_list[0].file}:{found_list[0].line} imports {found_list[0].module}"
                 + (f" (and {len(found_list) - 1} more)" if len(found_list) > 1 else "")
                 for (source, target), found_list in sorted(edges.items()) if source in members and target in members]
        problems.append(f"folders import each other round a loop: {', '.join(component)}:\n    "
                        + "\n    ".join(links))
    return problems


def _is_type_checking(node: ast.AST) -> bool:
    """An `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) block: what only a type checker reads."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk_executed(node: ast.AST):
    """ast.walk without the bodies of `if TYPE_CHECKING:` blocks (their `else:` runs)."""
    yield node
    children = node.orelse if _is_type_checking(node) else ast.iter_child_nodes(node)
    for child in children:
        yield from _walk_executed(child)


def init_heavy_imports(tree: Tree) -> list[str]:
    """Imports of the root __init__.py other than the standard library's (those a type checker alone reads, in
    `if TYPE_CHECKING:`, are not made)."""
    problems = []
    for node in _walk_executed(tree.parse(tree.package)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        elif isinstance(node, ast.Call) and _literal_import_module(tree, tree.package, node):
            names = [_literal_import_module(tree, tree.package, node)]
        for name in names:
            if name.startswith(".") or name.split(".")[0] not in INIT_ALLOWED_IMPORTS:
                problems.append(f"{tree.files[tree.package]}:{node.lineno} imports {name}: the package's "
                                "__init__.py may import only the standard library")
    return problems


# --- the checks on menger itself ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def menger_tree() -> Tree:
    return Tree.scan(ROOT)


def test_every_module_has_a_layer(menger_tree):
    problems = unlayered_modules(menger_tree)
    assert not problems, "add these modules to LAYERS in tests/test_layers.py:\n" + "\n".join(problems)


def test_no_import_runs_up_the_stack(menger_tree):
    problems = layer_violations(menger_tree)
    assert not problems, f"{len(problems)} imports run up the layers:\n" + "\n".join(problems)


def test_no_import_cycles_between_files(menger_tree):
    problems = import_cycles(menger_tree)
    assert not problems, f"{len(problems)} import cycles:\n" + "\n".join(problems)


def test_no_folder_imports_another_round_a_loop(menger_tree):
    problems = folder_cycles(menger_tree)
    assert not problems, "\n".join(problems)


def test_the_package_init_imports_nothing_heavy(menger_tree):
    problems = init_heavy_imports(menger_tree)
    assert not problems, "\n".join(problems)
    script = "import sys, menger; heavy = {'torch', 'numpy', 'gymnasium', 'ray'} & set(sys.modules); print(heavy)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "set()", f"`import menger` loads {done.stdout.strip()}"


# --- the checker itself, on a synthetic tree ------------------------------------------------------------------

TOY_LAYERS = (
    (0, "foundation", ("menger", "menger.core")),
    (1, "components", ("menger.envs",)),
    (3, "coordination", ("menger.runtime",)),
)


def _write(root: Path, files: dict[str, str]) -> Tree:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Tree.scan(root)


def test_the_checker_reports_upward_imports_and_cycles(tmp_path):
    tree = _write(tmp_path, {
        "menger/__init__.py": "import os\n",
        "menger/core.py": "def late():\n    from menger.envs import make\n",  # up 0 -> 1, inside a function
        "menger/envs/__init__.py": "from menger.envs.make import make\n",
        "menger/envs/make.py": "from . import vector\n\ndef make():\n    return vector\n",
        "menger/envs/vector.py": "import importlib\nimportlib.import_module('.make', 'menger.envs')\n",  # a cycle
        "menger/envs/atari.py": "from ..runtime import loop\n",  # up 1 -> 3, relative
        "menger/envs/providers.py": '"""Ids of menger.runtime.loop."""\nimport logging\n'
                                    'LOG = logging.getLogger("menger.runtime")\n'
                                    'PROVIDERS = ("menger.runtime.loop:register", "numpy.random")\n',  # up, by name
        "menger/runtime/__init__.py": "",
        "menger/runtime/loop.py": "import menger.envs.vector\n",  # down: fine
        "menger/stray.py": "",
    })
    violations = layer_violations(tree, TOY_LAYERS)
    assert violations == [
        "menger/core.py:2 imports menger.envs.make (layer 1 components) from layer 0 foundation",
        "menger/envs/atari.py:1 imports menger.runtime.loop (layer 3 coordination) from layer 1 components",
        "menger/envs/providers.py:4 names in a string menger.runtime.loop (layer 3 coordination) from layer 1 "
        "components",
    ]
    cycles = import_cycles(tree)
    assert len(cycles) == 1
    assert cycles[0].startswith("import cycle between menger/envs/make.py, menger/envs/vector.py:")
    assert "menger/envs/make.py:1 imports menger.envs.vector" in cycles[0]
    assert "menger/envs/vector.py:2 imports menger.envs.make" in cycles[0]
    assert unlayered_modules(tree, TOY_LAYERS) == ["menger/stray.py: module menger.stray has no layer"]
    assert init_heavy_imports(tree) == []


def test_the_checker_reports_folders_that_import_each_other_round_a_loop(tmp_path):
    """No two files form a cycle, but the folders do: runtime -> envs -> transport -> runtime."""
    tree = _write(tmp_path, {
        "menger/__init__.py": "",
        "menger/envs/__init__.py": "",
        "menger/envs/make.py": "from menger.transport import local\n",
        "menger/transport/__init__.py": "",
        "menger/transport/local.py": "def start():\n    from menger.runtime.loop import run\n",
        "menger/runtime/__init__.py": "",
        "menger/runtime/loop.py": "def run():\n    pass\n",
        "menger/runtime/trainer.py": "from menger.envs.make import make\n",
        "menger/api.py": "from menger.runtime.trainer import train\n",  # into the loop, not part of it
    })
    assert import_cycles(tree) == []
    problems = folder_cycles(tree)
    assert len(problems) == 1
    assert problems[0].startswith("folders import each other round a loop: envs, runtime, transport:")
    assert "transport -> runtime: menger/transport/local.py:2 imports menger.runtime.loop" in problems[0]
    assert "api" not in problems[0]


def test_the_package_init_names_the_api_for_later_and_imports_it_never(tmp_path):
    """The root __init__ may name modules of any layer in strings and `if TYPE_CHECKING:` imports (the public API,
    loaded on first use); an import it makes when it runs is refused, as are the same names in any other module."""
    tree = _write(tmp_path, {
        "menger/__init__.py": "import importlib\nTYPE_CHECKING = False\nPUBLIC = {'train': 'menger.runtime.loop'}\n"
                              "if TYPE_CHECKING:\n    from menger.runtime.loop import train\nelse:\n    import os\n"
                              "def __getattr__(name):\n    return getattr(importlib.import_module(PUBLIC[name]), name)\n",
        "menger/core.py": "PUBLIC = {'train': 'menger.runtime.loop'}\n",
        "menger/runtime/__init__.py": "",
        "menger/runtime/loop.py": "def train():\n    pass\n",
    })
    assert init_heavy_imports(tree) == []
    assert layer_violations(tree, TOY_LAYERS) == ["menger/core.py:1 names in a string menger.runtime.loop (layer 3 "
                                                  "coordination) from layer 0 foundation"]
    (tmp_path / "menger/runtime/loop.py").write_text("import menger\n\ndef train():\n    return menger\n")
    assert import_cycles(Tree.scan(tmp_path)) == []  # the __init__'s TYPE_CHECKING import never runs

    (tmp_path / "menger/__init__.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    pass\n"
                                                 "else:\n    from menger.runtime.loop import train\n")
    assert init_heavy_imports(Tree.scan(tmp_path)) == ["menger/__init__.py:5 imports menger.runtime.loop: the "
                                                       "package's __init__.py may import only the standard library"]


def test_names_reexported_by_a_package_resolve_to_their_submodule(tmp_path):
    """A sibling imported through the package (`from menger.runtime import helper`) is no cycle with the
    __init__ that re-exports it; a name the __init__ defines itself is."""
    tree = _write(tmp_path, {
        "menger/__init__.py": "import numpy\n",
        "menger/runtime/__init__.py": "from menger.runtime.loop import run\nfrom .helpers import helper as helper\n"
                                      "LIMIT = 3\n",
        "menger/runtime/loop.py": "from menger.runtime import helper\n",
        "menger/runtime/helpers.py": "def helper():\n    pass\n",
    })
    assert import_cycles(tree) == []
    assert [found.target for found in imports_of(tree, "menger.runtime.loop")] == [Path("menger/runtime/helpers.py")]

    (tmp_path / "menger/runtime/helpers.py").write_text("from menger.runtime import LIMIT\n")
    cycles = import_cycles(Tree.scan(tmp_path))
    assert len(cycles) == 1 and "menger/runtime/__init__.py, menger/runtime/helpers.py" in cycles[0]
    assert init_heavy_imports(tree) == ["menger/__init__.py:1 imports numpy: the package's __init__.py may "
                                        "import only the standard library"]
