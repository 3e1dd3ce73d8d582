"""What each cluster of a run is about: size, top words, representative texts, majority label.

    python tools.py describe --run <run> [--html]

The work is :func:`evaluation.run_report.describe.write_descriptions`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_trust_option, tool_parser
from evaluation.model_io import run_files
from evaluation.run_report.describe import write_descriptions
from evaluation.run_report.plots import PROJECTIONS
from textcore import console
from textcore.errors import exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = tool_parser("describe", __doc__)
    parser.add_argument("--run", required=True, type=Path, help="run folder (holds predictions.csv)")
    parser.add_argument("--top-words", type=int, default=10, help="words per cluster (default 10)")
    parser.add_argument("--representatives", type=int, default=3, help="texts per cluster (default 3)")
    parser.add_argument("--tokenizer", default="auto",
                        help="c-TF-IDF terms: auto (character bigrams for Chinese, Japanese, Thai, ...; else words), "
                        "word, char:A-B, or backbone (the run's tokenizer)")
    parser.add_argument("--html", action="store_true",
                        help=f"also write {run_files.REPORT_HTML}: the map, the clusters, the summary and the curves "
                        "in one page (runs write it themselves; this makes it for older runs)")
    parser.add_argument("--projection", choices=PROJECTIONS, default=None,
                        help="--html: the map's projection (default: the run's callbacks.report.projection, else tsne)")
    parser.add_argument("--max-points", type=int, default=None,
                        help="--html: texts on the map, a seeded sample (default: the run's own, else 3000; 0: all)")
    add_trust_option(parser)  # a run without embeddings/after.npy: its encoder embeds the texts
    args = parser.parse_args(argv)
    if not args.html and (args.projection or args.max_points is not None):
        parser.error("--projection and --max-points choose the map of report.html: add --html")
    if args.max_points is not None and args.max_points < 0:
        parser.error(f"--max-points must be >= 0 (0: every text), got {args.max_points}")
    return write_descriptions(**vars(args))


if __name__ == "__main__":
    console.run_cli(main, info_logs=True)
