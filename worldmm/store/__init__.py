"""PostgreSQL + pgvector storage of every memory (sync psycopg 3; run it in threads).

- ``db``: :class:`Database` (pool, ``transaction()``, ``check_schema``)
- ``migrate``: ``apply_migrations(url, settings)``, ``check_schema(conn, settings)``
- repositories taking a connection, so several compose in one transaction: ``users``
  (users, API keys, sessions), ``segments``, ``entities``, ``triples``, ``visual``, ``frames``
  (frames and audio chunks), ``audit``, ``purge`` (purge a user, forget a range), ``bulk``
- ``models``: pydantic rows in and out; ``errors``: typed errors

Every read takes the user id and filters by it; composite foreign keys make the database
refuse a row pointing into another user's memory.
"""
