"""The offline answerer's embedding memo: same vectors as the embedder, each text once."""

from __future__ import annotations

import numpy as np

from worldmm.llm.rule_based.memo import MemoEmbedder


class Counting:
    name = "counting"
    dim = 3

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return np.asarray([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)


def test_vectors_match_and_each_text_is_embedded_once():
    inner = Counting()
    memo = MemoEmbedder(inner, max_texts=10)
    texts = ["a cat", "banana", "a cat"]
    assert np.array_equal(memo.embed(texts), inner.embed(list(texts)))
    inner.seen.clear()
    again = memo.embed(["banana", "dog", "a cat"])
    assert inner.seen == ["dog"]
    assert again.shape == (3, 3) and again[1].tolist() == [3.0, 0.0, 1.0]
    assert memo.embed([]).shape == (0, 3)


def test_least_recently_used_texts_are_evicted():
    inner = Counting()
    memo = MemoEmbedder(inner, max_texts=2)
    memo.embed(["one", "two"])
    memo.embed(["one"])  # "two" is now the oldest
    memo.embed(["three"])
    inner.seen.clear()
    memo.embed(["one", "two"])
    assert inner.seen == ["two"]
    big = memo.embed(["p", "q", "r"])  # more than the memo holds: still every row
    assert big[:, 0].tolist() == [1.0, 1.0, 1.0]


def test_a_text_evicted_by_another_thread_while_embedding_is_still_returned():
    """A week's ingest evicted "held" texts from another thread between the memo's look-up
    and its read-back (ValueError); the held vectors are taken with the look-up now."""
    memo: MemoEmbedder

    class EvictsMeanwhile(Counting):
        def embed(self, texts: list[str]) -> np.ndarray:
            out = super().embed(texts)
            if texts == ["fresh"]:
                import threading

                other = threading.Thread(target=memo.embed, args=(["x1", "x2"],))
                other.start()
                other.join()  # the other thread fills the memo and evicts "kept"
            return out

    memo = MemoEmbedder(EvictsMeanwhile(), max_texts=2)
    memo.embed(["kept"])
    rows = memo.embed(["kept", "fresh"])
    assert rows[:, 0].tolist() == [4.0, 5.0]
