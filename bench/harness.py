"""What every benchmark does around its measurement: options declared once as a pydantic model
(the flags of ``worldmm bench NAME`` and ``python -m bench.MODULE``: :func:`main`), the
services (:func:`stack_or_start`), the run's metadata stamped into every report (:class:`Run`),
summary figures, and the JSON report and figures written beside it."""

from __future__ import annotations

import contextvars
import inspect
import json
import math
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar, get_args, get_origin

import numpy as np
import typer
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from worldmm.settings import Settings

REPO = Path(__file__).resolve().parents[1]
Echo = Callable[[str], None]
# The command line of the benchmark being run (set by Bench; None when called from Python).
_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("command", default=None)
_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def words(text: str) -> tuple[str, ...]:
    """The comma-separated names in ``text`` (a long list of names kept readable)."""
    return tuple(w.strip() for w in text.split(","))


def stamped_echo() -> Echo:
    """Progress lines on stderr, prefixed with the seconds since this call."""
    t0 = time.perf_counter()
    return lambda msg: print(
        f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True
    )


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation); None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def summary(
    values: Sequence[float],
    *,
    qs: Sequence[int] = (50, 95),
    digits: int = 2,
    scale: float = 1.0,
    suffix: str = "",
) -> dict[str, float | int]:
    """``p50``, ``p95`` (one per ``qs``), ``mean`` and ``max`` of ``values`` times ``scale``,
    rounded, each key ending in ``suffix`` (``p95_ms``), and ``n``; only ``n`` when empty."""
    a = np.asarray(values, dtype=np.float64) * scale
    if a.size == 0:
        return {"n": 0}
    stats = {f"p{q}": np.percentile(a, q) for q in qs} | {"mean": a.mean(), "max": a.max()}
    return {**{k + suffix: round(float(v), digits) for k, v in stats.items()}, "n": int(a.size)}


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (a busy machine makes slow figures)."""
    return [round(x, 2) for x in os.getloadavg()]


def settle(
    echo: Echo,
    *,
    below: float = 1.0,
    timeout_s: float = 600.0,
    poll_s: float = 5.0,
    load: Callable[[], float] = lambda: os.getloadavg()[0],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait until the 1-minute load average is under ``below`` (what a bulk load's index
    builds and autovacuum leave behind would otherwise be timed), at most ``timeout_s``; the
    wait and the load it ended at, with ``settled`` False when the time ran out."""
    started = clock()
    last_said = -math.inf
    while (now := load()) >= below:
        waited = clock() - started
        if waited >= timeout_s:
            echo(f"load {now:.2f} still at or above {below} after {waited:.0f} s: measuring anyway")
            return {"waited_s": round(waited, 1), "load": round(now, 2), "settled": False}
        if waited - last_said >= 60:
            echo(f"waiting for the load ({now:.2f}) to fall under {below}")
            last_said = waited
        sleep(poll_s)
    return {"waited_s": round(clock() - started, 1), "load": round(now, 2), "settled": True}


def git_commit() -> str | None:
    """The checkout's commit, ``+dirty`` when tracked files differ from it; None without git."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
        done.check_returncode()
        return done.stdout.strip()

    try:
        return git("rev-parse", "HEAD") + ("+dirty" if git("status", "--porcelain", "-uno") else "")
    except (OSError, subprocess.SubprocessError):
        return None


class Run:
    """One run's metadata: taken when it starts, stamped into its report by :meth:`stamp`."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self.loadavg_start = loadavg()
        self.command = _COMMAND.get()

    def stamp(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with the command, commit, UTC start, wall time and the machine (fields
        the benchmark put under ``machine`` are kept)."""
        machine = {
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_start": self.loadavg_start,
            "loadavg_end": loadavg(),
        }
        result["command"], result["commit"] = self.command, git_commit()
        result["started_at"] = self.started_at
        result["wall_s"] = round(time.perf_counter() - self.t0, 1)
        result["machine"] = machine | result.get("machine", {})
        return result


def write_report(result: dict[str, Any], out: Path | None, *, show: bool = True) -> None:
    """Write the JSON report to ``out`` (its folder made) and, with ``show``, to stdout."""
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    if show:
        print(text)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (figures are written to files, never shown)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Lay ``fig`` out, write it to ``path`` (PNG, its folder made) and close it."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


_URL_FIELDS = {"kafka": "kafka_brokers", "postgres": "database_url", "redis": "redis_url"}


@contextmanager
def stack_or_start(
    settings: Settings,
    echo: Echo,
    *,
    need: Sequence[str] = ("postgres", "redis"),
    keep: bool = False,
    stack: Any = None,
) -> Iterator[Settings]:
    """``settings`` with the URL of every service in ``need`` set and the database migrated:
    the configured service, else the running embedded one, else the embedded stack is started
    here. On exit the servers this call started are stopped, by PID, unless ``keep``; others
    are never touched. ``stack`` stands in for :mod:`deploy.stack` (tests pass a fake)."""
    from worldmm.store.migrate import apply_migrations

    if stack is None:
        from deploy import stack
    started: list[str] = []
    try:
        urls = {_URL_FIELDS[n]: getattr(stack, _URL_FIELDS[n])(settings) for n in need}
    except stack.StackError:
        echo(f"starting the embedded stack in {settings.resolved_state_dir}")
        up = stack.up(settings)
        started = up.started
        urls = {field: getattr(up, field) for field in _URL_FIELDS.values()}
    if "redis_url" in urls:
        urls["redis_url"] = urls["redis_url"] or "none"  # disabled: graphs from the database
    resolved = settings.model_copy(update=urls)
    try:
        apply_migrations(resolved.database_url, resolved)
        yield resolved
    finally:
        if started and not keep:
            echo(f"stopping the embedded {', '.join(started)} this run started")
            stack.down(settings, only=started)


def report_on_stack(
    out: Path | None,
    measure: Callable[[Settings, Echo], dict[str, Any]],
    *,
    need: Sequence[str] = ("postgres", "redis"),
    keep: bool = False,
) -> dict[str, Any]:
    """``measure(settings, echo)`` on :func:`stack_or_start`'s services; its report written."""
    from worldmm.settings import load_settings

    echo = stamped_echo()
    with stack_or_start(load_settings(), echo, need=need, keep=keep) as settings:
        result = measure(settings, echo)
    write_report(result, out)
    return result


# A comma-separated flag (``--batches 1,4,8``) as a tuple.
_Commas = BeforeValidator(
    lambda v: [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v
)
IntList = Annotated[tuple[int, ...], _Commas]
StrList = Annotated[tuple[str, ...], _Commas]


class Options(BaseModel):
    """A benchmark's options: every field with a description is a flag (``--field-name``,
    the description its help); fields without one are set from Python only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out: Path | None = Field(None, description="Where to write the JSON report.")


OptionsT = TypeVar("OptionsT", bound=Options)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def command_line(prog: str, options: Options) -> str:
    """``prog`` and every flag with its value: the run can be repeated from its report."""
    argv = [prog]
    for name, field in type(options).model_fields.items():
        value = getattr(options, name)
        if not field.description or value is None or value is field.default is False:
            continue
        if isinstance(value, bool):
            argv.append(_flag(name) if value else "--no-" + _flag(name)[2:])
        else:
            listed = isinstance(value, list | tuple)
            argv += [_flag(name), ",".join(map(str, value)) if listed else str(value)]
    return " ".join(argv)


class Bench(Generic[OptionsT]):
    """A benchmark's entry point, made by :func:`main`: ``main()`` as ``python -m``,
    ``main(argv)`` from Python (returns the body's result, raises its errors), ``main.app``
    for ``worldmm bench``."""

    def __init__(
        self, options: type[OptionsT], body: Callable[[OptionsT], Any], required: Sequence[str]
    ):
        self.options, self.body = options, body
        spec = sys.modules[body.__module__].__spec__  # "__main__" under python -m
        self.prog = f"python -m {spec.name if spec else body.__module__}"
        params = [inspect.Parameter("ctx", _KEYWORD, annotation=typer.Context)]
        for name, field in options.model_fields.items():
            if not field.description:
                continue
            kind, default = field.annotation, None if field.default_factory else field.default
            if any(get_origin(a) in (list, tuple) for a in (kind, *get_args(kind))):
                kind, default = str | None, ",".join(map(str, default)) if default else None
            if name in required or field.is_required():
                default = ...
            option = typer.Option(help=field.description, show_default=default is not None)
            flag = Annotated[kind, option]
            params.append(inspect.Parameter(name, _KEYWORD, default=default, annotation=flag))

        def run(ctx: typer.Context, **given: Any) -> Any:
            try:  # a flag left out is left to the model's default
                opts = self.options(**{k: v for k, v in given.items() if v is not None})
            except ValidationError as exc:
                problems = [
                    (f"{_flag(str(e['loc'][0]))}: " if e["loc"] else "")
                    + e["msg"].removeprefix("Value error, ")
                    for e in exc.errors()
                ]
                raise typer.BadParameter("; ".join(problems)) from None
            token = _COMMAND.set(command_line(ctx.command_path, opts))
            try:
                return self.body(opts)
            finally:
                _COMMAND.reset(token)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        self.app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        self.app.command(help=" ".join((inspect.getdoc(body) or "").split()))(run)

    def __call__(self, argv: Sequence[str] | None = None) -> Any:
        command = typer.main.get_command(self.app)
        if argv is None:
            return command.main(prog_name=self.prog)
        return command.main(list(argv), prog_name=self.prog, standalone_mode=False)


def main(
    options: type[OptionsT], *, required: Sequence[str] = ("out",)
) -> Callable[..., Bench[OptionsT]]:
    """Decorate a benchmark's body (``body(options) -> result``, its docstring the help) into
    its entry point, flags from ``options``; ``required`` flags must be given."""
    return lambda body: Bench(options, body, required)
