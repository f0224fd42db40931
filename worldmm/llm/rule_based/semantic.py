"""Offline semantic extraction and consolidation rules."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from worldmm.embed.base import TextEmbedder
from worldmm.llm.rule_based.text import STOPWORDS, extract_entities, sentences
from worldmm.llm.schemas import ConsolidationDecision, SemanticExtraction, looks_literal
from worldmm.models import Triple

# Cue → present-tense predicate for lasting statements ("I usually drink coffee").
_CUES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:usually|often|always|regularly|typically)\s+(\w+)", re.I), "usually {0}"),
    (re.compile(r"\b(?:likes?|liked|loves?|loved|enjoys?|enjoyed)\b", re.I), "likes"),
    (re.compile(r"\b(?:prefers?|preferred)\b", re.I), "prefers"),
    (re.compile(r"\b(?:dislikes?|disliked|hates?|hated)\b", re.I), "dislikes"),
    (re.compile(r"\bfavou?rite\b", re.I), "has favourite"),
    (re.compile(r"\b(?:works? as|worked as|is (?:a|an|the|my))\b", re.I), "is"),
    (re.compile(r"\b(?:lives? in|lived in)\b", re.I), "lives in"),
    (re.compile(r"\b(?:owns?|owned)\b", re.I), "owns"),
    (re.compile(r"\bevery (?:day|morning|evening|night|week)\b", re.I), "regularly does"),
]
_OPPOSITES = {("likes", "dislikes"), ("dislikes", "likes"), ("prefers", "dislikes")}


def _object_phrase(text: str, max_words: int = 4) -> str:
    """The words right after a cue, up to the first function word: "coffee after lunch" →
    "coffee"; skips leading determiners ("a blue bike" → "blue bike")."""
    words = re.findall(r"[\w'’-]+", text)
    while words and words[0].lower() in {"a", "an", "the", "my", "to", "his", "her", "their"}:
        words.pop(0)
    phrase: list[str] = []
    for w in words[:max_words]:
        if w.lower() in STOPWORDS:
            break
        phrase.append(w)
    return " ".join(phrase)


def _cue_triples(summary: str) -> list[Triple]:
    out: list[Triple] = []
    for sentence in sentences(summary):
        for pattern, template in _CUES:
            m = pattern.search(sentence)
            if not m:
                continue
            before = extract_entities(sentence[: m.start()])
            subject = before[0] if before else "I"
            after = sentence[m.end() :]
            obj = _object_phrase(after)
            if not obj:
                obj_entities = [e for e in extract_entities(after) if e != "I"]
                obj = obj_entities[0] if obj_entities else ""
            verb = m.group(1).lower() if m.groups() else ""
            if not obj or subject.lower() == obj.lower():
                continue
            out.append(
                Triple(
                    subject=subject,
                    predicate=template.format(verb),
                    object=obj,
                    object_is_literal=looks_literal(obj),
                )
            )
            break
    return out


def _recurring(episodic: list[Triple], min_count: int = 2) -> list[Triple]:
    """An entity I interacted with in several episodic facts is a lasting association."""
    counts: Counter[str] = Counter()
    names: dict[str, str] = {}
    for t in episodic:
        for me, other in ((t.subject, t.object), (t.object, t.subject)):
            if me == "I" and other != "I" and not looks_literal(other):
                counts[other.lower()] += 1
                names.setdefault(other.lower(), other)
    return [
        Triple(subject="I", predicate="often deals with", object=names[key])
        for key, n in counts.most_common()
        if n >= min_count
    ]


def evidence_for(triple: Triple, episodic: list[Triple]) -> list[int]:
    """Episodic facts that mention the semantic fact's object (and, unless "I", its subject)."""
    subj, obj = triple.subject.lower(), triple.object.lower()
    hits = []
    for i, t in enumerate(episodic):
        parts = {t.subject.lower(), t.object.lower()}
        text = " ".join(t.as_list()).lower()
        if (obj in parts or obj in text) and (subj == "i" or subj in parts):
            hits.append(i)
    return hits


def extract_semantic(summary: str, episodic: list[Triple]) -> SemanticExtraction:
    triples: list[Triple] = []
    seen: set[tuple[str, str, str]] = set()
    for t in _cue_triples(summary) + _recurring(episodic):
        key = (t.subject.lower(), t.predicate.lower(), t.object.lower())
        if key not in seen:
            seen.add(key)
            triples.append(t)
    return SemanticExtraction(
        semantic_triples=triples,
        episodic_evidence=[evidence_for(t, episodic) for t in triples],
    )


def consolidate(
    embedder: TextEmbedder,
    new: Triple,
    candidates: list[Triple],
    *,
    duplicate_cosine: float = 0.9,
    update_cosine: float = 0.75,
) -> ConsolidationDecision:
    """Retire candidates the new fact repeats (very similar), updates (same subject and
    predicate, similar) or contradicts (opposite predicate on the same subject and object)."""
    if not candidates:
        return ConsolidationDecision(updated_triple=new, triples_to_remove=[])
    texts = [" ".join(t.as_list()) for t in [new, *candidates]]
    vectors = embedder.embed(texts)
    cosine = vectors[1:] @ vectors[0]
    remove: list[int] = []
    for i, (old, sim) in enumerate(zip(candidates, np.asarray(cosine).tolist(), strict=True)):
        same_subject = old.subject.lower() == new.subject.lower()
        same_pred = old.predicate.lower() == new.predicate.lower()
        same_obj = old.object.lower() == new.object.lower()
        opposite = (old.predicate.lower(), new.predicate.lower()) in _OPPOSITES
        if (
            sim >= duplicate_cosine
            or (same_subject and same_pred and sim >= update_cosine)
            or (same_subject and same_obj and opposite)
        ):
            remove.append(i)
    return ConsolidationDecision(updated_triple=new, triples_to_remove=remove)
