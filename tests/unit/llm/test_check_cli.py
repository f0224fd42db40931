"""``worldmm llm check``: passes offline, fails (non-zero) when a provider answers badly."""

from __future__ import annotations

from typer.testing import CliRunner

from apps.cli import app


def test_offline_check_passes():
    result = CliRunner().invoke(
        app,
        ["llm", "check"],
        env={
            "WORLDMM_LLM_PROVIDER": "offline",
            "WORLDMM_ASR_BACKEND": "local",
            "WORLDMM_EMBED_BACKEND": "local",
        },
    )
    assert result.exit_code == 0, result.output
    for name in ("caption", "ner", "triples", "embedding", "asr", "offline"):
        assert name in result.output
    assert "FAILED" not in result.output


def test_bad_provider_replies_fail_the_check(fake_openai):
    # The fake's default chat reply is "{}", which no role accepts, even after a repair.
    result = CliRunner().invoke(
        app,
        ["llm", "check"],
        env={
            "WORLDMM_LLM_PROVIDER": "compatible",
            "WORLDMM_LLM_BASE_URL": fake_openai.base_url,
            "WORLDMM_LLM_MAX_RETRIES": "0",
            "WORLDMM_ASR_BACKEND": "none",
            "WORLDMM_EMBED_BACKEND": "local",
        },
    )
    assert result.exit_code == 1, result.output
    assert "FAILED" in result.output and "gpt-5-mini (direct)" in result.output
    assert len(fake_openai.chat_requests()) >= 2  # the call and its repair
