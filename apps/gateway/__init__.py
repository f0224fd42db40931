"""`worldmm gateway`: a recording sent as a glasses session."""
