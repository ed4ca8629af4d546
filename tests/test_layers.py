"""The house's floors: the four kinds stand side by side and nothing imports a floor above its own.

Floors, bottom up: the core files at ``embstab/`` top level; lowprec, io, data, measures; compress,
downstream, recipes; selection; report; study; the kinds (train = word, kg, contextual,
hyperbolic); cli. Imports inside functions count (they still tie the floors together); imports under
``TYPE_CHECKING`` do not. The package's face (``embstab/__init__``, ``__main__``) re-exports the API.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "embstab"
KINDS = ("train", "kg", "contextual", "hyperbolic")
FLOORS = [("lowprec", "io", "data", "measures"), ("compress", "downstream", "recipes"), ("selection",), ("report",),
          ("study",), KINDS, ("cli",)]
FLOOR = {room: level for level, rooms in enumerate(FLOORS, start=1) for room in rooms}

#: Known crossings still to remove; a new one fails the test, and so does one that is gone but listed.
#: None are left: the kinds reach the layers below through the registry (embstab.kinds), not imports.
KNOWN: set[str] = set()


def _module(path: Path) -> str:
    parts = ("embstab",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOOR else None


def _imported(module: str, path: Path, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    # `from embstab import study` imports the room itself
    return [f"{target}.{a.name}" if target == "embstab" else target for a in node.names]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    return {id(x) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
            for b in n.body for x in ast.walk(b)}


def crossings() -> set[str]:
    """Every import of the package that runs between kinds or up a floor."""
    bad = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        if module in ("embstab", "embstab.__main__"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        here = _room(module)
        level = FLOOR[here] if here else 0
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _imported(module, path, node):
                there = _room(target)
                if not target.startswith("embstab.") or there == here:
                    continue
                if here in KINDS and there in KINDS:
                    bad.add(f"kind imports kind: {module} -> {target}")
                elif there and FLOOR[there] > level:
                    bad.add(f"upward: {module} -> {target}")
    return bad


def test_no_new_import_crosses_the_floors():
    assert crossings() - KNOWN == set()


def test_the_known_crossings_are_still_there_or_struck_off():
    assert KNOWN - crossings() == set(), "remove the fixed crossing from KNOWN"


def test_the_check_catches_a_crossing(tmp_path, monkeypatch):
    # a planted upward import in a copy of one core module must be found
    fake = tmp_path / "embstab"
    (fake / "measures").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "measures" / "__init__.py").write_text("from embstab.study import run_study\n")
    (fake / "kg.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert crossings() == {"upward: embstab.measures -> embstab.study"}


def test_the_check_catches_a_kind_importing_a_kind(tmp_path, monkeypatch):
    # kinds stand side by side: one kind's package importing another's is a crossing too
    fake = tmp_path / "embstab"
    for room in ("kg", "hyperbolic"):
        (fake / room).mkdir(parents=True)
        (fake / room / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "kg" / "study.py").write_text("def f():\n    from embstab.hyperbolic import embed\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert crossings() == {"kind imports kind: embstab.kg.study -> embstab.hyperbolic"}


def test_no_kind_imports_another_and_nothing_crosses():
    assert not any(c.startswith("kind imports kind") for c in crossings())
    assert crossings() == set()
