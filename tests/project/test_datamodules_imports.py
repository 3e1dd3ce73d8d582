"""Importing any module of datamodules/ loads no module of lightning_modules/ (the data side builds on textcore
and Lightning itself, never on a method or the shared module code): checked by running the imports, so a module
that reaches lightning_modules at import time through a name built at run time is caught too, which the
architecture test's reading of import statements cannot see.

One fresh interpreter imports every module in turn, with the project's own modules taken out of ``sys.modules``
before each import (third-party libraries stay loaded: importing torch once instead of once per module)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.project.test_architecture import ROOT, project_modules, write_tree

CHECK = """
import importlib, json, sys
modules, project, forbidden = json.loads(sys.argv[1]), set(json.loads(sys.argv[2])), sys.argv[3]
loaded = {}
for name in modules:
    for m in [m for m in sys.modules if m.split(".")[0] in project]:
        del sys.modules[m]
    importlib.import_module(name)
    loaded[name] = sorted(m for m in sys.modules if m == forbidden or m.startswith(forbidden + "."))
print(json.dumps(loaded))
"""


def modules_loading(root: Path, package: str, forbidden: str) -> dict[str, list[str]]:
    """For each module of ``package`` under ``root``: the modules of ``forbidden`` that importing it loads."""
    modules = project_modules(root)
    names = sorted(m for m in modules if m == package or m.startswith(package + "."))
    tops = sorted({m.split(".")[0] for m in modules})
    done = subprocess.run([sys.executable, "-c", CHECK, json.dumps(names), json.dumps(tops), forbidden], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_check_sees_a_module_loaded_through_a_name_built_at_run_time(tmp_path):
    root = write_tree(tmp_path, {
        "datamodules/__init__.py": "",
        "datamodules/clean.py": "import json\n",
        "datamodules/sneaky.py": "import importlib\nimportlib.import_module('lightning_' + 'modules.shared')\n",
        "lightning_modules/__init__.py": "",
        "lightning_modules/shared.py": "",
    })
    loaded = modules_loading(root, "datamodules", "lightning_modules")
    assert loaded == {"datamodules": [], "datamodules.clean": [],
                      "datamodules.sneaky": ["lightning_modules", "lightning_modules.shared"]}


def test_no_datamodules_module_loads_lightning_modules():
    loaded = modules_loading(ROOT, "datamodules", "lightning_modules")
    assert len(loaded) > 15 and "datamodules.short_text" in loaded
    assert {name: found for name, found in loaded.items() if found} == {}


def test_decoding_text_files_needs_no_table_reader():
    """The streaming sentence files and the NLI readers decode text files without the table reader or pandas."""
    assert modules_loading(ROOT, "datamodules.text_decoding", "pandas") == {"datamodules.text_decoding": []}
    assert modules_loading(ROOT, "datamodules.text_decoding", "datamodules.table_reader") == \
        {"datamodules.text_decoding": []}
