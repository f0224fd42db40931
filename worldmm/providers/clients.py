"""OpenAI SDK clients for the configured provider (OpenAI, or any compatible server by URL).

Both are built with the SDK's retries off: every model call is retried by worldmm.retry
(worldmm.providers.calls), which counts and logs each retry under its role."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai

    from worldmm.settings import Settings


class ProviderConfigError(ValueError):
    """The provider settings cannot work (no key for OpenAI, no URL for a compatible server)."""


def _key_and_url(settings: Settings, base_url: str | None = None) -> tuple[str, str | None]:
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    url = base_url or settings.llm_base_url
    if settings.llm_provider == "compatible" and not url:
        raise ProviderConfigError(
            "WORLDMM_LLM_PROVIDER=compatible needs WORLDMM_LLM_BASE_URL (e.g. http://host:8000/v1)"
        )
    if settings.llm_provider != "compatible" and not base_url:
        url = None  # api.openai.com
    if not key:
        if url is None:
            raise ProviderConfigError(
                "calling api.openai.com needs WORLDMM_OPENAI_API_KEY "
                "(or use the offline provider / local backends)"
            )
        key = "unused"  # local servers accept any key; the SDK insists on one
    return key, url


def provider_label(settings: Settings) -> str:
    return "openai" if settings.llm_provider == "openai" else "compatible"


def async_openai_client(settings: Settings, *, base_url: str | None = None) -> openai.AsyncOpenAI:
    """The async client (chat roles, the Batch API)."""
    import openai

    key, url = _key_and_url(settings, base_url)
    return openai.AsyncOpenAI(
        api_key=key, base_url=url, max_retries=0, timeout=settings.llm_timeout_s
    )


def sync_openai_client(settings: Settings, *, base_url: str | None = None) -> openai.OpenAI:
    """The sync client (embeddings, transcription)."""
    import openai

    key, url = _key_and_url(settings, base_url)
    return openai.OpenAI(
        api_key=key,
        base_url=url,
        max_retries=0,
        timeout=settings.llm_timeout_s,
    )
