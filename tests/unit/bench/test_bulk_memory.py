"""The HNSW rebuild's memory budget follows the table's size, within bounds."""

from __future__ import annotations

from bench.bulk import HNSW_BUILD_MEM_MAX, HNSW_BUILD_MEM_MIN, hnsw_build_memory


def test_budget_grows_with_the_table_within_bounds() -> None:
    assert hnsw_build_memory(0) == HNSW_BUILD_MEM_MIN
    assert hnsw_build_memory(2 << 30) == 3 << 30  # 1.5x the table
    assert hnsw_build_memory(100 << 30) == HNSW_BUILD_MEM_MAX
    assert hnsw_build_memory(100 << 30, cap=1 << 30) == 1 << 30


def test_the_rebuild_may_use_half_the_available_memory(tmp_path) -> None:
    from bench.bulk_load import BUILD_MEM_CEILING, build_memory_cap

    def cap(available_kib: int) -> int:
        meminfo = tmp_path / "meminfo"
        meminfo.write_text(f"MemTotal: 99 kB\nMemAvailable: {available_kib} kB\n")
        return build_memory_cap(str(meminfo))

    assert cap(20 << 20) == 10 << 30  # 20 GiB available
    assert cap(4 << 20) == HNSW_BUILD_MEM_MAX  # never below the library's own cap
    assert cap(100 << 20) == BUILD_MEM_CEILING
    assert build_memory_cap(str(tmp_path / "absent")) == HNSW_BUILD_MEM_MAX
