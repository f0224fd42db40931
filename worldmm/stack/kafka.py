"""The embedded Kafka-protocol broker: noida-db's binary with only its Kafka service."""

from __future__ import annotations

from pathlib import Path

from worldmm.stack.process import (
    free_port,
    pid_alive,
    read_pid,
    start_detached,
    stop_pid,
    wait_until,
)

MARKER = "noida-db"


def broker_binary() -> Path:
    # Run the binary itself, not the Python console script: a signal to the script's PID
    # would not reach the broker it spawns.
    import noida_db

    path = Path(noida_db.__file__).with_name("noida-db")
    if not path.exists():
        raise FileNotFoundError(f"noida-db binary missing at {path}; reinstall noida-db")
    return path


def probe(brokers: str, timeout_s: float = 3.0) -> tuple[bool, str]:
    """A real Kafka metadata request; returns (ok, detail)."""
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient({"bootstrap.servers": brokers, "socket.timeout.ms": 2000})
        meta = admin.list_topics(timeout=timeout_s)
        return bool(meta.brokers), f"{len(meta.brokers)} broker(s)"
    except Exception as exc:  # noqa: BLE001 - any client failure means "not answering"
        return False, str(exc)


def start(root: Path, port: int | None = None) -> dict:
    """Start (or find running) the broker under ``root``; return its record."""
    root.mkdir(parents=True, exist_ok=True)
    pid_file = root / "kafka.pid"
    pid = read_pid(pid_file)
    record_file = root / "port"
    if pid and pid_alive(pid, MARKER) and record_file.exists():
        port = int(record_file.read_text())
        return {"pid": pid, "port": port, "brokers": f"127.0.0.1:{port}", "started": False}
    port = port or free_port()
    cmd = [
        str(broker_binary()),
        "start",
        "--only",
        "kafka",
        "--host",
        "127.0.0.1",
        "--kafka-port",
        str(port),
        "--data-dir",
        str(root / "data"),
    ]
    pid = start_detached(cmd, log_file=root / "kafka.log", pid_file=pid_file)
    record_file.write_text(str(port))
    brokers = f"127.0.0.1:{port}"
    wait_until(lambda: probe(brokers, 1.0)[0], timeout_s=60, what=f"Kafka broker on {brokers}")
    return {"pid": pid, "port": port, "brokers": brokers, "started": True}


def stop(root: Path) -> bool:
    pid = read_pid(root / "kafka.pid")
    # noida-db saves its state on SIGTERM (2-5 s).
    stopped = bool(pid) and stop_pid(pid, marker=MARKER, timeout_s=30)
    (root / "kafka.pid").unlink(missing_ok=True)
    return stopped
