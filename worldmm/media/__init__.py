"""Stored media: the window container format, the capture spool, a window's media path."""
