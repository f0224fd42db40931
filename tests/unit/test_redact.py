"""Secrets never shown (#24 part 3): URL passwords masked in text and log records, and an
invalid setting that may be a secret reported without its value."""

from __future__ import annotations

import io
import logging

import pytest

from worldmm.redact import RedactingFilter, has_credentials, redact
from worldmm.settings import SettingsError, load_settings

PW = "s3cr3t-Planted"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://mm:s3cr3t-Planted@db:5432/x", "postgresql://mm:***@db:5432/x"),
        ("redis://:s3cr3t-Planted@cache:6379/0", "redis://:***@cache:6379/0"),
        (
            "connect to postgresql://a:s3cr3t-Planted@h/x and rediss://b:s3cr3t-Planted@h:1 failed",
            "connect to postgresql://a:***@h/x and rediss://b:***@h:1 failed",
        ),
        (
            "host=db user=mm password=s3cr3t-Planted dbname=x",
            "host=db user=mm password=*** dbname=x",
        ),
        (
            "postgresql://db/x?sslpassword=s3cr3t-Planted&a=1",
            "postgresql://db/x?sslpassword=***&a=1",
        ),
        ("postgresql://mm@db:5432/x", "postgresql://mm@db:5432/x"),  # no password: unchanged
        ("mail alice@example.com at 10:30", "mail alice@example.com at 10:30"),
    ],
)
def test_redact_masks_every_password_and_nothing_else(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert has_credentials(text) == (text != shown)


def test_log_records_and_tracebacks_are_masked_args_kept_otherwise() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("db %s down", f"postgresql://u:{PW}@h/x")
        try:
            raise ConnectionError(f"redis://:{PW}@h:6379 refused")
        except ConnectionError:
            logger.exception("cache")
        plain = logging.LogRecord("x", logging.INFO, "f", 1, "%s %d", ("a", 1), None)
        assert RedactingFilter().filter(plain) and plain.args == ("a", 1)
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert PW not in text
    assert "postgresql://u:***@h/x" in text and "redis://:***@h:6379 refused" in text


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("WORLDMM_LLM_MAX_COMPLETION_TOKENS", "sk-s3cr3t-Planted"),  # a name holding TOKEN
        ("WORLDMM_LLM_BATCH_MAX_LINES", f"postgresql://u:{PW}@h/x"),  # a URL with credentials
    ],
)
def test_invalid_secret_setting_is_named_without_its_value(monkeypatch, var, value) -> None:
    monkeypatch.setenv(var, str(value))
    field = var.removeprefix("WORLDMM_").lower()
    for source in ({}, {field: value}):  # from the environment, and as an override
        with pytest.raises(SettingsError) as err:
            load_settings(**source)
        message = str(err.value)
        assert var in message and "value not shown" in message
        assert str(value) not in message and PW not in message


def test_invalid_plain_setting_still_shows_what_it_got(monkeypatch) -> None:
    monkeypatch.setenv("WORLDMM_TOPIC_PARTITIONS", "lots")
    with pytest.raises(SettingsError, match="WORLDMM_TOPIC_PARTITIONS.*got 'lots'"):
        load_settings()
