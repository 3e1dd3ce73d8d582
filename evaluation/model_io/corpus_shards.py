"""A corpus in shards: the input of ``python tools.py predict`` cut into fixed row ranges, one output part per shard.

The folder of one prediction (the ``--output`` folder, or ``<output>.parts/`` beside an output file) holds

- ``_plan.json``: what the parts are of (the input file's path, size and time, the text column and encoding, the
  shard size, the model and the assignment settings). A rerun with the same plan resumes; another is refused;
- ``_texts/texts-<shard>.parquet`` and ``_texts/_complete.json``: the input's texts, read once by the project's
  reader (``evaluation.model_io.predict.text_chunks``: every format, every error message of the one-process
  reader) and cut into shards of ``shard_rows`` rows. Every process then reads only its own shards;
- ``part-<shard>.parquet``: ``row`` (0-based data row of the input), ``cluster``, ``confidence``, ``margin``,
  ``top_words`` (and ``embedding``, float16, with ``--embeddings``) of one shard, written under a temporary name
  and renamed when complete: a part that exists is complete (the rename is the marker);
- ``_complete.json``: the summary, once every part exists.

A shard's rows are fixed by the input and the shard size alone, and each shard is encoded as one batch of its own,
so a part holds the same rows and values whatever the number of processes that wrote the others.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from textcore.atomic_files import atomic_write, atomic_write_text
from textcore.errors import UserError, writing

PLAN = "_plan.json"
COMPLETE = "_complete.json"
TEXTS = "_texts"
PART = "part-{:05d}.parquet"
TEXT_SHARD = "texts-{:05d}.parquet"


class ShardFolderError(UserError, ValueError):
    """A prediction folder that holds the parts of another prediction; the message says how to go on."""


def input_fingerprint(path: Path) -> dict:
    """What identifies an input file for a resume: a changed file (size or time) is another input."""
    stat = Path(path).stat()
    return {"path": str(Path(path).resolve()), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def check_plan(folder: Path, plan: dict) -> None:
    """Write ``plan`` into ``folder``, or check it against the one there: parts of another input, model or setting
    must not be mixed with this prediction's."""
    path = folder / PLAN
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in set(before) | set(plan) if before.get(k) != plan.get(k))
        if changed:
            raise ShardFolderError(
                f"'{folder}' holds the parts of another prediction (it differs in {', '.join(changed)}): to go on "
                "with that one, rerun its command; to start this one, remove the folder or choose another --output.")
        return
    folder.mkdir(parents=True, exist_ok=True)
    with writing(path):
        atomic_write_text(path, json.dumps(plan, indent=2))


def remove_leftovers(folder: Path) -> None:
    """Temporary files of a process that was killed while writing (``textcore.atomic_files`` names them so)."""
    for pattern in (".part-*.tmp", f"{TEXTS}/.texts-*.tmp"):
        for stale in folder.glob(pattern):
            stale.unlink(missing_ok=True)


@dataclass(frozen=True)
class ShardLayout:
    """``rows`` data rows in shards of ``shard_rows`` (the last one shorter)."""

    rows: int
    shard_rows: int

    @property
    def shards(self) -> int:
        return -(-self.rows // self.shard_rows)

    def bounds(self, shard: int) -> tuple[int, int]:
        return shard * self.shard_rows, min((shard + 1) * self.shard_rows, self.rows)


def split_texts(folder: Path, chunks, shard_rows: int, source: dict) -> ShardLayout:
    """Store the texts of ``chunks`` (``(first row, texts, blank mask)``, as ``text_chunks`` yields them, of any
    size) as shards of exactly ``shard_rows`` rows in ``folder/_texts``; skipped when a complete set of the same
    ``source`` is there already (a resumed prediction reads its input once, not again)."""
    texts_dir = folder / TEXTS
    layout = stored_layout(folder, source)
    if layout is not None and layout.shard_rows == shard_rows:
        return layout
    texts_dir.mkdir(parents=True, exist_ok=True)
    (texts_dir / COMPLETE).unlink(missing_ok=True)
    pending_texts: list[str] = []
    pending_blank: list[np.ndarray] = []
    rows = shard = 0
    for _, texts, blank in chunks:
        pending_texts += texts
        pending_blank.append(np.asarray(blank, dtype=bool))
        while len(pending_texts) >= shard_rows:
            mask = np.concatenate(pending_blank)
            _write_text_shard(texts_dir / TEXT_SHARD.format(shard), pending_texts[:shard_rows], mask[:shard_rows])
            pending_texts, pending_blank = pending_texts[shard_rows:], [mask[shard_rows:]]
            rows, shard = rows + shard_rows, shard + 1
    if pending_texts:
        _write_text_shard(texts_dir / TEXT_SHARD.format(shard), pending_texts, np.concatenate(pending_blank))
        rows += len(pending_texts)
    layout = ShardLayout(rows, shard_rows)
    atomic_write_text(texts_dir / COMPLETE, json.dumps({"source": source, "rows": rows, "shard_rows": shard_rows}))
    return layout


def stored_layout(folder: Path, source: dict) -> ShardLayout | None:
    """The layout of the complete set of text shards in ``folder`` made from ``source``, else None."""
    path = folder / TEXTS / COMPLETE
    if not path.is_file():
        return None
    done = json.loads(path.read_text(encoding="utf-8"))
    return ShardLayout(done["rows"], done["shard_rows"]) if done.get("source") == source else None


def _write_text_shard(path: Path, texts: list[str], blank: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"text": pa.array(texts, type=pa.string()), "blank": pa.array(blank)})
    with writing(path):
        atomic_write(path, lambda handle: pq.write_table(table, handle))


def read_text_shard(folder: Path, shard: int) -> tuple[list[str], np.ndarray]:
    """(texts, blank mask) of one shard."""
    import pyarrow.parquet as pq

    table = pq.read_table(folder / TEXTS / TEXT_SHARD.format(shard))
    return table.column("text").to_pylist(), table.column("blank").to_numpy(zero_copy_only=False)


def part_path(folder: Path, shard: int) -> Path:
    return folder / PART.format(shard)


def pending_shards(folder: Path, layout: ShardLayout) -> list[int]:
    """The shards without a part: what is left to encode."""
    return [s for s in range(layout.shards) if not part_path(folder, s).is_file()]


def contiguous_block(items: list[int], world: int, rank: int) -> list[int]:
    """Rank ``rank``'s block of ``items`` among ``world`` processes: contiguous, sizes differing by at most one."""
    n = len(items)
    return items[rank * n // world:(rank + 1) * n // world]


def write_part(folder: Path, shard: int, columns: dict) -> Path:
    """One shard's output as ``part-<shard>.parquet``, complete or not at all. ``columns``: ``row`` [n],
    ``cluster`` [n] (-1: a row without text, stored as null), ``confidence``, ``margin`` [n] (NaN: null),
    ``top_words`` [n] and optionally ``embedding`` [n, d] (stored float16)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cluster = np.asarray(columns["cluster"])
    missing = cluster < 0
    arrays = {
        "row": pa.array(np.asarray(columns["row"], dtype=np.int64)),
        "cluster": pa.array(cluster.astype(np.int32), mask=missing),
        "confidence": pa.array(np.asarray(columns["confidence"], dtype=np.float64), mask=missing),
        "margin": pa.array(np.asarray(columns["margin"], dtype=np.float64), mask=missing),
        "top_words": pa.array(list(columns["top_words"]), type=pa.string()),
    }
    if "embedding" in columns:
        embedding = np.asarray(columns["embedding"], dtype=np.float16)  # [n, d]
        arrays["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(embedding.reshape(-1)), embedding.shape[1])
    path = part_path(folder, shard)
    table = pa.table(arrays)
    with writing(path):
        atomic_write(path, lambda handle: pq.write_table(table, handle))
    return path


def read_part(folder: Path, shard: int, columns: list[str] | None = None):
    import pyarrow.parquet as pq

    return pq.read_table(part_path(folder, shard), columns=columns)


def summarise(folder: Path, layout: ShardLayout, assigned_by: str) -> dict:
    """``rows``, ``assigned``, ``assigned_by``, ``per_cluster`` and the first ten rows without text (``blank_rows``)
    from the parts, which must all exist."""
    missing = pending_shards(folder, layout)
    if missing:
        raise ShardFolderError(f"'{folder}': the parts of shards {missing[:10]} are missing after every process "
                               "finished; rerun the same command to encode them.")
    counts: dict[int, int] = {}
    blank_rows: list[int] = []
    blanks = 0
    for shard in range(layout.shards):
        table = read_part(folder, shard, ["row", "cluster"])
        cluster = table.column("cluster")
        valid = cluster.drop_null().to_numpy()
        ids, n = np.unique(valid, return_counts=True)
        for k, c in zip(ids.tolist(), n.tolist()):
            counts[k] = counts.get(k, 0) + c
        empty = cluster.is_null().to_numpy(zero_copy_only=False)
        blanks += int(empty.sum())
        if len(blank_rows) < 10:
            blank_rows += table.column("row").to_numpy()[empty][:10 - len(blank_rows)].tolist()
    return {"rows": layout.rows, "assigned": layout.rows - blanks, "assigned_by": assigned_by,
            "per_cluster": dict(sorted(counts.items())), "blank_rows": blank_rows, "blanks": blanks}


def assembled_tables(folder: Path, layout: ShardLayout, text_column: str, assigned_by: str, embeddings: bool):
    """The output table shard by shard, in row order: ``row``, the text, ``cluster``, ``confidence``, ``margin``,
    ``assigned_by``, ``top_words`` (and ``embedding``); one shard in memory at a time."""
    import pyarrow as pa

    for shard in range(layout.shards):
        part = read_part(folder, shard)
        texts, _ = read_text_shard(folder, shard)
        columns = {"row": part.column("row"), text_column: pa.array(texts, type=pa.string()),
                   "cluster": part.column("cluster"), "confidence": part.column("confidence"),
                   "margin": part.column("margin"),
                   "assigned_by": pa.array([assigned_by] * len(texts), type=pa.string()),
                   "top_words": part.column("top_words")}
        if embeddings:
            columns["embedding"] = part.column("embedding")
        yield pa.table(columns)


def write_assembled(path: Path, tables) -> None:
    """The tables of :func:`assembled_tables` as one CSV (as the csv module writes it: quotes only where needed,
    empty cells for the rows without text) or Parquet file, complete or not at all."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = path.suffix.lower() == ".parquet"

    def write(handle) -> None:
        writer, first = None, True
        for table in tables:
            if parquet:
                writer = writer or pq.ParquetWriter(handle, table.schema)
                writer.write_table(table)
                continue
            frame = table.to_pandas(types_mapper={pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}.get)
            handle.write(frame.to_csv(index=False, header=first, lineterminator="\r\n").encode("utf-8"))
            first = False
        if writer is not None:
            writer.close()

    with writing(path):
        atomic_write(path, write)


def rows_as_dicts(tables) -> list[dict]:
    """The assembled rows as dicts, as the one-process ``predict`` returned them: an empty string for the cluster,
    confidence and margin of a row without text."""
    out = []
    for table in tables:
        for row in table.to_pylist():
            if row["cluster"] is None:
                row.update(cluster="", confidence="", margin="")
            out.append(row)
    return out


def remove_folder(folder: Path) -> None:
    """The parts of an output file once it is assembled (they would double the space it takes)."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
