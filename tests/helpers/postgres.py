"""A private PostgreSQL server for a test: a cluster in a temporary folder (initdb), on a free port, started with
pg_ctl and stopped after; as an unprivileged user when the tests run as root (PostgreSQL refuses root)."""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _binaries() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_user() -> tuple[str | None, dict]:
    """(the user to run the server as, when this process is root; the environment)."""
    if os.geteuid() != 0:
        return None, dict(os.environ)
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name, dict(os.environ)
    return None, dict(os.environ)


def _run(cmd: list[str], user: str | None, **kwargs) -> subprocess.CompletedProcess:
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)


@contextlib.contextmanager
def postgres_server():
    """Yields a URL ``postgresql+psycopg://<user>@127.0.0.1:<port>/postgres`` of a new server, or raises
    RuntimeError with the reason no server could be started (the caller skips)."""
    bin_dir = _binaries()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (initdb not found; Debian: apt-get install postgresql)")
    user, _ = _as_user()
    if os.geteuid() == 0 and user is None:
        raise RuntimeError("running as root without a postgres or nobody user to run the server as")
    # a folder of its own in the system's temporary folder: pytest's tmp_path is closed to other users
    folder = Path(tempfile.mkdtemp(prefix="ctclust-pg-"))
    data = folder / "pgdata"
    if user is not None:
        shutil.chown(folder, user=user)
        folder.chmod(0o755)
    db_user = user or pwd.getpwuid(os.geteuid()).pw_name
    made = _run([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", db_user], user)
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {(made.stderr or made.stdout).strip().splitlines()[-1:]}")
    port = _free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    started = _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "server.log"),
                    "-w", "start"], user)
    if started.returncode != 0:
        log = (folder / "server.log").read_text(errors="replace") if (folder / "server.log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()[-300:]} {log[-300:]}")
    try:
        yield f"postgresql+psycopg://{db_user}@127.0.0.1:{port}/postgres"
    finally:
        _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], user)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def postgres_url_or_skip():
    """The URL of a :func:`postgres_server` for the block; the test is skipped, with the reason, where none starts."""
    import pytest

    server = postgres_server()
    try:
        url = server.__enter__()
    except RuntimeError as err:
        pytest.skip(f"no PostgreSQL server could be started: {err}")
    try:
        yield url
    finally:
        server.__exit__(None, None, None)
