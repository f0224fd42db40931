"""The embedded Kafka-protocol broker: noida-db's binary with only its Kafka service."""

from __future__ import annotations

from pathlib import Path

from deploy.stack.process import start_server, stop_server

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

    def command(port: int) -> list[str]:
        return [
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

    pid, port, started = start_server(
        root,
        "kafka",
        MARKER,
        command,
        lambda p: probe(_brokers(p), 1.0)[0],
        port=port,
        timeout_s=60,
    )
    return {"pid": pid, "port": port, "brokers": _brokers(port), "started": started}


def _brokers(port: int) -> str:
    return f"127.0.0.1:{port}"


def stop(root: Path) -> bool:
    # noida-db saves its state on SIGTERM (2-5 s).
    return stop_server(root, "kafka", MARKER, timeout_s=30)
