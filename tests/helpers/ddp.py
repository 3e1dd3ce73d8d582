"""Running a test function in several CPU processes joined by a gloo process group."""
from __future__ import annotations

import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, fn, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        fn(rank, world, out_dir)
    finally:
        dist.destroy_process_group()


def spawn_gloo(fn, world: int, out_dir) -> None:
    """Call ``fn(rank, world, out_dir)`` in ``world`` processes inside one gloo group.

    ``fn`` must be a module-level function (it is pickled into the children); it reports back by
    writing files into ``out_dir``.
    """
    mp.spawn(_entry, args=(fn, world, _free_port(), str(out_dir)), nprocs=world, join=True)
