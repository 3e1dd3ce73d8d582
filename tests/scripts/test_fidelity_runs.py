"""scripts/studies/fidelity_runs.py (the papers' comparisons on a CPU budget): every group's runs compose, with the
settings each table compares."""
from pathlib import Path

import pytest

from tests.helpers import compose_config, load_script

DRIVER = load_script("studies/fidelity_runs")


def one_run_per_value(group, smoke):
    """The overrides of runs that together take every value of every sweep axis once."""
    fixed = [o for o in group.overrides(Path("/tmp/unused"), smoke) if not o.startswith("hydra.")]
    sweep = {**group.sweep, **(group.sweep_smoke if smoke else {})}
    axes = {key: values.split(",") for key, values in sweep.items()}
    width = max(len(values) for values in axes.values())
    base = [o for o in fixed if o.split("=")[0] not in sweep]
    return [base + [f"{key}={values[i % len(values)]}" for key, values in axes.items()] for i in range(width)]


@pytest.mark.parametrize("smoke", [False, True])
@pytest.mark.parametrize("name", sorted(DRIVER.GROUPS))
def test_every_value_of_every_group_composes(tmp_path, name, smoke):
    group = DRIVER.GROUPS[name]
    runs = one_run_per_value(group, smoke)
    sweep = {**group.sweep, **(group.sweep_smoke if smoke else {})}
    # a multirun first composes the overrides without the swept ones (a swept experiment is not applied)
    compose_config([o for o in runs[0] if o.split("=")[0] not in sweep], tmp_path)
    for overrides in runs:
        cfg = compose_config(overrides, tmp_path)
        assert cfg.batch_size == 64
        assert cfg.backbone.name == ("tiny" if smoke else "minilm")
        assert "progress" not in cfg.callbacks and "report" not in cfg.callbacks


def test_the_tables_compare_what_issue_13_asks(tmp_path):
    groups = DRIVER.GROUPS
    assert groups["sccl_ablation"].sweep["method.objective"] == "joint,instance,cluster"
    assert groups["pairsupcon_modes"].sweep["method.mode"] == "both,classification,instance"
    assert groups["aecl_forms"].sweep["method.reference"] == "false,true"
    assert all(g.sweep["seed"].count(",") == 2 for g in groups.values())  # three seeds
    # ClusterNS vs SimCSE: both methods at both rates (same rate, and each at its paper rate)
    lrs = {}
    for experiment in ("simcse_minilm_cpu", "clusterns_minilm_cpu"):
        cfg = compose_config([f"experiment={experiment}"], tmp_path)
        lrs[cfg.method.name] = cfg.method.lr
        assert cfg.trainer.max_steps == 150 and cfg.batch_size == 64 and cfg.dataset.name == "wiki"
    assert lrs == {"simcse": 3e-5, "clusterns": 5e-5}
    assert set(groups["clusterns_vs_simcse"].sweep["method.lr"].split(",")) == {"3e-5", "5e-5"}
    # SCCL runs at exactly AECL's budget
    aecl, sccl = groups["aecl_forms"].fixed, groups["sccl_at_aecl_budget"].fixed
    for key in ("trainer.max_epochs", "+trainer.limit_train_batches", "trainer.max_steps", "batch_size"):
        assert aecl[key] == sccl[key]


def test_dry_run_prints_one_multirun_per_group(capsys, tmp_path):
    assert DRIVER.main(["--dry-run", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in DRIVER.GROUPS:
        assert f"hydra.sweep.dir={tmp_path / name}" in printed
    assert printed.count(" -m ") == len(DRIVER.GROUPS)
    assert not any(tmp_path.iterdir())  # nothing run, nothing written


def test_a_group_split_by_seed_into_parts_keeps_its_other_settings(capsys, tmp_path):
    """--seeds/--part/--extra: one seed of a group in <out>/<group>/<part>, with added overrides."""
    argv = ["--dry-run", "--out", str(tmp_path), "--groups", "aecl_forms", "--seeds", "2", "--part", "s2",
            "--extra", "trainer=gpu_fp32", "threads_per_job=2"]
    assert DRIVER.main(argv) == 0
    printed = capsys.readouterr().out
    assert "== aecl_forms: 2 runs" in printed  # paper form and reference=true, one seed
    assert f"hydra.sweep.dir={tmp_path / 'aecl_forms' / 's2'}" in printed
    assert "seed=2 " in printed and "seed=1,2,3" not in printed
    assert "method.reference=false,true" in printed
    assert printed.rstrip().endswith("trainer=gpu_fp32 threads_per_job=2")
    group = DRIVER.GROUPS["aecl_forms"]
    overrides = group.overrides(tmp_path, seeds="2", extra=["trainer=gpu_fp32"])
    compose_config([o for o in overrides if not o.startswith("hydra.")
                    and o.split("=")[0] not in group.sweep] + ["seed=2", "method.reference=true"], tmp_path)


def test_only_runs_a_subset_of_a_groups_settings(capsys, tmp_path):
    argv = ["--dry-run", "--out", str(tmp_path), "--groups", "aecl_forms", "--seeds", "1",
            "--only", "method.reference=true"]
    assert DRIVER.main(argv) == 0
    printed = capsys.readouterr().out
    assert "== aecl_forms: 1 runs" in printed
    assert " method.reference=true " in printed and "false,true" not in printed
    assert printed.count("method.reference=") == 1


def test_only_names_the_axes_of_the_group(capsys, tmp_path):
    argv = ["--dry-run", "--out", str(tmp_path), "--groups", "sccl_at_aecl_budget", "--only", "method.reference=true"]
    with pytest.raises(SystemExit):
        DRIVER.main(argv)
    err = capsys.readouterr().err
    assert "method.reference" in err and "sccl_at_aecl_budget sweeps only over seed" in err
    with pytest.raises(SystemExit):
        DRIVER.main(["--dry-run", "--out", str(tmp_path), "--only", "method.reference"])
    assert "give KEY=VALUES" in capsys.readouterr().err


def test_seeds_must_be_integers(tmp_path):
    with pytest.raises(SystemExit):
        DRIVER.main(["--dry-run", "--out", str(tmp_path), "--seeds", "1;2"])
