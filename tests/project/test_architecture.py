"""The import graph of the project's own code (everything but tests/): no circle, nothing imports a
layer above its own, no file outside the repository is named, no machine path is committed.

Layers, bottom to top: :data:`LAYERS`, the list of docs/architecture.md "Layers". Every import counts: those
inside functions and ``if`` blocks, relative ones (``from .eda import EDA``) and ``importlib.import_module``
of a written-out name."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# bottom to top, as docs/architecture.md lists them; a module belongs to the longest name that prefixes it
LAYERS = (
    ("textcore",),  # errors, console, run_folder, atomic_files, device_settings, checkout, data_kinds
    ("textcore.encoding", "textcore.kmeans", "textcore.cluster_space", "textcore.linear_assigner"),  # the text
    # encoder, KMeans (and its UMAP space, refined by a linear classifier), without Lightning
    ("datamodules",),
    ("lightning_modules.shared",),
    ("lightning_modules",),  # the method packages, each with its own callbacks/
    ("validation",),
    ("evaluation",),
    ("runtime",),  # the run protocol: the folder's lock, signals, requeue, the objective, a job of a multirun
    ("callbacks", "hydra_plugins"),
    ("launching",),
    ("ctclust", "run", "tools"),
    ("scripts",),
)
# evaluation's own layers, bottom to top (docs/architecture.md, "Inside evaluation"): the package's own modules
# (figures), the pure clustering maths, a model and a run folder's files in and out, what one run's folder shows, an
# encoder on the benchmarks, results across runs; each imports only the ones before it
EVALUATION_ORDER = ("evaluation", "evaluation.clustering", "evaluation.model_io", "evaluation.run_report",
                    "evaluation.benchmarks", "evaluation.across_runs")
NOT_PROJECT_CODE = ("tests", "docs", "conf", "data", "logs", "outputs", "multirun")


def layer(module: str) -> int:
    best = max(((len(name), level) for level, names in enumerate(LAYERS) for name in names
                if module == name or module.startswith(name + ".")), default=None)
    if best is None:
        raise KeyError(f"module '{module}' is in no layer: add its top-level name to LAYERS in "
                       f"tests/project/test_architecture.py and to the list in docs/architecture.md")
    return best[1]


def sub_layer(module: str, order: tuple[str, ...]) -> int | None:
    """The place of ``module`` in ``order`` (a package, then its sub-packages bottom to top), None outside the
    package. A module of a sub-package that ``order`` does not list is an error: the new sub-package has no place."""
    package = order[0]
    if module != package and not module.startswith(package + "."):
        return None
    parts = module.split(".")
    if len(parts) > len(package.split(".")) + 1 or f"{package}.{parts[-1]}" in order:
        inner = ".".join(parts[: len(package.split(".")) + 1])
        if inner not in order:
            raise KeyError(f"'{module}' is in sub-package '{inner}', which has no place in the order of '{package}': "
                           "add it to EVALUATION_ORDER in tests/project/test_architecture.py and to "
                           "docs/architecture.md")
        return order.index(inner)
    return 0  # a module of the package itself (evaluation/figures.py)


def upward_within(graph: dict[str, set[str]], order: tuple[str, ...]) -> list[str]:
    """Imports between the sub-packages of ``order[0]`` that go against ``order``."""
    return sorted(f"{m} -> {i}" for m, deps in graph.items() for i in deps
                  if sub_layer(m, order) is not None and sub_layer(i, order) is not None
                  and sub_layer(i, order) > sub_layer(m, order))


def _holds_code(folder: Path) -> bool:
    return (folder / "__init__.py").exists() or any(folder.glob("*.py")) or any(folder.glob("*/*.py"))


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project under ``root``: top-level ``.py`` files and the folders of code beside them."""
    files = [p for p in root.glob("*.py")]
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if folder.name.startswith((".", "_")) or folder.name in NOT_PROJECT_CODE or not _holds_code(folder):
            continue
        files += [p for p in folder.rglob("*.py") if "__pycache__" not in p.parts]
    out = {}
    for path in files:
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _named(node: ast.AST, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The module names an import statement (or ``importlib.import_module("...")``) at ``node`` reaches."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:  # relative: from the module's package, one folder up per extra dot
            package = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = ".".join(p for p in (package, node.module) if p)
        else:
            base = node.module or ""
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def imports_of(path: Path, module: str, modules: dict[str, Path]) -> set[str]:
    """Project modules imported anywhere in ``path`` (``from a import b`` names a.b when b is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        for name in _named(node, module, path.name == "__init__.py", modules):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    graph = {m: imports_of(p, m, modules) - {m} for m, p in modules.items()}
    # importing a.b.c from outside package a.b runs a/b/__init__ first (a package's own modules do not)
    for m in list(graph):
        graph[m] |= {i.rpartition(".")[0] for i in graph[m]
                     if i.rpartition(".")[0] in modules and not m.startswith(i.rpartition(".")[0] + ".")} - {m}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {i}" for m, deps in graph.items() for i in deps if layer(i) > layer(m))


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
    assert layer("textcore.encoding.encoder") < layer("datamodules.short_text") \
        < layer("lightning_modules.shared.base") < layer("lightning_modules.sccl.module") \
        < layer("evaluation.model_io.load")
    assert layer("lightning_modules.sccl.callbacks.centroid_init") == layer("lightning_modules.sccl.module")
    with pytest.raises(KeyError, match="newtop.thing.*LAYERS"):
        layer("newtop.thing")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_checker_sees_imports_inside_functions_relative_ones_and_import_module(tmp_path):
    """A small project whose only upward imports are hidden where a top-of-file reading would miss them."""
    root = write_tree(tmp_path, {
        "textcore/__init__.py": "",
        "textcore/errors.py": "",
        "run.py": "from textcore import errors\n",
        "evaluation/__init__.py": "",
        "evaluation/tool.py": "from textcore import errors\n\n\ndef main():\n"
                              "    from run import ROOT\n    return ROOT\n",
        "evaluation/helpers.py": "",
        "datamodules/__init__.py": "",
        "datamodules/reader.py": "class R:\n    def load(self):\n        from ..evaluation import helpers\n",
        "datamodules/pick.py": "import importlib\n\n\ndef f():\n    return importlib.import_module('run')\n",
        "datamodules/fine.py": "from . import reader\nfrom .reader import R\n",
        "tests/test_x.py": "import run\n",  # tests are not the project's code
    })
    graph = import_graph(root)
    assert set(graph) == {"textcore", "textcore.errors", "run", "evaluation", "evaluation.tool", "evaluation.helpers",
                          "datamodules", "datamodules.reader", "datamodules.pick", "datamodules.fine"}
    assert graph["datamodules.fine"] == {"datamodules.reader"}
    assert upward_imports(graph) == ["datamodules.pick -> run", "datamodules.reader -> evaluation",
                                     "datamodules.reader -> evaluation.helpers", "evaluation.tool -> run"]


def test_the_checker_finds_a_module_in_no_layer(tmp_path):
    graph = import_graph(write_tree(tmp_path, {"textcore/__init__.py": "", "textcore/errors.py": "",
                                               "helpers_of_mine.py": "from textcore import errors\n"}))
    with pytest.raises(KeyError, match="helpers_of_mine"):
        upward_imports(graph)


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    assert len(graph) > 80 and "lightning_modules.sccl.module" in graph["lightning_modules.sccl"]
    assert cycles(graph) == []


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports(import_graph()) == []


def test_the_checker_sees_an_import_up_the_order_of_a_package():
    order = ("pkg", "pkg.low", "pkg.high")
    graph = {"pkg.low.a": {"pkg.high.b", "pkg.helpers", "other.x"}, "pkg.high.b": {"pkg.low.a", "pkg.low"},
             "pkg.helpers": {"pkg.low.a"}, "pkg.high": set(), "pkg.low": set(), "other.x": {"pkg.high.b"}}
    assert upward_within(graph, order) == ["pkg.helpers -> pkg.low.a", "pkg.low.a -> pkg.high.b"]
    assert [sub_layer(m, order) for m in ("pkg", "pkg.helpers", "pkg.low", "pkg.high.b", "other.x")] \
        == [0, 0, 1, 2, None]
    with pytest.raises(KeyError, match="pkg.new.*EVALUATION_ORDER"):
        sub_layer("pkg.new.c", order)


def test_evaluation_sub_packages_import_only_down_their_order():
    graph = import_graph()
    packages = {m for m in graph if m.count(".") == 1 and m.startswith("evaluation.")
                and (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    assert packages == set(EVALUATION_ORDER[1:])
    assert upward_within(graph, EVALUATION_ORDER) == []


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
