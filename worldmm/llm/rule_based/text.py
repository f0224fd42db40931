"""Rule-based text analysis for the offline provider: sentences, entities, event triples.

Deliberately simple and deterministic: capitalised names, quoted text and determiner-led noun
phrases become entities; the words between two mentions in a sentence become the predicate.
"""

from __future__ import annotations

import re

from worldmm.llm.schemas import looks_literal
from worldmm.models import Triple

_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[:.]\d+)?")
_FIRST_PERSON = re.compile(r"\b(?:I|me|my|myself|mine)\b")
_SPEAKER_LINE = re.compile(r"^\s*([A-Z][\w' -]{0,30}):\s+(.+)$")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _words(
    """a an the and or but if then so as at by for from in into of on onto to up down out over
    under with without about after before again also all any are be been being both can could
    did do does doing done each few had has have having he her here hers herself him himself his
    how i if is it its itself just let lets let's me more most my myself no nor not now of off
    once only other our ours ourselves own same she should some such than that that's their
    theirs them themselves there these they this those through too very was we were what when
    where which while who whom why will would you your yours yourself yourselves yes okay ok oh
    well um uh yeah hmm really maybe actually like get got go going gonna went come came see saw
    look looked looking say said says tell told think thought know knew want wanted need needed
    make made take took put still back around something anything everything someone anyone
    everyone thing things time way one two lot bit kind sort next later meanwhile during
    together another already quite again right left front behind near"""
)
# Capitalised words that open sentences or name time, never entities on their own.
_NOT_NAMES = STOPWORDS | _words(
    """after afterwards then next later meanwhile finally first suddenly eventually today
    tomorrow yesterday tonight morning afternoon evening night monday tuesday wednesday thursday
    friday saturday sunday january february march april may june july august september october
    november december day okay alright sure thanks thank hello hi hey please sorry great good
    visible text heard saw there here"""
)
_DETERMINERS = _words("the a an my his her their our your this that these those some")
_VERB_HINT = re.compile(r"(?:ed|ing)$")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_SPLIT.split(text) if len(s.strip()) > 1]


def content_tokens(text: str) -> list[str]:
    """Lower-cased words minus stopwords, crudely singularised, for lexical overlap."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in STOPWORDS or len(w) < 2:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


def lexical_overlap(query: str, text: str) -> float:
    """Share of the query's content words that occur in ``text`` (0..1)."""
    q = set(content_tokens(query))
    if not q:
        return 0.0
    return len(q & set(content_tokens(text))) / len(q)


def _proper_names(sentence: str) -> list[str]:
    words = list(re.finditer(r"[A-Za-z][A-Za-z'’-]*", sentence))
    names: list[str] = []
    run: list[str] = []
    for i, m in enumerate(words):
        w = m.group(0)
        if run and sentence[words[i - 1].end() : m.start()].strip():
            names.append(" ".join(run))  # punctuation between words ends a name
            run = []
        is_cap = w[0].isupper() and w.lower() not in _NOT_NAMES and w not in {"I", "I'm"}
        # A capitalised first word is a name only if it is not a common word.
        if is_cap and i == 0 and w.lower() in STOPWORDS:
            is_cap = False
        if is_cap:
            run.append(w.strip("'’"))
        else:
            if run:
                names.append(" ".join(run))
            run = []
    if run:
        names.append(" ".join(run))
    return names


def _noun_phrases(sentence: str) -> list[str]:
    """Up to two lower-case words after a determiner: "my keys", "the kitchen table"."""
    words = _WORD.findall(sentence)
    phrases = []
    for i, w in enumerate(words):
        if w.lower() not in _DETERMINERS:
            continue
        head: list[str] = []
        for nxt in words[i + 1 : i + 3]:
            low = nxt.lower()
            if low in STOPWORDS or not nxt.isalpha() or nxt[0].isupper():
                break
            if head and _VERB_HINT.search(low) and len(low) > 5:
                break
            head.append(low)
        if head:
            phrases.append(" ".join(head))
    return phrases


def extract_entities(text: str) -> list[str]:
    """Names, short quoted text and determiner noun phrases, in order of first mention."""
    found: list[str] = []
    seen: set[str] = set()

    def add(entity: str) -> None:
        entity = entity.strip(" .,;:!?'\"")
        key = entity.lower()
        if len(entity) < 2 or key in seen or looks_literal(entity):
            return
        seen.add(key)
        found.append(entity)

    if _FIRST_PERSON.search(text):
        found.append("I")
        seen.add("i")
    # Pair quote marks in order (1st-2nd, 3rd-4th); a long quote must not shift the pairing.
    quoted = [q.strip() for q in re.split(r"[\"“”]", text)[1::2] if 0 < len(q.split()) <= 4]
    for q in quoted:
        add(q)
    for sentence in sentences(text):
        for name in _proper_names(sentence):
            # Words of a quoted sign ("FRESH MILK 2L") are not separate names.
            if not any(name.lower() in q.lower() for q in quoted):
                add(name)
        for phrase in _noun_phrases(sentence):
            add(phrase)
    return found


def _mentions(sentence: str, entities: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, entity) of each entity occurrence, longest match first, no overlaps."""
    spans: list[tuple[int, int, str]] = []
    for ent in sorted({e for e in entities if e}, key=len, reverse=True):
        if ent == "I":
            # "my" is left to the determiner rule: "I picked up my phone" links I to phone.
            pattern = re.compile(r"\b(?:I|me|myself)\b")
        else:
            pattern = re.compile(r"(?<!\w)" + re.escape(ent) + r"(?!\w)", re.IGNORECASE)
        for m in pattern.finditer(sentence):
            if all(m.end() <= s or m.start() >= e for s, e, _ in spans):
                spans.append((m.start(), m.end(), ent))
    return sorted(spans)


def _predicate(between: str) -> str:
    words = list(_WORD.findall(between))
    while words and words[-1].lower() in _DETERMINERS:
        words.pop()
    while words and words[0].lower() in {"and", "then", "also", "s"}:
        words.pop(0)
    return " ".join(words[:6]).lower()


def event_triples(text: str, entities: list[str]) -> list[Triple]:
    """Link consecutive entity mentions in each sentence by the words between them."""
    entities = list(dict.fromkeys(entities + (["I"] if _FIRST_PERSON.search(text) else [])))
    triples: list[Triple] = []
    seen: set[tuple[str, str, str]] = set()
    for sentence in sentences(text):
        spans = _mentions(sentence, entities)
        speaker = _SPEAKER_LINE.match(sentence)
        previous: tuple[str, str] | None = None
        for (_s0, e0, a), (s1, _e1, b) in zip(spans, spans[1:], strict=False):
            if a.lower() == b.lower():
                continue
            between = sentence[e0:s1]
            pred = _predicate(between)
            if re.match(r"\W*(?:and|then)\b", between, re.IGNORECASE) and spans[0][2] != b:
                a = spans[0][2]  # "I took the cup and walked to the door": I walked.
            if not pred:
                # Adjacent mentions ("handed me the cup"): the object shares the last verb.
                a, pred = previous if previous else (a, "is with")
            previous = (a, pred)
            key = (a.lower(), pred, b.lower())
            if key not in seen and a.lower() != b.lower():
                seen.add(key)
                triples.append(Triple(subject=a, predicate=pred, object=b))
        if len(spans) == 1 and spans[0][2] != "I":
            ent = spans[0][2]
            subj = speaker.group(1) if speaker and speaker.group(1) != ent else "I"
            pred = "mentions" if speaker else "noticed"
            key = (subj.lower(), pred, ent.lower())
            if key not in seen and subj.lower() != ent.lower():
                seen.add(key)
                triples.append(Triple(subject=subj, predicate=pred, object=ent))
    return triples
