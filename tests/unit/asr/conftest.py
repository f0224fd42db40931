from __future__ import annotations

import pytest

from tests.fixtures.fake_openai import fake_openai  # noqa: F401
from tests.fixtures.media import make_speech_wav, require_espeak

SENTENCE = "Please remember to buy milk and eggs at the supermarket tomorrow morning."


@pytest.fixture(scope="session")
def local_transcriber():
    from worldmm.asr.local import LocalWhisperTranscriber

    return LocalWhisperTranscriber()


@pytest.fixture(scope="session")
def speech_wav() -> bytes:
    require_espeak()
    return make_speech_wav(SENTENCE)
