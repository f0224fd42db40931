"""`worldmm bench asr`: word error rate and CPU cost of the local speech recogniser's options
(Whisper tiny.en or base, beam size, VAD, a vocabulary prompt) on the spoken test set of
:mod:`bench.asr_speech`; the default is chosen by it (docs/benchmarks/asr.md).

CPU is the process's CPU time (all threads) across the transcribe calls, per second of audio:
less sensitive to other load on the machine than wall time, which is reported beside it.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from bench import harness
from bench.asr_speech import Utterance, sentences, spoken_set, word_errors
from bench.harness import Echo, StrList

VARIANTS = (
    "tiny.en",
    "tiny.en/beam5",
    "tiny.en/prompt",
    "base",
    "base/beam5",
    "base/no-vad",
    "base/prompt",
)
_VARIANT = re.compile(r"^(base|tiny\.en)((?:/beam\d+|/no-vad|/prompt)*)$")


class AsrConfig(harness.Options):
    out: Path = Field(description="Where to write the JSON report.")
    variants: StrList = Field(
        VARIANTS,
        description="Recogniser options: MODEL, then any of /beamN, /no-vad, /prompt (MODEL "
        "base or tiny.en; greedy decoding with VAD unless said).",
    )
    per_sentence: int = Field(4, ge=1, description="Conditions each sentence is said under.")
    cpu_threads: int = Field(2, ge=1, description="Threads of each model (production uses 2).")

    @field_validator("variants")
    @classmethod
    def _known(cls, variants: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in variants if not _VARIANT.match(v)]
        if bad:
            raise ValueError(f"unknown variants {bad}: MODEL[/beamN][/no-vad][/prompt]")
        return variants


@dataclass(frozen=True)
class Variant:
    name: str
    model: str
    beam_size: int
    vad: bool
    prompt: bool

    @classmethod
    def parse(cls, name: str) -> Variant:
        m = _VARIANT.match(name)
        assert m is not None
        flags = m.group(2).split("/")[1:]
        beams = [int(f[4:]) for f in flags if f.startswith("beam")]
        beam = beams[-1] if beams else 1
        return cls(name, m.group(1), beam, "no-vad" not in flags, "prompt" in flags)


def entity_prompt() -> str:
    """The names the offline NER finds in the test set's sentences, as a wearer's memory
    would hold them after hearing them once: the best a vocabulary prompt can do."""
    from worldmm.llm.rule_based.text import extract_entities

    names: dict[str, None] = {}
    for line in sentences():
        names.update((e, None) for e in extract_entities(line) if e.lower() not in {"i", "me"})
    return ", ".join(names) + "."


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def _rates(errors: dict[str, list[int]]) -> dict[str, float]:
    return {k: round(e / max(n, 1), 4) for k, (e, n) in sorted(errors.items())}


def measure(
    variant: Variant, utterances: list[Utterance], prompt: str, threads: int, echo: Echo
) -> dict[str, Any]:
    from worldmm.asr.audio import to_wav
    from worldmm.asr.local import LocalWhisperTranscriber

    rss, t0 = _rss_mb(), time.perf_counter()
    asr = LocalWhisperTranscriber(
        variant.model,  # type: ignore[arg-type]
        cpu_threads=threads,
        beam_size=variant.beam_size,
        vad=variant.vad,
        prompt=prompt if variant.prompt else None,
    )
    load_s, rss_added = time.perf_counter() - t0, _rss_mb() - rss
    asr.transcribe(to_wav(utterances[0].samples))  # warm-up: VAD and first-call set-up
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # key -> [errors, words]
    worst, demo_lines = [], []
    cpu = wall = audio = 0.0
    for u in utterances:
        wav = to_wav(u.samples)
        c0, w0 = time.process_time(), time.perf_counter()
        heard = asr.transcribe(wav).text
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        audio += u.seconds
        errors, words = word_errors(u.text, heard)
        noise = "clean" if math.isinf(u.snr_db) else f"{u.snr_db:g} dB"
        keys = ["demo"] if u.demo else ["all", f"voice {u.voice}", f"{u.wpm} wpm", noise]
        for key in keys:
            by[key][0] += errors
            by[key][1] += words
        if u.demo:
            demo_lines.append({"said": u.text, "heard": heard, "errors": errors})
        elif errors:
            worst.append({"said": u.text, "heard": heard, "as": u.condition, "errors": errors})
    overall = dict(by)
    echo(
        f"{variant.name}: WER {overall['all'][0] / overall['all'][1]:.3f}, demo lines "
        f"{overall['demo'][0]}/{overall['demo'][1]} words wrong, CPU {cpu / audio:.3f} s/s"
    )
    worst.sort(key=lambda w: -w["errors"])
    return {
        "variant": variant.name,
        "model": variant.model,
        "beam_size": variant.beam_size,
        "vad": variant.vad,
        "prompt": variant.prompt,
        "wer": round(overall["all"][0] / overall["all"][1], 4),
        "wer_demo_lines": round(overall["demo"][0] / overall["demo"][1], 4),
        "wer_by": _rates(overall),
        "cpu_s_per_audio_s": round(cpu / audio, 4),
        "wall_s_per_audio_s": round(wall / audio, 4),
        "load_s": round(load_s, 2),
        "rss_added_mb": round(rss_added, 1),
        "demo_lines": demo_lines,
        "worst": worst[:8],
    }


@harness.main(AsrConfig)
def main(cfg: AsrConfig) -> dict[str, Any]:
    """Word error rate and CPU per audio-second of each recogniser option on the spoken
    test set (espeak-ng voices and speeds, with noise)."""
    run, echo = harness.Run(), harness.stamped_echo()
    utterances = spoken_set(cfg.per_sentence)
    audio = sum(u.seconds for u in utterances)
    echo(f"{len(utterances)} utterances, {audio:.0f} s of speech, {len(sentences())} sentences")
    prompt = entity_prompt()
    results = [
        measure(Variant.parse(v), utterances, prompt, cfg.cpu_threads, echo) for v in cfg.variants
    ]
    result = run.stamp(
        {
            "benchmark": "asr",
            "test_set": {
                "utterances": len(utterances),
                "sentences": len(sentences()),
                "audio_s": round(audio, 1),
                "per_sentence": cfg.per_sentence,
                "conditions": sorted({u.condition for u in utterances if not u.demo}),
            },
            "prompt": prompt,
            "cpu_threads": cfg.cpu_threads,
            "variants": results,
        }
    )
    harness.write_report(result, cfg.out, show=False)
    return result


if __name__ == "__main__":
    main()
