"""The package's shape rules (issue 40): one-way imports, no private names across modules, short
functions and modules.

Rules, checked on the source text with :mod:`ast` (no import is executed):

- **No import circle**: the graph of ``dagster_mysql_cdc`` modules, with an edge for every
  ``import``/``from … import`` of another module of the package (also inside functions and
  ``TYPE_CHECKING`` blocks: a deferred import is still a dependency), has no strongly connected
  group of two or more modules.
- **No import up a layer**: layers from the bottom are ``errors/events/_version/private_files``,
  ``source`` (MySQL), ``sink`` (object storage), ``engine`` (the Debezium-style coordinator),
  ``downstream`` (reading the lake), ``dagster_integration`` (the Dagster adapter), and the
  package's ``__init__``/``__main__``. A module imports only its own layer or lower ones.
- **No private cross-import**: no module imports another module's ``_name``; what is shared is
  public and named for what it is.
- **Sizes**: no function or method over ``MAX_FUNCTION_LINES`` lines (``def`` to its last line),
  no module over ``MAX_MODULE_LINES`` lines.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PKG = "dagster_mysql_cdc"
ROOT = Path(__file__).resolve().parent.parent / PKG
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 900

LAYERS = {
    "errors": 0,
    "events": 0,
    "_version": 0,
    "private_files": 0,
    "source": 1,
    "sink": 2,
    "engine": 3,
    "downstream": 4,
    "dagster_integration": 5,
    "": 6,  # dagster_mysql_cdc/__init__.py and __main__.py
    "__main__": 6,
}


@dataclass
class Package:
    """The parsed package: module name -> path and tree, import edges, private imports."""

    paths: dict[str, Path] = field(default_factory=dict)
    trees: dict[str, ast.Module] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    private: set[tuple[str, str, str]] = field(default_factory=set)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(pkg: Package, mod: str, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = mod.split(".")
    if pkg.paths[mod].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(pkg: Package, name: str) -> str | None:
    while name not in pkg.paths and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in pkg.paths else None


def load_package(root: Path = ROOT) -> Package:
    """Parse every module of the package at ``root`` and collect its imports of the package's
    modules."""
    pkg = Package()
    for p in sorted(root.rglob("*.py")):
        pkg.paths[_module_name(root, p)] = p
    for mod, p in pkg.paths.items():
        tree = ast.parse(p.read_text(), filename=str(p))
        pkg.trees[mod] = tree
        edges = pkg.edges.setdefault(mod, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(pkg, mod, node)
                if not target or not (target == PKG or target.startswith(PKG + ".")):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in pkg.paths:
                        edges.add(sub)
                        continue
                    owner = _owner(pkg, target)
                    if owner is None or owner == mod:
                        continue
                    edges.add(owner)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        pkg.private.add((mod, owner, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    owner = _owner(pkg, alias.name) if alias.name.startswith(PKG) else None
                    if owner and owner != mod:
                        edges.add(owner)
        edges.discard(mod)
    return pkg


def import_cycles(pkg: Package) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(pkg.edges):
        if start in index:
            continue
        work = [(start, iter(sorted(pkg.edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(pkg.edges[nxt]))))
                elif nxt in on_stack:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def _layer(mod: str) -> int:
    parts = mod.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else ""]


def up_imports(pkg: Package) -> list[tuple[str, str]]:
    """``(importer, imported)`` pairs where the imported module sits in a higher layer."""
    return sorted((m, t) for m, ts in pkg.edges.items() for t in ts if _layer(t) > _layer(m))


def long_functions(pkg: Package) -> list[tuple[str, str, int]]:
    """``(module, qualified name, lines)`` of functions longer than ``MAX_FUNCTION_LINES``."""
    out = []

    def visit(node: ast.AST, mod: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    n = (child.end_lineno or child.lineno) - child.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        out.append((mod, name, n))
                visit(child, mod, name + ".")
            else:
                visit(child, mod, prefix)

    for mod, tree in pkg.trees.items():
        visit(tree, mod, "")
    return sorted(out)


def long_modules(pkg: Package) -> list[tuple[str, int]]:
    """``(module, lines)`` of modules longer than ``MAX_MODULE_LINES``."""
    sizes = ((m, len(p.read_text().splitlines())) for m, p in pkg.paths.items())
    return sorted((m, n) for m, n in sizes if n > MAX_MODULE_LINES)


def _short(name: str) -> str:
    return name.removeprefix(PKG + ".")


def test_no_import_cycle():
    cycles = [[_short(m) for m in g] for g in import_cycles(load_package())]
    assert not cycles, f"import circles (break each by moving the shared piece down a layer): {cycles}"


def test_no_import_up_a_layer():
    ups = [(_short(a), _short(b)) for a, b in up_imports(load_package())]
    assert not ups, f"imports running up a layer ({' < '.join(sorted(set(LAYERS), key=LAYERS.get))}): {ups}"


def test_no_private_name_imported_across_modules():
    private = sorted((_short(m), _short(t), n) for m, t, n in load_package().private)
    assert not private, f"private names imported from other modules (make them public): {private}"


def test_functions_and_modules_are_short():
    pkg = load_package()
    funcs = [(_short(m), f, n) for m, f, n in long_functions(pkg)]
    mods = [(_short(m), n) for m, n in long_modules(pkg)]
    assert not funcs, f"functions over {MAX_FUNCTION_LINES} lines: {funcs}"
    assert not mods, f"modules over {MAX_MODULE_LINES} lines: {mods}"


def design_map_entries(design: Path) -> set[str]:
    """Module paths (``sink/lake.py``) listed in the module map, the first code block of
    docs/design.md: one module per line, indented two spaces, its path first (continuation lines
    are indented further)."""
    text = design.read_text()
    block = text.split("```", 2)[1]
    return {
        line.split()[0]
        for line in block.splitlines()
        if line.startswith("  ") and not line.startswith("   ") and line.split()[0].endswith(".py")
    }


def test_the_design_module_map_matches_the_code():
    """docs/design.md names every module once, and no module that is gone."""
    listed = design_map_entries(ROOT.parent / "docs" / "design.md")
    actual = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if p.name != "__init__.py"}
    assert not actual - listed, f"modules missing from docs/design.md's module map: {sorted(actual - listed)}"
    assert not listed - actual, f"docs/design.md lists modules that do not exist: {sorted(listed - actual)}"


def test_the_rules_see_a_circle_and_a_private_import(tmp_path):
    """The checker itself finds what it is for (a test that cannot fail is no net)."""
    root = tmp_path / PKG
    (root / "sink").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sink" / "__init__.py").write_text("")
    (root / "sink" / "a.py").write_text("from .b import _hidden\n")
    (root / "sink" / "b.py").write_text(
        "def _hidden():\n    from ..dagster_integration import c\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    )
    (root / "dagster_integration").mkdir()
    (root / "dagster_integration" / "__init__.py").write_text("")
    (root / "dagster_integration" / "c.py").write_text("from ..sink import a\n")
    pkg = load_package(root)
    assert import_cycles(pkg) == [[f"{PKG}.dagster_integration.c", f"{PKG}.sink.a", f"{PKG}.sink.b"]]
    assert up_imports(pkg) == [(f"{PKG}.sink.b", f"{PKG}.dagster_integration.c")]
    assert pkg.private == {(f"{PKG}.sink.a", f"{PKG}.sink.b", "_hidden")}
    assert long_functions(pkg) == [(f"{PKG}.sink.b", "_hidden", MAX_FUNCTION_LINES + 2)]
