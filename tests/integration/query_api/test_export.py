"""Export: one archive of everything held about a user; the manifest's counts equal the rows
in the files and in the database, checksums hold, nothing of another user is in it, and a
purged user's export is empty."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from datetime import UTC, datetime

import pytest

from tests.fixtures.api import ADMIN
from tests.fixtures.wearers import fill_memory
from worldmm.privacy.export import export_user
from worldmm.store.purge import count_user_rows

pytestmark = pytest.mark.integration


def read_archive(body: bytes) -> tuple[dict, dict[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    return json.loads(files.pop("manifest.json")), files


def test_export_round_trips_and_holds_nothing_of_another_user(client, api_deps, make_user):
    a, b = make_user(), make_user()
    fill_memory(client, api_deps, a)
    fill_memory(client, api_deps, b)
    with api_deps.db.connection() as conn:
        rows = count_user_rows(conn, a.user_id)

    r = client.get(f"/v1/users/{a.user_id}/export", headers=a.headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/gzip"
    assert "attachment" in r.headers["content-disposition"]
    manifest, files = read_archive(r.content)

    assert manifest["user_id"] == a.user_id and manifest["format"] == "worldmm-export/1"
    for table, n in rows.items():  # every table with the user's rows, and the count
        assert manifest["tables"][table] == n, table
    for table, n in manifest["tables"].items():
        lines = files[f"tables/{table}.jsonl"].splitlines()
        assert len(lines) == n
        assert all(json.loads(line) for line in lines)
    assert manifest["tables"]["segments"] >= 2 and manifest["tables"]["triples"] >= 2
    assert manifest["media"] == {"frames": 1, "audio": 1}
    assert sorted(k for k in files if k.startswith("media/")) == sorted(
        f"media/{k}" for k in [*api_deps.blobs.list(f"frames/{a.user_id}/"),
                               *api_deps.blobs.list(f"audio/{a.user_id}/")]
    )  # fmt: skip
    assert set(manifest["files"]) == set(files)
    for name, data in files.items():
        assert manifest["files"][name] == {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    everything = b"".join(files.values())
    assert b.user_id.encode() not in everything
    assert b"key_hash" not in files["tables/api_keys.jsonl"]  # no credentials
    assert b"parked the car" in files["tables/segments.jsonl"]

    # another user's key may not export a; the admin may
    assert client.get(f"/v1/users/{a.user_id}/export", headers=b.headers).status_code == 403
    assert client.get(f"/v1/users/{a.user_id}/export", headers=ADMIN).status_code == 200
    with api_deps.db.connection() as conn:
        audit = conn.execute(
            "SELECT actor FROM admin_audit WHERE action = 'user.export' AND subject_user = %s"
            " ORDER BY id",
            (a.user_id,),
        ).fetchall()
    assert [x for (x,) in audit] == ["user", "admin"]


def test_the_export_of_a_purged_user_is_empty(client, api_deps, make_user):
    a = make_user()
    fill_memory(client, api_deps, a)
    assert client.delete(f"/v1/users/{a.user_id}", headers=ADMIN).status_code == 200
    # for the API the user no longer exists; the archive (worldmm export) holds no memory
    assert client.get(f"/v1/users/{a.user_id}/export", headers=ADMIN).status_code == 404
    body = b"".join(export_user(api_deps.db, api_deps.blobs, a.user_id, datetime.now(UTC)))
    manifest, files = read_archive(body)
    audit = manifest["tables"].pop("admin_audit")
    assert manifest["tables"] and all(n == 0 for n in manifest["tables"].values())
    # what is still held is the admin audit trail about them: the purge itself, by design
    actions = [json.loads(x)["action"] for x in files["tables/admin_audit.jsonl"].splitlines()]
    assert len(actions) == audit and "user.purge" in actions
    assert set(actions) <= {"user.create", "user.purge", "user.export"}
    assert manifest["media"] == {"frames": 0, "audio": 0}
    assert not [k for k in files if k.startswith("media/")]
    # and the purged user's old key cannot ask
    assert client.get(f"/v1/users/{a.user_id}/export", headers=a.headers).status_code == 401
