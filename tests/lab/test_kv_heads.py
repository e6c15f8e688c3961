"""Tests for `python -m lab.kv_heads`: the quick run, and the committed result of the full one."""

import json

from lab.kv_heads import FULL, main
from lab.shared.common import RESULTS_DIR


def test_experiment_command_runs_quickly(tmp_path, capsys):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "kv-heads.json").read_text())
    assert data["command"] == f"python -m lab.kv_heads --quick --out {tmp_path}"
    assert list(data["variants"]) == ["MHA", "GQA", "MQA", "MLA"]
    check_result(data)
    assert "MLA" in capsys.readouterr().out


def check_result(data: dict) -> None:
    """What the page reads from a result file, and what must hold in any."""
    machine = data["machine"]
    assert machine["cpu_model"] and machine["torch"] and "load_1min_after" in machine
    v = data["variants"]
    # Cache bytes: MHA 4 heads, GQA 2, MQA 1, MLA a latent of 2 D (MQA's size).
    assert v["MHA"]["cache_bytes_fp32"] == 2 * v["GQA"]["cache_bytes_fp32"]
    assert v["GQA"]["cache_bytes_fp32"] == 2 * v["MQA"]["cache_bytes_fp32"]
    assert v["MLA"]["cache_bytes_fp32"] == v["MQA"]["cache_bytes_fp32"]
    # Sharing key/value heads removes parameters; MLA's up-projections add some back.
    params = [v[name]["parameters"] for name in ("MHA", "GQA", "MQA")]
    assert params == sorted(params, reverse=True)
    for r in v.values():
        assert len(r["val_loss"]) == data["settings"]["seeds"]
        assert r["ms_per_token"] > 0
        assert r["cache_bytes_16bit"] * 2 == r["cache_bytes_fp32"]


def test_committed_result_is_the_full_run():
    data = json.loads((RESULTS_DIR / "kv-heads.json").read_text())
    assert data["command"] == "python -m lab.kv_heads"
    assert data["settings"] == FULL
    check_result(data)
