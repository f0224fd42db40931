"""HTTP routers of the query API (thin: validate, authorize, call ``query_api.ops``)."""
