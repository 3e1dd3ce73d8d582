"""callbacks/ holds Lightning callbacks: every module there defines one (what a run agrees with its folder, its
signals and its sweep lives in runtime/, and what starts runs in launching/)."""
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_under_callbacks_defines_a_lightning_callback():
    from lightning.pytorch import Callback

    without = []
    for path in sorted((ROOT / "callbacks").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        defined = [v for v in vars(module).values()
                   if isinstance(v, type) and v.__module__ == module.__name__ and issubclass(v, Callback)]
        if not defined:
            without.append(str(path.relative_to(ROOT)))
    assert without == [], f"modules under callbacks/ that define no Lightning callback: {without}"
