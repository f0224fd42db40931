"""The demo job (`worldmm demo`)."""
