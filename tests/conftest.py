import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data_files import ROOT, SHARED_DATA, toy_rows, write_csv

os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "offline")
# runs cluster their embeddings unless a test asks for cluster_space=umap: UMAP's numba compilation costs every
# training process about 30 s of CPU (tests/evaluation/clustering/test_cluster_space.py covers the UMAP space)
os.environ.setdefault("PROJECT_CLUSTER_SPACE", "embeddings")
# the configs' data folder (conf/config.yaml): the test data; set at import so that runs in subprocesses see it
os.environ.setdefault("PROJECT_DATA_DIR", str(SHARED_DATA))


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def short_text_dir(shared_data) -> Path:
    return shared_data / "short_text"


@pytest.fixture
def toy_corpus(tmp_path) -> Path:
    """A small labelled CSV with an augmentation column (3 topics x 12 texts, shuffled)."""
    import random

    rng = random.Random(0)
    rows = toy_rows(rng)
    rng.shuffle(rows)
    return write_csv(tmp_path / "toy.csv", ["label", "text0", "text1"], rows)


@pytest.fixture(autouse=True)
def _no_wandb_run_left_open():
    """A test that ends with a W&B run still open would hand it to the next test's WandbLogger (which reuses a run
    in progress); the test tree's order decides which test that is, so every test closes what it left."""
    yield
    import sys

    if "wandb" in sys.modules:  # only tests that used W&B pay for the import below
        from launching.hydra_callbacks import finish_wandb_run

        finish_wandb_run()


@pytest.fixture
def live_process():
    """A process alive for the test (a lock's or a study's recorded owner), killed after it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()
