"""What a type checker sees of `ExperimentConfig` (the `if TYPE_CHECKING:` class in menger/experiment) lists the
sections every run has, with their classes, as the real one made by `make_dataclass` does."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from menger import registry
from menger.experiment import ExperimentConfig

SOURCE = Path(__file__).resolve().parents[2] / "menger" / "experiment" / "__init__.py"


def _declared_fields() -> dict[str, str]:
    tree = ast.parse(SOURCE.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ExperimentConfig":
            return {item.target.id: ast.unparse(item.annotation) for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
    raise AssertionError(f"no class ExperimentConfig for type checkers in {SOURCE}")


def test_the_declared_sections_are_the_real_ones_but_the_algorithms():
    declared = _declared_fields()
    real = {f.name: f.type for f in dataclasses.fields(ExperimentConfig) if f.name not in registry.sections()}
    assert list(declared) == list(real)
    for name, annotation in declared.items():
        kind = real[name]
        assert annotation.partition("[")[0] == getattr(kind, "__name__", str(kind)), name
