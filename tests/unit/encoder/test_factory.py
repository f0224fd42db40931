import asyncio

from worldmm.encoder import (
    EncoderUnavailable,
    HttpVisualEncoder,
    InProcessOfflineEncoder,
    VisualEncoder,
    build_visual_encoder,
)
from worldmm.settings import Settings


def test_no_url_means_the_in_process_offline_encoder():
    encoder = build_visual_encoder(Settings(visual_embed_dim=512))
    assert isinstance(encoder, InProcessOfflineEncoder)
    assert isinstance(encoder, VisualEncoder)
    assert encoder.dim == 512


def test_a_url_means_http_with_the_configured_breaker_and_retries():
    settings = Settings(
        gpu_worker_url="http://127.0.0.1:9/",
        gpu_breaker_failures=1,
        gpu_breaker_reset_s=60,
        gpu_max_retries=0,
        gpu_timeout_s=2,
    )
    encoder = build_visual_encoder(settings)
    assert isinstance(encoder, HttpVisualEncoder)
    assert encoder.dim == 1536 and encoder.retry.max_retries == 0
    assert encoder.breaker.failure_threshold == 1

    async def main():
        errors = []
        for _ in range(2):  # port 9 (discard) refuses: the first failure opens the circuit
            try:
                await encoder.encode_text("x")
            except EncoderUnavailable as exc:
                errors.append(str(exc))
        await encoder.aclose()
        return errors

    first, second = asyncio.run(main())
    assert "ConnectError" in first
    assert "circuit open" in second
