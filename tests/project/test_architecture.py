"""The import graph of the project's own code (everything but tests/): no circle, nothing imports a
layer above its own, no file outside the repository is named, no machine path is committed.

Layers, bottom to top (docs/architecture.md): errors/console/run_folder/atomic_files -> lightning_modules.shared ->
the method packages and datamodules -> validation -> evaluation -> callbacks (with each method's own
lightning_modules/<method>/callbacks/) -> run -> scripts.
Every import counts, also those inside functions."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("errors", "console", "run_folder", "atomic_files", "lightning_modules", "datamodules", "validation",
       "evaluation", "callbacks", "hydra_plugins", "run", "scripts")


def layer(module: str) -> int:
    if module in ("errors", "console", "run_folder", "atomic_files"):
        return 0
    if module.startswith("lightning_modules.shared") or module == "lightning_modules":
        return 1
    if re.fullmatch(r"lightning_modules\.\w+\.callbacks(\..*)?", module):
        return 5  # a method's own callbacks live in its folder but use the shared callbacks' pieces
    if module.startswith(("lightning_modules.", "datamodules")):
        return 2
    order = {"validation": 3, "evaluation": 4, "callbacks": 5, "hydra_plugins": 5, "run": 6, "scripts": 7}
    return order[module.split(".")[0]]


def project_modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in TOP and rel.stem not in TOP:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules imported anywhere in ``path`` (``from a import b`` names a.b when b is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph = {m: imports_of(p, modules) - {m} for m, p in modules.items()}
    # importing a.b.c from outside package a.b runs a/b/__init__ first (a package's own modules do not)
    for m in list(graph):
        graph[m] |= {i.rpartition(".")[0] for i in graph[m]
                     if i.rpartition(".")[0] in modules and not m.startswith(i.rpartition(".")[0] + ".")} - {m}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_a_circle_and_an_upward_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("lightning_modules.shared.encoder") < layer("lightning_modules.sccl.module") \
        < layer("evaluation.model_io.load")


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    assert len(graph) > 80 and "lightning_modules.sccl.module" in graph["lightning_modules.sccl"]
    assert cycles(graph) == []


def test_no_module_imports_a_layer_above_its_own():
    upward = [f"{m} -> {i}" for m, deps in import_graph().items() for i in deps if layer(i) > layer(m)]
    assert upward == []


def test_shared_pieces_import_no_method():
    methods = {p.name for p in (ROOT / "lightning_modules").iterdir() if (p / "module.py").exists()}
    assert methods >= {"sccl", "aecl", "pairsupcon", "simcse", "clusterns"}
    graph = import_graph()
    bad = [f"{m} -> {i}" for m, deps in graph.items() if m.startswith("lightning_modules.shared")
           for i in deps if i.split(".")[1:2] and i.split(".")[1] in methods]
    assert bad == []


def committed_text_files() -> list[Path]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / f for f in files if Path(f).suffix in (".py", ".md", ".yaml", ".toml", ".txt", ".json", ".cfg")
            or Path(f).name in ("Makefile", "run")]


@pytest.mark.parametrize("pattern,what", [
    (re.compile(r"SPEC\.md|shared/SPEC|SPEC §"), "the maintainers' specification (not in the repository)"),
    (re.compile(r"(?<![\w.])/(work|home|Users|root|tmp/pytest)/[\w.-]+/"), "an absolute path of a machine"),
])
def test_no_committed_file_points_outside_the_repository(pattern, what):
    this = Path(__file__).resolve()
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in committed_text_files() if p.exists() and p.resolve() != this
            for n, line in enumerate(p.read_text(errors="ignore").splitlines(), 1) if pattern.search(line)]
    assert hits == [], f"{what}: {hits[:20]}"
