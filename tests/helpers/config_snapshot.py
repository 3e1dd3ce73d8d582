"""Composed configs of every experiment and method, kept as a fixture so that a change of layout in conf/
(bases, shared blocks) can be proven to compose the same values.

Regenerate after a deliberate change of a config's values:
    .venv/bin/python -m tests.helpers.config_snapshot
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers import CONF, compose_config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "composed_configs.json"


def rows() -> list[str]:
    """One override per experiment and per method, each composed on top of the default config."""
    experiments = [f"experiment={p.stem}" for p in sorted((CONF / "experiment").glob("*.yaml"))]
    methods = [f"method={p.stem}" for p in sorted((CONF / "method").glob("*.yaml"))]
    return experiments + methods


def composed(override: str) -> dict:
    """The config before interpolation: `${...}` stays as written, so no path of this machine is recorded."""
    from omegaconf import OmegaConf

    # the output folder is the only value composition fills in from outside; a fixed name keeps it stable
    cfg = compose_config([override], Path("OUTPUT_DIR"))
    return OmegaConf.to_container(cfg, resolve=False)


def main() -> int:
    snapshot = {row: composed(row) for row in rows()}
    FIXTURE.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print(f"{FIXTURE.name}: {len(snapshot)} configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
