"""EgoLife retrieval benchmark: WorldMM episodic retrieval vs BM25 and dense MiniLM over the
same 30 s windows of participant A1_JAKE's week, scored against the questions' target times."""
