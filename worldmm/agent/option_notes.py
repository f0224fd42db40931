"""What the wearer's memory says about each multiple-choice option before the evidence is
read (:class:`~worldmm.llm.schemas.OptionNote`): how common each of its words is, and the
time it names, if any.

A housemate's name in most windows is found near any question; the answerer weighs an
option's support in the evidence against that base rate. Shares come from the lexical
lane's per-user document frequencies (kept in process, ``Deps.term_stats``), so a note costs
one small query. Times are read by the same parser as the question's own time, at the
question's moment on the wearer's clock.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from worldmm.llm.schemas import OptionNote
from worldmm.localtime import Asked
from worldmm.memory.retrieval.question_time import parse_time

if TYPE_CHECKING:
    from worldmm.deps import Deps

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def option_words(choice: str) -> list[str]:
    """The option's lower-case words, each once."""
    return list(dict.fromkeys(_WORD.findall(choice.lower())))


def hours_before(choice: str, asked: Asked) -> tuple[float, float] | None:
    """The time ``choice`` names as (nearest, farthest) hours before the question, or None."""
    got = parse_time(choice, asked.at, asked.tz)
    if got.start is None:
        return None
    end = got.end or asked.at
    return ((asked.at - end).total_seconds() / 3600, (asked.at - got.start).total_seconds() / 3600)


def word_shares(deps: Deps, user_id: str, words: Sequence[str]) -> dict[str, float]:
    """Share of the user's segments holding each word (by its rarest lexeme); words with no
    lexeme (stop words) or none stored are left out."""
    stats, lexemes = deps.reader.word_terms(user_id, words)
    if stats.docs <= 0:
        return {}
    out = {}
    for word, lexes in lexemes.items():
        counts = [stats.df[x] for x in lexes if stats.df.get(x)]
        if counts:
            out[word] = min(counts) / stats.docs
    return out


async def option_notes(
    deps: Deps, user_id: str, choices: Sequence[str], asked: Asked
) -> list[OptionNote]:
    """One note per choice, in order."""
    words = list(dict.fromkeys(w for c in choices for w in option_words(c)))
    shares = await asyncio.to_thread(word_shares, deps, user_id, words) if words else {}
    return [
        OptionNote(
            word_shares={w: shares[w] for w in option_words(c) if w in shares},
            hours_before=hours_before(c, asked),
        )
        for c in choices
    ]
