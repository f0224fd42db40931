"""Secrets out of everything shown: URLs with their password replaced by ``***`` in command
output, logs and error messages, and a logging filter that does it for every record.

A URL's password is the only secret that travels inside a value people print (database and
Redis URLs); API keys are ``SecretStr`` settings and never reach a message whole.
"""

from __future__ import annotations

import logging
import re

MASK = "***"

# scheme://user:password@host (the user may be empty: redis://:password@host)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^\s:/@]*:)(?P<pw>[^\s@/]*)@", re.I)
# libpq key=value strings and URL query parameters: password=..., sslpassword=...
_PARAM_PASSWORD = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)(?P<pw>'[^']*'|[^\s&;,]+)", re.I)


def redact(text: str) -> str:
    """``text`` with every URL password and ``password=`` value replaced by ``***``."""
    if "@" not in text and "password" not in text.lower():
        return text  # the common case, without a regex pass
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", text)
    return _PARAM_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)


def has_credentials(text: str) -> bool:
    """Whether ``text`` holds a URL password or a ``password=`` value."""
    return redact(text) != text


class RedactingFilter(logging.Filter):
    """Put on a handler: a record whose message or traceback holds a URL password is
    rewritten with it masked (records without one pass untouched, their ``args`` kept for
    formatters that read them, such as uvicorn's access log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


LOG_FORMAT = "%(asctime)s %(name)s %(message)s"


def configure_logging(level: int | str) -> None:
    """The process's logging: one stderr handler at ``level`` that masks passwords."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    install_filter(logging.getLogger())


def install_filter(logger: logging.Logger) -> None:
    """Mask passwords in every record ``logger``'s handlers write (idempotent)."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
