"""embstab's modules import each other without cycles, counting imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "embstab"


def _modules(root: Path) -> dict[str, Path]:
    mods = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, at any depth, except under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the embstab modules it imports (``from pkg import sub`` is an edge to ``pkg.sub``)."""
    mods = _modules(root)

    def owner(name: str) -> str | None:  # the module that defines a dotted name
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names if a.name.split(".")[0] == "embstab"]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base.split(".")[0] != "embstab":
                    continue
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else owner(base) for a in node.names]
            graph[mod].update(t for t in targets if t and t != mod)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first = last), or None; iterative DFS with three colours."""
    colour = dict.fromkeys(graph, 0)  # 0 unseen, 1 on the current path, 2 done
    for start in sorted(graph):
        if colour[start]:
            continue
        path, its = [start], [iter(sorted(graph[start]))]
        colour[start] = 1
        while path:
            nxt = next(its[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                its.pop()
            elif colour[nxt] == 1:
                return path[path.index(nxt):] + [nxt]
            elif colour[nxt] == 0:
                colour[nxt] = 1
                path.append(nxt)
                its.append(iter(sorted(graph[nxt])))
    return None


def test_the_checker_sees_function_level_and_package_edges(tmp_path):
    pkg = tmp_path / "embstab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from embstab.sub import a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from embstab import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import embstab.c\n"
                              "from . import c\n")
    (pkg / "c.py").write_text("from .sub import a\n")
    graph = import_graph(pkg)
    assert graph["embstab"] == {"embstab.sub.a"}
    assert graph["embstab.sub.a"] == {"embstab.b"} and graph["embstab.b"] == {"embstab.c"}
    cycle = find_cycle(graph)
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["embstab.b", "embstab.c", "embstab.sub.a"]
    (pkg / "c.py").write_text("import os\n")
    assert find_cycle(import_graph(pkg)) is None


def test_embstab_has_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 100 and "embstab.hyperbolic.manifolds" in graph["embstab.hyperbolic.embedding"]
    assert find_cycle(graph) is None


def _subpackage(module: str) -> str:
    """``embstab.kg.training`` → ``embstab.kg``; top-level modules are their own subpackage."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_module_imports_a_private_name_from_another_subpackage():
    """Underscore names are a subpackage's own business: others go through its public API."""
    mods = _modules(PACKAGE)
    offenders = []
    for mod, path in mods.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith("embstab"):
                continue
            source = node.module
            for alias in node.names:
                target = f"{source}.{alias.name}"
                dunder = alias.name.startswith("__") and alias.name.endswith("__")  # __version__ is public
                private = (alias.name.startswith("_") and not dunder) or any(
                    p.startswith("_") for p in source.split(".")[1:])
                # embstab._fs, _threads, _resources, _textfiles, _bits, _ckernels, _numbers, _limits and _shell
                # are the package's shared private helpers; _measure_catalogue declares the measures outside
                # embstab.measures so that the CLI lists them without importing any measure
                if private and _subpackage(source) != _subpackage(mod) and _subpackage(source) not in (
                        "embstab._fs", "embstab._threads", "embstab._resources", "embstab._textfiles", "embstab._bits",
                        "embstab._ckernels", "embstab._numbers", "embstab._limits",
                        "embstab._shell", "embstab._measure_catalogue"):
                    offenders.append(f"{mod}: from {source} import {alias.name}")
    assert offenders == []
