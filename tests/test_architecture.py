"""The layering of docs/architecture.md holds: no import cycle between modules of src/deniable and
no import from a higher layer or a sibling component.

Imports are read with :mod:`ast` from every module, at any depth (function-level imports count:
a lazy import is still a dependency), except those under ``if TYPE_CHECKING:``, which never run.
``importlib.import_module("deniable.x")`` and the registries' ``"deniable.x:Name"`` strings count
as imports of ``deniable.x``.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = "deniable"


# -- reading the source ---------------------------------------------------------------------------


def module_files(src: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of ``package`` under ``src``."""
    out: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except those inside ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (file ``path``) imports when it runs."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str, names: list[str] | None = None) -> None:
        if names:
            for n in names:
                found.add(f"{target}.{n}" if f"{target}.{n}" in modules else target)
        else:
            found.add(target)

    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            add(target, [a.name for a in node.names if a.name != "*"])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                add(node.args[0].value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # the registries' "deniable.x:Name" strings, imported on first use
            m = re.fullmatch(r"([A-Za-z_][\w.]*):[\w.]+", node.value)
            if m and m.group(1) in modules:
                add(m.group(1))
    return {t for t in found if t in modules and t != name}


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    modules = module_files(src, package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


# -- the rules --------------------------------------------------------------------------------------


def parse_layers(text: str) -> list[list[list[str]]]:
    """Layers (lowest first) of components (lists of names) from the ``layer N:`` lines."""
    layers: dict[int, list[list[str]]] = {}
    for m in re.finditer(r"^layer (\d+):(.*)$", text, flags=re.M):
        layers[int(m.group(1))] = [c.split() for c in m.group(2).split("|")]
    assert layers and sorted(layers) == list(range(len(layers))), f"layers must be numbered 0..N, got {sorted(layers)}"
    return [layers[i] for i in range(len(layers))]


def place(module: str, layers: list[list[list[str]]], package: str = PACKAGE) -> tuple[int, int] | None:
    """(layer, component) of ``module``: the longest name covering it (``package`` alone covers
    only the package root; a name with ``*`` covers the modules it matches)."""
    best: tuple[int, tuple[int, int]] | None = None
    for li, layer in enumerate(layers):
        for ci, comp in enumerate(layer):
            for entry in comp:
                if "*" in entry:
                    covers = fnmatch.fnmatchcase(module, entry) and "." not in module[len(entry) - 1 :]
                elif entry == package:
                    covers = module == entry
                else:
                    covers = module == entry or module.startswith(entry + ".")
                if covers and (best is None or len(entry) > best[0]):
                    best = (len(entry), (li, ci))
    return None if best is None else best[1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def violations(graph: dict[str, set[str]], layers: list[list[list[str]]]) -> list[str]:
    """Every rule broken by ``graph``: unplaced modules, upward or sideways imports, cycles."""
    problems: list[str] = []
    for module in sorted(graph):
        here = place(module, layers)
        if here is None:
            problems.append(f"{module} is in no layer of docs/architecture.md: add it to the table")
            continue
        for target in sorted(graph[module]):
            there = place(target, layers)
            if there is None or there == here:
                continue
            if there[0] > here[0]:
                problems.append(f"upward import: {module} (layer {here[0]}) imports {target} (layer {there[0]})")
            elif there[0] == here[0]:
                problems.append(f"sideways import: {module} imports {target}, a sibling component of layer {here[0]}")
    for comp in cycles(graph):
        problems.append("import cycle among: " + ", ".join(comp))
    return problems


# -- the tests --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def layers() -> list[list[list[str]]]:
    return parse_layers(DOC.read_text(encoding="utf-8"))


def test_the_source_follows_the_documented_layers(layers):
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    problems = violations(graph, layers)
    assert not problems, "\n".join(problems)


def test_every_documented_name_exists(layers):
    modules = module_files()
    for layer in layers:
        for comp in layer:
            for entry in comp:
                found = any(fnmatch.fnmatchcase(m, entry) for m in modules) if "*" in entry else entry in modules
                assert found, f"docs/architecture.md names {entry}, which is no module of src/deniable"


def test_planted_violations_are_caught(layers):
    """Control: the checker reports an upward import, a sideways import and a cycle."""
    graph = {k: set(v) for k, v in import_graph().items()}
    assert not violations(graph, layers)
    graph["deniable.embeddings.embedding"].add("deniable.cli.main")  # upward
    graph["deniable.ngrams.release"].add("deniable.calibration.plausible")  # sibling of layer 6
    graph["deniable.metrics"].add("deniable._files")  # same layer: allowed, but closes a cycle
    graph["deniable._files"].add("deniable.metrics")
    found = violations(graph, layers)
    assert any(p.startswith("upward import: deniable.embeddings.embedding") for p in found), found
    assert any(p.startswith("sideways import: deniable.ngrams.release") for p in found), found
    assert "import cycle among: deniable._files, deniable.metrics" in found, found
    graph["deniable.new_module"] = set()
    assert any("deniable.new_module is in no layer" in p for p in violations(graph, layers))


def test_the_parser_sees_lazy_and_dynamic_imports_but_not_type_checking_ones(tmp_path):
    pkg = tmp_path / "deniable"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("X = 1\n")
    (pkg / "other.py").write_text("")
    (pkg / "third.py").write_text("")
    (pkg / "low" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..other import Thing\n"
        "def f():\n    from .. import high\n    return high\n"
        "REG = {'x': 'deniable.other:Name'}\n"
        "def g():\n    import importlib\n    return importlib.import_module('deniable.third')\n"
    )
    graph = import_graph(tmp_path, "deniable")
    assert graph["deniable.low"] == {"deniable.high", "deniable.other", "deniable.third"}
    (pkg / "low" / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import high\n")
    assert import_graph(tmp_path, "deniable")["deniable.low"] == set()


# -- the command line uses the public library API ----------------------------------------------------

#: TODO: cli/privatize.py still reads two private names; replace them with
#: deniable.mechanisms.mechanism_class and deniable.backends.torch_backend.torch_mechanism_class,
#: then empty this set.
PRIVATE_USE_ALLOWED: set[tuple[str, str, str]] = set()


def private_imports(src: Path = SRC, package: str = PACKAGE, client: str = "deniable.cli") -> set[tuple[str, str, str]]:
    """(module, imported module, name) for every ``_private`` name a module of ``client`` imports
    from a module outside ``client`` and outside the private foundation modules (``deniable._*``)."""
    modules = module_files(src, package)
    found = set()
    for name, path in modules.items():
        if not (name == client or name.startswith(client + ".")):
            continue
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            if target.startswith(client) or fnmatch.fnmatchcase(target, f"{package}._*"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.add((name, target, alias.name))
    return found


def test_the_cli_uses_only_public_library_names():
    extra = private_imports() - PRIVATE_USE_ALLOWED
    assert not extra, f"the CLI imports private names of the library: {sorted(extra)}; add a public function instead"


def test_private_imports_are_found(tmp_path):
    """Control: a planted private import in a cli module is reported; foundation helpers are not."""
    pkg = tmp_path / "deniable"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "mechanisms").mkdir()
    for f in ("__init__.py", "cli/__init__.py", "mechanisms/__init__.py", "mechanisms/registry.py", "_files.py"):
        (pkg / f).write_text("")
    (pkg / "cli" / "x.py").write_text("from .._files import _helper\ndef f():\n    from ..mechanisms.registry import _resolve, get\n")
    assert private_imports(tmp_path) == {("deniable.cli.x", "deniable.mechanisms.registry", "_resolve")}


def test_the_composition_root_connects_the_layers_once():
    """The extension points are set by ``deniable/__init__.py`` only: connecting again raises, so
    no later code (a request, a plugin) can swap the target resolver or the useful-range lookup."""
    import deniable  # noqa: F401
    from deniable.mechanisms import registry
    from deniable.text import privatize as text_privatize

    with pytest.raises(RuntimeError, match="already connected"):
        registry._connect(target_resolver=lambda *a, **k: None, backends={})
    with pytest.raises(RuntimeError, match="already connected"):
        text_privatize._connect(useful_range=lambda m: None)
    assert registry._TARGET_RESOLVER is not None and registry._TARGET_RESOLVER.__name__ == "mechanism_for_target"
