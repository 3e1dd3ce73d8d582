"""A DDP rank that dies (the out-of-memory killer, a node fault, SIGKILL) ends the others within a bounded time,
with a message naming it and the checkpoint to resume from (docs/reliability.md "Faults of many processes").

Without this the other ranks wait for it in their next collective until the process group's timeout (Lightning's:
30 minutes), holding their GPUs, and their log says nothing of which rank died. Three parts:

- **the process-group timeout** (``ddp.timeout_minutes``, conf/config.yaml): a strategy named ``ddp`` becomes a
  ``DDPStrategy`` with it, so a collective that waits longer fails; for NCCL the backend's own watchdog enforces
  it (``TORCH_NCCL_ASYNC_ERROR_HANDLING``) and its heartbeat monitor aborts a stuck watchdog within the same
  bound (``TORCH_NCCL_ENABLE_MONITORING``, ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``), unless the environment sets them;
- **the watch** (:class:`RankWatch`, a callback of every run): at set-up the ranks exchange their pid and host
  (one collective); until training ends, a thread checks them every second: a rank of this host whose process is
  gone, a child process of Lightning's launcher that exited with an error, or a rank whose heartbeat file
  (``<run>/.ranks/<rank>.json``, touched every ``ddp.heartbeat_seconds``) is 6 periods older than this rank's (a
  frozen process, or a node fault on another host). Lightning's
  own observer of its child processes, which kills every process at once without a word, is replaced by it;
- **the message**: when a collective fails because a rank died (gloo notices at once), the run's lifecycle
  (``ctclust.training.lifecycle``) names it; when this rank is stuck where nothing fails soon (NCCL waits for the
  timeout), the watch reports after a short grace and ends the process itself. The checkpoint named is the last
  complete one: every save is atomic, and its step is read from the file.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable

from lightning.pytorch.callbacks import Callback

from runtime.run_lock import pid_alive, process_start
from textcore.errors import ConfigError, UserError

log = logging.getLogger(__name__)

HEARTBEATS = ".ranks"
# strategy names Lightning knows that are DDP with subprocesses, and what they add to DDPStrategy
DDP_STRATEGIES = {"ddp": {}, "ddp_find_unused_parameters_true": {"find_unused_parameters": True},
                  "ddp_find_unused_parameters_false": {"find_unused_parameters": False}}
STALE_HEARTBEATS = 6  # a rank of another host is dead once its heartbeat is this many periods older than ours


class RankDiedError(UserError):
    """Another rank of this DDP run died; the message names it and the checkpoint to resume from."""


def settings(cfg) -> tuple[float, float]:
    """``ddp.timeout_minutes`` and ``ddp.heartbeat_seconds`` of a config, checked."""
    ddp = cfg.get("ddp") or {}
    out = []
    for key, default in (("timeout_minutes", 10.0), ("heartbeat_seconds", 10.0)):
        value = ddp.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
            raise ConfigError(f"ddp.{key}={value}: must be a finite number > 0 (conf/config.yaml, default {default})")
        out.append(float(value))
    return out[0], out[1]


def ddp_strategy(name: str, timeout_minutes: float):
    """The ``DDPStrategy`` that Lightning builds for ``name``, with the process-group timeout; the NCCL watchdog's
    settings follow it unless the environment sets them (children inherit them)."""
    from lightning.pytorch.strategies import DDPStrategy

    seconds = max(1, round(60 * timeout_minutes))
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")  # a timed-out collective ends the process
    os.environ.setdefault("TORCH_NCCL_ENABLE_MONITORING", "1")
    os.environ.setdefault("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", str(max(60, seconds)))
    return DDPStrategy(timeout=timedelta(seconds=seconds), **DDP_STRATEGIES[name])


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}" + (" (the out-of-memory killer sends it, as does a node fault)"
                                      if -returncode == signal.SIGKILL else "")
    return f"exited with status {returncode}"


def checkpoint_step(path: str | os.PathLike | None) -> int | None:
    """The step a checkpoint file holds (memory-mapped: its tensors are not read), or None if it cannot be read."""
    if path is None:
        return None
    from textcore.run_folder import load_checkpoint

    try:
        return int(load_checkpoint(path)["global_step"])
    except Exception:  # noqa: BLE001 - the step is a detail of the message; its absence is said by the caller
        return None


class RankWatch(Callback):
    """Watches the other ranks of a DDP run (module docstring). ``report`` (set by the lifecycle) takes the dead
    ranks' description and returns the error to report: it writes what a stopped run writes."""

    def __init__(self, folder: str | os.PathLike, heartbeat_seconds: float = 10.0, poll_seconds: float = 1.0,
                 grace_seconds: float = 5.0):
        self.dir = Path(folder) / HEARTBEATS
        self.heartbeat_seconds = heartbeat_seconds
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        self.rank = 0
        self.world = 1
        self.peers: dict[int, dict] = {}
        self.children: list = []  # Lightning's launcher: the Popen of ranks 1.. of this node (rank 0 only)
        self.handling = threading.Event()  # the main thread is handling a failure (the lifecycle reports it)
        self.report: Callable[[str], BaseException] | None = None
        self.exit = os._exit  # tests replace it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- Lightning's launcher ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def observing_children(self):
        """While the block runs, Lightning's launcher hands its child processes to this watch instead of starting
        its own observer (which SIGKILLs every process, this one too, without a message)."""
        try:
            from lightning.pytorch.strategies.launchers import subprocess_script
        except ImportError:  # pragma: no cover - Lightning without the subprocess launcher
            yield
            return
        if not hasattr(subprocess_script, "_launch_process_observer"):
            log.debug("Lightning's launcher has no _launch_process_observer: its own observer stays")
            yield
            return
        original = subprocess_script._launch_process_observer
        subprocess_script._launch_process_observer = self.children.extend
        try:
            yield
        finally:
            subprocess_script._launch_process_observer = original

    # -- hooks --------------------------------------------------------------------------------------------
    def setup(self, trainer, pl_module, stage: str) -> None:
        if trainer.world_size <= 1 or stage != "fit":
            return
        import torch.distributed as dist

        self.rank, self.world = trainer.global_rank, trainer.world_size
        me = {"rank": self.rank, "pid": os.getpid(), "host": socket.gethostname(), "process_start":
              process_start(os.getpid())}
        table: list = [None] * self.world
        dist.all_gather_object(table, me)
        self.peers = {p["rank"]: p for p in table if p and p["rank"] != self.rank}
        self.start()

    def start(self) -> None:
        self._beat("running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rank-watch", daemon=True)
        self._thread.start()

    def on_train_end(self, trainer, pl_module) -> None:
        """From here on a rank may end before the others (rank 0 alone evaluates): the heartbeat says so."""
        if self.peers:
            self.stop()
            self._beat("done")

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.handling.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread = None

    def remove_heartbeats(self) -> None:
        """Rank 0, once the run has ended: a rank that finds no heartbeat file judges nothing by it."""
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    # -- what is dead ---------------------------------------------------------------------------------------
    def _file(self, rank: int) -> Path:
        return self.dir / f"{rank}.json"

    def _beat(self, state: str) -> None:
        with contextlib.suppress(OSError):
            self.dir.mkdir(parents=True, exist_ok=True)
            record = {"rank": self.rank, "pid": os.getpid(), "host": socket.gethostname(), "state": state}
            self._file(self.rank).write_text(json.dumps(record))

    def _record(self, rank: int) -> dict | None:
        try:
            return json.loads(self._file(rank).read_text())
        except (OSError, ValueError):
            return None

    def dead_peers(self, running: bool = False) -> dict[int, str]:
        """Rank -> how it ended, for every other rank found dead now. ``running``: only ranks whose heartbeat file
        says they had not finished training, since a rank that ended normally is gone too."""
        dead = {}
        by_pid = {p["pid"]: r for r, p in self.peers.items() if p.get("host") == socket.gethostname()}
        for child in self.children:
            code = child.poll()
            if code and child.pid in by_pid:
                dead[by_pid[child.pid]] = _how_it_ended(code)
        host = socket.gethostname()
        mine = self._file(self.rank)
        for rank, peer in self.peers.items():
            if rank in dead:
                continue
            record = self._record(rank)
            if running and (record is None or record.get("state") != "running"):
                continue  # ended normally, or no heartbeat to judge by
            if peer.get("host") == host:
                start = peer.get("process_start")
                if not pid_alive(peer["pid"]) or (start is not None and process_start(peer["pid"]) not in (None,
                                                                                                            start)):
                    dead[rank] = "is gone (killed, e.g. by the out-of-memory killer, or crashed)"
                    continue
            if running:  # alive but silent (stopped, frozen), or on a host whose processes cannot be seen from here
                with contextlib.suppress(OSError):
                    age = mine.stat().st_mtime - self._file(rank).stat().st_mtime
                    if age > STALE_HEARTBEATS * self.heartbeat_seconds:
                        dead[rank] = f"stopped responding: its heartbeat is {age:.0f} s old (a frozen or stopped " \
                                     "process, a node fault)"
        return dead

    def dead_peers_soon(self, seconds: float = 2.0) -> dict[int, str]:
        """:meth:`dead_peers` after a failed collective: a peer's connection may close a moment before the system
        shows its process as gone."""
        deadline = time.monotonic() + seconds
        while True:
            dead = self.dead_peers()
            if dead or time.monotonic() >= deadline:
                return dead
            time.sleep(0.2)

    def describe(self, dead: dict[int, str]) -> str:
        host = socket.gethostname()
        parts = []
        for rank, how in sorted(dead.items()):
            peer = self.peers.get(rank, {})
            where = "this host" if peer.get("host") == host else f"host {peer.get('host')}"
            parts.append(f"rank {rank} of {self.world} (pid {peer.get('pid')} on {where}) {how}")
        return "; ".join(parts)

    def kill_children(self) -> None:
        """Lightning's children that still run (waiting for the dead rank in a collective) end with this rank."""
        for child in self.children:
            if child.poll() is None:
                with contextlib.suppress(OSError):
                    child.kill()

    # -- the thread -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(self.poll_seconds):
            if time.monotonic() - last_beat >= self.heartbeat_seconds:
                self._beat("running")
                last_beat = time.monotonic()
            dead = self.dead_peers(running=True)
            if dead:
                self._report_dead_rank(dead)
                return

    def _report_dead_rank(self, dead: dict[int, str]) -> None:
        """A rank died: the main thread, if a collective failed, reports it (the lifecycle); if it has not begun to
        within the grace (stuck in a collective that only the timeout would end), the report is made here."""
        if self.handling.wait(self.grace_seconds) or self._stop.is_set():
            return
        description = self.describe(dead)
        try:
            error = self.report(description) if self.report is not None else RankDiedError(description)
            print(f"error: {error}", file=sys.stderr, flush=True)
        finally:
            self.kill_children()
            self.exit(2)
