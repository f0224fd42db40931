"""The plan check's statement log: a ``SET LOCAL`` belongs to the next statement on its own
connection, even when another lane's statements run between them on other connections."""

from __future__ import annotations

from bench.plans import StatementLog


class _Conn:  # the log reads only the connection's identity for plain-text statements
    pass


def test_settings_stay_with_the_connection_that_set_them() -> None:
    log = StatementLog()
    dense, lexical = _Conn(), _Conn()
    log.note(dense, "SET LOCAL hnsw.iterative_scan = 'strict_order'", None)
    log.note(lexical, "SELECT id FROM segments WHERE user_id = %s", ["u"])  # another lane
    log.note(dense, "SELECT segment_id FROM segment_embeddings ORDER BY 1", None)
    log.note(dense, "SELECT 1", None)  # the settings were the first statement's only
    assert [s.settings for s in log.statements] == [
        {},
        {"hnsw.iterative_scan": "strict_order"},
        {},
    ]
