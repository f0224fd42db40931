"""Wire models: the request and response bodies the query API validates and the client
sends and reads (plain pydantic, no web framework), so the two cannot drift apart."""
