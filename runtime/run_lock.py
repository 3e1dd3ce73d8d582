"""One folder, one run (docs/reliability.md "Two runs aimed at one folder").

Two runs writing one folder (the same ``hydra.run.dir``, a job started twice, two sweeps with the same
``hydra.sweep.dir``) would overwrite each other's checkpoints and results.json. A run therefore holds
``<folder>/run.lock`` while it writes there: JSON naming its process (pid, host, when it started, the
process's own start time, its SLURM job and restart count, the command). Another run that finds the lock:

- held by a live process on this host: refuses with one line naming that process;
- held by a process that is gone (a dead pid on this host, or a pid since reused by another program):
  the lock is stale; it is taken over, and the log says so;
- held on another host: the process cannot be checked from here, so the run refuses, unless the holder is
  an earlier attempt of this same SLURM job (a requeued job is the same run: its restart count is lower);
  the message says which file to delete once that host's run is known to be gone.

A folder that holds an earlier run's results.json or last.ckpt is continued only when asked: with
``ckpt_path`` (a resume, SLURM's requeue record) or, in a multirun, by the same job of a resumed sweep.

Only the process that launches a run takes the lock: the other ranks of a DDP job (``LOCAL_RANK``,
``RANK``, ``SLURM_PROCID`` > 0, set by the launcher before any process group exists) are the same run.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

from runtime.interrupt import slurm_job_id
from textcore import run_folder
from textcore.atomic_files import atomic_write_text
from textcore.errors import UserError

log = logging.getLogger(__name__)


class FolderInUseError(UserError):
    """Another run writes the folder, or it holds an earlier run that this one was not asked to continue."""


def launch_rank(env=None) -> int:
    """This process's rank among the processes of its run, as the launcher set it before any process group
    exists (torchrun ``RANK``, SLURM ``SLURM_PROCID``, Lightning's children ``LOCAL_RANK`` / ``NODE_RANK``);
    0 for a process on its own."""
    env = os.environ if env is None else env
    for key in ("RANK", "SLURM_PROCID"):
        if env.get(key, "").strip().isdigit():
            return int(env[key])
    return max((int(env[key]) for key in ("LOCAL_RANK", "NODE_RANK") if env.get(key, "").strip().isdigit()),
               default=0)


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (Linux ``/proc``): with the pid it names one
    process, so a pid reused by another program is not taken for the run. None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22, counted after the command name


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return True
    return state not in ("Z", "X")


def restart_count(env=None) -> int:
    env = os.environ if env is None else env
    value = env.get("SLURM_RESTART_COUNT", "0").strip()
    return int(value) if value.isdigit() else 0


def this_process(env=None) -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "started": time.time(), "process_start": process_start(pid),
            "slurm_job": slurm_job_id(env), "slurm_restart": restart_count(env),
            "command": " ".join(["python", *[Path(sys.argv[0]).name if i == 0 else a for i, a in enumerate(sys.argv)]])}


def holder_state(holder: dict, me: dict) -> str:
    """``self`` (this process), ``live``, ``stale`` (gone), ``requeued`` (an earlier attempt of this SLURM job)
    or ``unknown`` (another host: cannot be checked)."""
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return "stale"  # not a lock this code wrote (damaged, empty): nothing to protect
    same_job = holder.get("slurm_job") is not None and holder.get("slurm_job") == me.get("slurm_job")
    if holder.get("host") != me["host"]:
        if same_job and int(holder.get("slurm_restart") or 0) < me["slurm_restart"]:
            return "requeued"
        return "unknown"
    if pid == me["pid"] and holder.get("process_start") == me["process_start"]:
        return "self"
    if not pid_alive(pid):
        return "stale"
    start = holder.get("process_start")
    if start is not None and process_start(pid) not in (None, start):
        return "stale"  # the pid now belongs to another process
    if same_job and int(holder.get("slurm_restart") or 0) < me["slurm_restart"]:
        return "requeued"
    return "live"


def describe_holder(holder: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["started"])) \
        if isinstance(holder.get("started"), (int, float)) else "at an unknown time"
    job = f", SLURM job {holder['slurm_job']}" if holder.get("slurm_job") else ""
    return f"pid {holder.get('pid')} on host {holder.get('host')}{job}, started {when} (`{holder.get('command', '?')}`)"


@contextlib.contextmanager
def _exclusive(folder: Path):
    """Only one process at a time reads, judges and replaces the lock of ``folder`` (an advisory lock on the folder
    itself, gone with the process; a no-op where the platform has none)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class FolderLock:
    """``<folder>/run.lock`` for as long as a run (``what="run"``) or a sweep (``what="sweep"``) writes the folder.

    ``key`` is the setting that points a run elsewhere (``hydra.run.dir``, ``hydra.sweep.dir``), named by the
    refusals. :meth:`acquire` raises :class:`FolderInUseError` or returns; :meth:`release` removes the file if it
    is still this process's.
    """

    def __init__(self, folder: str | os.PathLike, what: str = "run", key: str = "hydra.run.dir", env=None,
                 record: dict | None = None):
        self.folder = Path(folder)
        self.path = self.folder / run_folder.LOCK
        self.what = what
        self.key = key
        self.me = {**this_process(env), **(record or {})}  # record: e.g. a multirun job's overrides
        self.held = False
        self.taken_over: dict | None = None

    def holder(self) -> dict | None:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return holder if isinstance(holder, dict) else {}

    def check(self) -> dict | None:
        """Raises :class:`FolderInUseError` when a live process (or one that cannot be checked) holds the folder;
        else returns the stale or requeued holder to take over (None: no lock)."""
        holder = self.holder()
        if holder is None:
            return None
        state = holder_state(holder, self.me)
        who = describe_holder(holder)
        if state == "live":
            raise FolderInUseError(
                f"the {self.what} folder '{self.folder}' is in use by another {self.what}: {who}. Two "
                f"{self.what}s in one folder would overwrite each other's checkpoints and {run_folder.RESULTS}. Wait "
                f"for it to end (then continue it with ckpt_path=<its {run_folder.LAST_CHECKPOINT}>), stop it, or "
                f"write elsewhere with `{self.key}=<folder>`.")
        if state == "unknown":
            raise FolderInUseError(
                f"the {self.what} folder '{self.folder}' is held by {who}, another host, where this "
                f"process cannot check whether it still runs. Write elsewhere with `{self.key}=<folder>`; if that "
                f"run is gone (its node failed), delete '{self.path}' and start again.")
        return holder if state in ("stale", "requeued") else None

    def acquire(self) -> dict | None:
        """Takes the folder; returns the lock it took over (a process that is gone, or an earlier attempt of this
        SLURM job: what that process recorded, also kept as :attr:`taken_over`), None when there was none."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with _exclusive(self.folder):
            holder = self.check()
            if holder is not None:
                how = "an earlier attempt of this SLURM job (requeued)" if holder_state(holder, self.me) == \
                    "requeued" else "a process that is gone"
                log.warning("%s folder %s: taking over the lock of %s: %s", self.what, self.folder, how,
                            describe_holder(holder) if holder else "an unreadable run.lock")
            atomic_write_text(self.path, json.dumps(self.me, indent=2))
        self.held = True
        self.taken_over = holder
        return holder

    def note(self, **fields) -> None:
        """Adds ``fields`` to the held lock's record (e.g. the checkpoint the run starts from, which the other
        ranks of a DDP run read there)."""
        self.me.update(fields)
        if self.held:
            atomic_write_text(self.path, json.dumps(self.me, indent=2))

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with contextlib.suppress(OSError):
            holder = self.holder() or {}
            if holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]:
                self.path.unlink()

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def gone_holder(holder: dict | None, me: dict | None = None) -> str | None:
    """Why the process a lock record names no longer runs (``holder_state`` stale or requeued), e.g. ``pid 42 on host
    n1 is gone``; None when it may still run (live, another host) or there is no record."""
    if not holder:
        return None
    state = holder_state(holder, me or this_process())
    who = f"pid {holder.get('pid')} on host {holder.get('host')}"
    if state == "stale":
        return f"{who} is gone"
    if state == "requeued":
        return f"{who} was an earlier attempt of SLURM job {holder.get('slurm_job')}"
    return None


def results_status(folder: str | os.PathLike) -> str | None:
    """The ``status`` of the results.json in ``folder`` (``finished`` for files written before it had one), or None
    without one."""
    try:
        results = run_folder.RunFolder(folder).results()
    except run_folder.RunFileError:
        return "unreadable"
    return None if results is None else str(results.get("status", "finished"))


def earlier_run(folder: str | os.PathLike) -> str | None:
    """What an earlier run left in ``folder`` that a new run would replace (its results.json, its last.ckpt),
    or None."""
    folder = Path(folder)
    found = []
    status = results_status(folder)
    if status is not None:
        found.append(f"{run_folder.RESULTS} (status {status})")
    if run_folder.RunFolder(folder).has(run_folder.LAST_CHECKPOINT):
        found.append(run_folder.LAST_CHECKPOINT)
    return " and ".join(found) or None


def refuse_earlier_run(folder: str | os.PathLike, found: str, key: str = "hydra.run.dir") -> FolderInUseError:
    folder = Path(folder)
    last = run_folder.RunFolder(folder).checkpoint_path()
    resume = f"ckpt_path={last} (with that run's overrides)" if last.is_file() else "ckpt_path=<its checkpoint>"
    return FolderInUseError(
        f"the run folder '{folder}' holds an earlier run ({found}); a new run there would replace its checkpoint and "
        f"results. To continue that run: {resume}; to start a new one, write elsewhere with `{key}=<folder>` (or "
        "move those files away).")
