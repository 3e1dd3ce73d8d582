"""Export a trained encoder for use outside this project.

    python tools.py export --run <run dir | .ckpt | any model reference> --output DIR

The work is :func:`evaluation.model_io.export.export_model`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ctclust.commands.common import add_trust_option, tool_parser
from evaluation.model_io.export import ST_POOLING, export_model
from textcore import console
from textcore.errors import exit_on_user_error


@exit_on_user_error
def main(argv: Sequence[str] | None = None) -> dict:
    parser = tool_parser("export", __doc__)
    parser.add_argument("--run", required=True, help="run dir, .ckpt, or any model reference load_encoder accepts")
    parser.add_argument("--output", required=True, type=Path, help="output folder (hf/ and sentence-transformers/)")
    parser.add_argument("--pooling", default=None, choices=sorted(ST_POOLING), help="default: the model's eval pooling")
    parser.add_argument("--max-seq-length", type=int, default=None, help="default: the encoder's max_length")
    parser.add_argument("--push-to-hub", metavar="REPO_ID", default=None,
                        help="upload the sentence-transformers folder (with its model card) to this Hub repository")
    parser.add_argument("--dry-run", action="store_true", help="write the folders and the card, upload nothing")
    add_trust_option(parser)
    args = parser.parse_args(argv)
    return export_model(**vars(args))


if __name__ == "__main__":
    console.run_cli(main)
