"""One command per paper table: check the data, launch every row x seed, print the table beside the paper's.

    python tools.py reproduce sccl_table1 [--seeds 0,1,2] [--rows sccl_agnews,...] [--dry-run] [overrides ...]

What it runs and how (rows, launchers, packing, precisions) is :mod:`launching.reproduce`'s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import seed_list, tool_parser
from evaluation.across_runs import paper_table
from launching.reproduce import TRAINING_PRECISIONS, reproduce
from textcore import console
from textcore.errors import exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> str:
    parser = tool_parser("reproduce", __doc__)
    parser.add_argument("table", help=f"one of: {', '.join(paper_table.available())} (or a .yaml file)")
    parser.add_argument("--seeds", type=seed_list, default=[0, 1, 2], metavar="0,1,2",
                        help="training seeds: every row runs once with each")
    parser.add_argument("--rows", default=None, help="experiments of the table to run (default: all)")
    parser.add_argument("--launcher", choices=("local", "slurm"), default="local",
                        help="local: the runs one after another here; slurm: one SLURM job each")
    parser.add_argument("--output", type=Path, default=None, help="default: logs/reproduce/<table>")
    parser.add_argument("--dry-run", action="store_true", help="list runs, commands, data and GPU hours; run nothing")
    parser.add_argument("--runs-per-gpu", type=int, default=None, metavar="N",
                        help="N runs side by side on every GPU (on the CPUs without one), memory checked first")
    parser.add_argument("--run-memory-gib", type=float, default=None, metavar="GIB",
                        help="one run's memory, measured (default: estimated; see --runs-per-gpu)")
    parser.add_argument("--precision", choices=tuple(TRAINING_PRECISIONS), default=None,
                        help="train every run in fp32 (the papers'), tf32 (float32 with TF32 products) or bf16 "
                        "autocast (default: each experiment's own)")
    parser.add_argument("--plots", action="store_true",
                        help="draw each run's report figures (off by default: a table needs none, and "
                        "`tools.py plots` draws them later)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run, e.g. trainer.devices=4")
    args = parser.parse_intermixed_args(argv)  # overrides may come before or after the options
    return reproduce(args.table, args.seeds, args.rows, args.launcher, args.output, args.dry_run, args.runs_per_gpu,
                     args.run_memory_gib, args.precision, args.overrides, args.plots)


if __name__ == "__main__":
    console.run_cli(main)
