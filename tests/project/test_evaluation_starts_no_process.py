"""No module under evaluation/ starts a process: evaluation computes on what it is given and writes files, and what
runs commands or training runs (reproduce, packing, the sweep callbacks) lives in launching/, above it
(docs/architecture.md). Read with ``ast``, like the import graph: every import and call counts, also inside
functions."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.project.test_architecture import ROOT, project_modules, write_tree

# modules whose import means starting processes (or a launcher of runs)
PROCESS_MODULES = ("subprocess", "multiprocessing", "torch.multiprocessing", "joblib", "pty", "launching")
# os functions that start a process
OS_STARTS = ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "startfile")
OS_STARTS_PREFIX = ("spawn", "exec")
# names that start a process whatever module they come from
PROCESS_NAMES = ("ProcessPoolExecutor", "Popen", "create_subprocess_exec", "create_subprocess_shell")

# the one exception, with its reason: SentEval's linear probes of the folds in joblib worker processes (``--jobs``,
# default 1: no worker); a probe seeds torch's global generator, so threads would share it and change the results
ALLOWED = {("evaluation.benchmarks.senteval.classifier", "joblib")}


def _is_process_module(name: str) -> str | None:
    return next((m for m in PROCESS_MODULES if name == m or name.startswith(m + ".")), None)


def process_starts(path: Path, module: str) -> list[str]:
    """``module:line what`` for each place of ``path`` that starts a process or imports a module that does."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        what = None
        if isinstance(node, ast.Import):
            what = next((_is_process_module(a.name) for a in node.names if _is_process_module(a.name)), None)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            what = _is_process_module(node.module or "")
            if what is None and any(a.name in PROCESS_NAMES for a in node.names):
                what = next(a.name for a in node.names if a.name in PROCESS_NAMES)
        elif isinstance(node, ast.Attribute):
            if node.attr in PROCESS_NAMES:
                what = node.attr
            elif (isinstance(node.value, ast.Name) and node.value.id == "os"
                  and (node.attr in OS_STARTS or node.attr.startswith(OS_STARTS_PREFIX))):
                what = f"os.{node.attr}"
        elif isinstance(node, ast.Name) and node.id in PROCESS_NAMES:
            what = node.id
        if what and (module, what) not in ALLOWED:
            found.append(f"{module}:{node.lineno} {what}")
    return sorted(set(found))


def starts_under(root: Path, package: str) -> list[str]:
    return [hit for module, path in sorted(project_modules(root).items())
            if module == package or module.startswith(package + ".") for hit in process_starts(path, module)]


def test_the_check_sees_every_way_of_starting_a_process(tmp_path):
    root = write_tree(tmp_path, {
        "evaluation/__init__.py": "",
        "evaluation/clean.py": "import os\n\n\ndef f():\n    return os.path.join('a', 'b'), os.environ\n",
        "evaluation/runs.py": "def f(cmd):\n    import subprocess\n    return subprocess.run(cmd)\n",
        "evaluation/shell.py": "import os\n\n\ndef f():\n    os.system('ls')\n    os.execvp('ls', ['ls'])\n",
        "evaluation/pool.py": "from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor\n",
        "evaluation/deep/__init__.py": "",
        "evaluation/deep/mp.py": "from multiprocessing import Pool\n",
        "evaluation/deep/launch.py": "class C:\n    def go(self):\n        from launching.reproduce import main\n",
        "evaluation/deep/jobs.py": "from joblib import Parallel\n",
        "other/__init__.py": "",
        "other/fine.py": "import subprocess\n",  # not under evaluation
    })
    assert starts_under(root, "evaluation") == [
        "evaluation.deep.jobs:1 joblib", "evaluation.deep.launch:3 launching", "evaluation.deep.mp:1 multiprocessing",
        "evaluation.pool:1 ProcessPoolExecutor", "evaluation.runs:2 subprocess", "evaluation.shell:5 os.system",
        "evaluation.shell:6 os.execvp",
    ]


def test_no_module_under_evaluation_starts_a_process():
    assert starts_under(ROOT, "evaluation") == []
    allowed = [f"{module} {what}" for module, what in sorted(ALLOWED)
               if not process_starts(project_modules()[module], "")]
    assert allowed == [], f"an exception that no longer happens: remove it from ALLOWED: {allowed}"
