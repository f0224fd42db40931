"""``worldmm gpu-worker``: the service's knobs are flags, each falling back to its old
``WORLDMM_GPU_*`` variable."""

from __future__ import annotations

from typer.testing import CliRunner

from apps.cli import app


def test_server_knobs_are_flags():
    result = CliRunner().invoke(app, ["gpu-worker", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for flag in ("--backend", "--model-dir", "--host", "--port", "--batch-size", "--max-wait-ms"):
        assert flag in result.output
    assert "--queue-size" in result.output


def test_a_flag_not_given_reads_its_environment_variable(tmp_path):
    bad = CliRunner().invoke(app, ["gpu-worker"], env={"WORLDMM_GPU_BACKEND": "bogus"})
    assert bad.exit_code == 2 and "got 'bogus'" in bad.output
    missing = tmp_path / "no-checkpoint"
    result = CliRunner().invoke(
        app,
        ["gpu-worker", "--backend", "vlm2vec"],
        env={"WORLDMM_GPU_MODEL_DIR": str(missing)},
    )
    assert result.exit_code == 2 and str(missing) in result.output
    out_of_range = CliRunner().invoke(app, ["gpu-worker"], env={"WORLDMM_GPU_PORT": "0"})
    assert out_of_range.exit_code == 2
