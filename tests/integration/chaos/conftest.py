"""The outage tests reuse the query API's session fixtures (one service over the test stack)."""

from tests.integration.query_api.conftest import (  # noqa: F401 - fixtures
    api_deps,
    api_settings,
    client,
    make_user,
)
