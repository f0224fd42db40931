"""A small memory written into PostgreSQL through the store's own repository functions,
shared by the retrieval tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.fixtures.store import make_segment
from tests.unit.agent.fakes import FakeEncoder, HashEmbedder
from worldmm.blobs import LocalBlobStore
from worldmm.deps import Deps
from worldmm.graph.cache import GraphCacheLike
from worldmm.llm.roles import ModelRoles
from worldmm.settings import Settings
from worldmm.store import entities, frames, segment_search, triples, users, visual
from worldmm.store.db import Database
from worldmm.store.models import FrameRow, TripleWrite

T0 = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Memory:
    """Writes a small memory for one user through the store's own repository functions."""

    def __init__(self, db: Database, user_id: str, text: HashEmbedder, vis: HashEmbedder):
        self.db, self.user, self.text, self.vis = db, user_id, text, vis
        self.seg_ids: dict[str, int] = {}
        self.triple_ids: dict[str, int] = {}

    def deps(
        self, settings: Settings, roles: ModelRoles, blobs: Path, cache: GraphCacheLike
    ) -> Deps:
        """Deps over this memory: its database and embedders, a fake encoder of its clips."""
        return Deps(
            settings=settings,
            db=self.db,
            roles=roles,
            embedder=self.text,
            encoder=FakeEncoder(self.vis),
            blobs=LocalBlobStore(blobs),
            cache=cache,
        )

    def _entity(self, conn, name: str) -> int:
        return entities.insert_canonical_entity(conn, self.user, name, self.text.vector(name)).id

    def _triple(self, conn, s: str, p: str, o: str, literal: bool, **fields) -> TripleWrite:
        """(s, p, o) with its entities written; ``o`` is a literal when ``literal``."""
        return TripleWrite(
            subject_entity_id=self._entity(conn, s),
            predicate=p,
            object_entity_id=None if literal else self._entity(conn, o),
            object_literal=o if literal else None,
            embedding=self.text.vector(f"{s} {p} {o}"),
            **fields,
        )

    def segment(self, label, scale, start, caption, facts, clip_text=None, frame_count=0):
        with self.db.transaction() as conn:
            users.ensure_user(conn, self.user)
            sid = make_segment(
                conn,
                self.user,
                at(start),
                scale,
                session_id="s1",
                caption=caption,
                processing_status="complete",
            )
            rows = [self._triple(conn, s, p, o, literal) for s, p, o, literal in facts]
            triples.insert_triples(conn, self.user, sid, "episodic", rows)
            # the dense lane's row, written with the window as ingest does
            vector = self.text.vector(caption)
            segment_search.upsert_segment_embeddings(conn, self.user, [(sid, vector)], "hash")
            if clip_text:
                visual.upsert_visual_embedding(conn, self.user, sid, self.vis.vector(clip_text))
            for i in range(frame_count):
                frames.insert_frame(
                    conn,
                    FrameRow(
                        user_id=self.user,
                        session_id="s1",
                        captured_at=at(start + i * 0.5),
                        seq=i,
                        blob_key=f"{self.user}/frames/{start + i * 0.5:.1f}.jpg",
                    ),
                )
        self.seg_ids[label] = sid

    def fact(self, label, s, p, o, since, literal=False):
        with self.db.transaction() as conn:
            users.ensure_user(conn, self.user)
            row = self._triple(conn, s, p, o, literal, valid_from=since)
            (tid,) = triples.insert_triples(conn, self.user, None, "semantic", [row])
        self.triple_ids[label] = tid

    def remove(self, label, when):
        with self.db.transaction() as conn:
            triples.invalidate_triples(conn, self.user, [self.triple_ids[label]], when, None)

    def frames(self, start: float, count: int, step_s: float = 0.5, session: str = "s1") -> None:
        """``count`` frame rows every ``step_s`` seconds from ``start``."""
        with self.db.transaction() as conn:
            users.ensure_user(conn, self.user)
            for i in range(count):
                ts = start + i * step_s
                frames.insert_frame(
                    conn,
                    FrameRow(
                        user_id=self.user,
                        session_id=session,
                        captured_at=at(ts),
                        seq=i,
                        blob_key=f"{self.user}/frames/{ts:.1f}.jpg",
                    ),
                )
