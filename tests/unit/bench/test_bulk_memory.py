"""The HNSW rebuild's memory budget follows the table's size, within bounds."""

from __future__ import annotations

from worldmm.store.bulk import HNSW_BUILD_MEM_MAX, HNSW_BUILD_MEM_MIN, hnsw_build_memory


def test_budget_grows_with_the_table_within_bounds() -> None:
    assert hnsw_build_memory(0) == HNSW_BUILD_MEM_MIN
    assert hnsw_build_memory(2 << 30) == 3 << 30  # 1.5x the table
    assert hnsw_build_memory(100 << 30) == HNSW_BUILD_MEM_MAX
    assert hnsw_build_memory(100 << 30, cap=1 << 30) == 1 << 30
