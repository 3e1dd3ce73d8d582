"""Assign new texts to the clusters of a trained run, on every device of one machine or several.

    python tools.py predict --run <run folder | .ckpt | sentence-transformers export> \\
        --input new.csv --text-column text --output assigned.csv [--devices 4] [--embeddings]

How the texts are assigned, and on which devices, is :mod:`evaluation.model_io.predict`'s.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_backend_argument, add_trust_option, tool_parser
from evaluation.model_io.predict import ASSIGNERS, CHUNK_ROWS, predict
from textcore import console
from textcore.errors import exit_on_user_error


def _devices(value: str):
    """``--devices``: a count, ``auto`` (every GPU, or one CPU process) or a list of GPU ids such as ``0,2``."""
    value = value.strip()
    if value == "auto" or "," in value:
        return value
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}': a number of devices, auto, or GPU ids such as 0,2") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"'{value}': at least one device")
    return count


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict | None:
    parser = tool_parser("predict", __doc__)
    parser.add_argument("--run", required=True, help="run folder, its .ckpt, or a sentence-transformers export")
    parser.add_argument("--input", required=True, type=Path,
                        help="texts: CSV/TSV, JSON Lines, Parquet or a text file (one text per line)")
    parser.add_argument("--text-column", default="text", help="column holding the texts (default: text)")
    parser.add_argument("--output", required=True, type=Path,
                        help="a .csv or .parquet file (assembled in row order at the end), or a folder: one "
                             "part-<shard>.parquet per shard")
    parser.add_argument("--assign", default="auto", choices=ASSIGNERS,
                        help="head (SCCL/AECL), kmeans (saved centroids), auto: the head when there is one, "
                             "unless the run clustered in a UMAP (cluster_space=umap): then kmeans")
    parser.add_argument("--encoding", default=None, help="encoding of --input (default utf-8)")
    parser.add_argument("--batch-size", type=int, default=128, help="texts per encoder batch (default 128)")
    parser.add_argument("--context-size", type=int, default=None,
                        help="AECL: training texts each new text attends to (default: training batch size - 1)")
    parser.add_argument("--seed", type=int, default=0, help="AECL: draw of the context texts (default 0)")
    parser.add_argument("--top-words", type=int, default=5, help="top words per cluster in the output (default 5)")
    parser.add_argument("--embeddings", action="store_true",
                        help="keep each text's embedding (float16) in the Parquet output or the parts")
    parser.add_argument("--accelerator", default="auto",
                        help="cpu, gpu (cuda), ... (default auto: the GPU when there is one, else the CPU)")
    parser.add_argument("--devices", type=_devices, default="auto",
                        help="processes per node, one per device: a count, GPU ids such as 0,2, or auto (default: "
                             "every GPU, or one CPU process)")
    parser.add_argument("--num-nodes", type=int, default=1,
                        help="machines (under SLURM: srun starts --devices tasks on each; docs/scale.md)")
    add_backend_argument(parser)
    parser.add_argument("--shard-rows", type=int, default=CHUNK_ROWS,
                        help=f"rows per shard, the unit of work and of resuming (default {CHUNK_ROWS:,})")
    add_trust_option(parser)
    args = parser.parse_args(argv)
    summary = predict(args.run, args.input, args.text_column, args.output, args.assign, args.encoding,
                      args.batch_size, args.context_size, args.seed, args.top_words, accelerator=args.accelerator,
                      devices=args.devices, num_nodes=args.num_nodes, embeddings=args.embeddings,
                      shard_rows=args.shard_rows, backend=args.backend, trust_checkpoint=args.trust_checkpoint)
    if summary is not None:  # rank 0
        peaks = ", ".join(f"{gib:.2f}" for gib in summary["peak_memory_gib"])
        print(f"wrote {args.output}: {summary['assigned']:,} texts assigned by {summary['assigned_by']} on "
              f"{summary['processes']} process(es) ({summary['device']}; {summary['texts_per_second']:,.0f} texts/s, "
              f"peak memory per process {peaks} GiB); per cluster {summary['per_cluster']}")
    return summary


if __name__ == "__main__":
    console.run_cli(main, info_logs=True)
