"""A user's profile: ``GET`` and ``PATCH /v1/users/{user_id}`` with the user's own key or the
admin key (another user's key is 403, an unknown user with the admin key 404, as on every
per-user route). Today the profile is the time zone the wearer's questions are read in."""

from __future__ import annotations

from fastapi import HTTPException, status

from query_api.auth import UserIdPath, user_router
from query_api.depends import AppDeps
from query_api.routes.common import USER_ERRORS
from worldmm.store.users import UserProfile, get_profile, update_profile
from worldmm.wire.schemas import ProfileUpdate, UserProfileOut

router = user_router(tags=["users"], responses=USER_ERRORS)


def profile_out(profile: UserProfile) -> UserProfileOut:
    return UserProfileOut.model_validate(profile, from_attributes=True)


@router.get("", summary="The user's profile: time zone and creation time")
def read_profile(user_id: UserIdPath, deps: AppDeps) -> UserProfileOut:
    with deps.db.connection() as conn:
        profile = get_profile(conn, user_id)
    if profile is None:  # purged between the key check and this read
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown user {user_id!r}")
    return profile_out(profile)


@router.patch(
    "",
    summary="Change the user's profile (time zone)",
    description="Only the fields given change. The time zone is an IANA name such as "
    "'Asia/Tokyo'; questions asked from now on are read in it. Stored memory is unchanged "
    "(it is kept in UTC).",
)
def change_profile(user_id: UserIdPath, body: ProfileUpdate, deps: AppDeps) -> UserProfileOut:
    with deps.db.transaction() as conn:
        return profile_out(update_profile(conn, user_id, body.changes()))
