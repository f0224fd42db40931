"""HTTP routers of the query API (thin: validate, authorize, call ``apps.query_api.ops``)."""
