"""Reading an offline W&B run (``offline-run-*/run-*.wandb``) without the network.

The file is W&B's record log: a 7-byte header (":W&B", magic, version), then 32 KiB blocks of
chunks, each with a 7-byte header (crc32, length, type: 1 full, 2 first, 3 middle, 4 last);
chunks join into protobuf ``Record`` messages (wandb.proto.wandb_internal_pb2).
"""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

BLOCK = 32768
HEADER = 7


def records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B record file"
    out, pos, buffer = [], HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        pos += HEADER
        if pos + length > len(data):  # still being written
            break
        if kind == 0 and length == 0:
            continue
        buffer += data[pos:pos + length]
        pos += length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(buffer)
            out.append(record)
            buffer = b""
    return out


def wait_until_written(run_dir: Path, timeout: float = 60.0) -> None:
    """W&B's writer process may still be flushing after ``wandb.finish()`` returns in this process:
    wait for the run's ``exit`` record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        paths = list(Path(run_dir).glob("*.wandb"))
        if paths and any(r.WhichOneof("record_type") == "exit" for r in records(paths[0])):
            return
        time.sleep(0.5)
    raise AssertionError(f"{run_dir}: no exit record after {timeout} s")


def offline_run(run_dir: Path) -> dict:
    """group, job_type, the final summary (key -> value) and history keys of one offline run."""
    wait_until_written(run_dir)
    (path,) = list(Path(run_dir).glob("*.wandb"))
    info = {"group": None, "job_type": None, "summary": {}, "history_keys": set()}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            info["group"], info["job_type"] = record.run.run_group, record.run.job_type
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or ".".join(item.nested_key)
                info["summary"][key] = json.loads(item.value_json)
        elif kind == "history":
            info["history_keys"] |= {item.key or ".".join(item.nested_key) for item in record.history.item}
    return info
