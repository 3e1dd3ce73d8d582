"""Pictures of a run: 2-D maps of the embeddings, the matched confusion matrix, training curves.

    python tools.py plots --run <run> [--projection pca]

The work is :func:`evaluation.run_report.plots.plot_run`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_trust_option, tool_parser
from evaluation.run_report.plots import PROJECTIONS, plot_run
from textcore import console
from textcore.errors import exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = tool_parser("plots", __doc__)
    parser.add_argument("--run", required=True, type=Path, help="run folder")
    parser.add_argument("--projection", default="tsne", choices=PROJECTIONS, help="2-D map (default tsne)")
    parser.add_argument("--max-points", type=int, default=3000, help="texts drawn on the maps (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="subsample and projection seed (default 0)")
    parser.add_argument("--partition", choices=("head", "kmeans"), default=None,
                        help="clusters to show (default: the head when the method has one)")
    add_trust_option(parser)  # a run without embeddings/after.npy: its encoder embeds the texts
    args = parser.parse_args(argv)
    return plot_run(**vars(args))


if __name__ == "__main__":
    console.run_cli(main, info_logs=True)
