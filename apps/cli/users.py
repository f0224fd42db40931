"""CLI: ``worldmm users show USER`` and ``worldmm users set-timezone USER ZONE``: a user's
profile (today: the time zone their questions are read in). Through the API with ``--api``
(the user's key or the admin key), else straight against the configured stack's database,
like ``worldmm ask``."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

from apps.cli.common import service_settings

users_app = typer.Typer(help="User profiles (time zone).", no_args_is_help=True)

Api = Annotated[
    str | None, typer.Option(help="Query API base URL; without it, the configured database.")
]
Key = Annotated[str | None, typer.Option(help="API key for --api (default $WORLDMM_API_KEY).")]


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.add_typer(users_app, name="users")


def _fail(message: str) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(1)


@users_app.command("show")
def show(
    user: Annotated[str, typer.Argument(help="The user id.")],
    api: Api = None,
    key: Key = None,
) -> None:
    """Print the user's profile (user id, time zone, creation time) as JSON."""
    _print(_via_api(api, key, user, None) if api else _in_process(user, None))


@users_app.command("set-timezone")
def set_timezone(
    user: Annotated[str, typer.Argument(help="The user id.")],
    zone: Annotated[str, typer.Argument(help="An IANA time zone, e.g. Asia/Tokyo.")],
    api: Api = None,
    key: Key = None,
) -> None:
    """Set the zone the user's questions are read in (and answers speak); print the profile."""
    from worldmm.localtime import check_zone_name

    try:
        check_zone_name(zone)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    _print(_via_api(api, key, user, zone) if api else _in_process(user, zone))


def _print(profile: dict) -> None:
    print(json.dumps(profile, indent=2, ensure_ascii=False))


def _via_api(api: str, key: str | None, user: str, zone: str | None) -> dict:
    from apps.client import ApiConnectionError, ApiError, WorldMMClient

    key = key or os.environ.get("WORLDMM_API_KEY")
    if not key:
        raise _fail("--api needs --key (or WORLDMM_API_KEY)")
    try:
        with WorldMMClient(api, key, user) as mm:
            profile = mm.update_profile(timezone=zone) if zone else mm.profile()
    except ApiConnectionError as exc:
        raise _fail(exc.detail) from None
    except ApiError as exc:
        raise _fail(f"{exc.status} from the API: {exc.detail}") from None
    return profile.model_dump(mode="json")


def _in_process(user: str, zone: str | None) -> dict:
    from worldmm.store.db import Database
    from worldmm.store.errors import NotFoundError
    from worldmm.store.users import get_profile, update_profile
    from worldmm.wire.schemas import UserProfileOut

    url = service_settings("postgres").database_url
    with Database(url, max_size=1) as db, db.transaction() as conn:
        try:
            profile = (
                update_profile(conn, user, {"timezone": zone}) if zone else get_profile(conn, user)
            )
        except NotFoundError:
            profile = None
    if profile is None:
        raise _fail(f"unknown user {user!r}")
    return UserProfileOut.model_validate(profile, from_attributes=True).model_dump(mode="json")
