"""Tests for lab/todays_cost.py: the cost of today's pieces, its result file and its table.

The quick run's sign check: at small T the sparse and compressed pieces' time grows less
per doubling than dense attention's. Every piece's cache bytes are what its cache really
holds after a cached forward; the table says what the committed file says; the committed
file covers every piece and shows the sparse and compressed pieces sub-quadratic.
"""

import dataclasses
import json
import re

import pytest

from lab import todays_cost
from lab.parts.todays_cost_pieces import PIECES, QUICK, build

SIGN_CHECKED = ["dense", "dsa", "v4_hca", "v4_csa"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("todays-cost")
    todays_cost.main(["--quick", "--pieces", *SIGN_CHECKED, "--out", str(out)])
    return json.loads((out / "todays-cost.json").read_text())


def test_quick_run_sparse_and_compressed_grow_less_than_dense(quick):
    assert quick["schema"] == todays_cost.SCHEMA
    assert list(quick["results"]) == SIGN_CHECKED
    # over the whole range (two doublings), steadier than one doubling on a busy machine
    growth = {n: cells[-1]["cpu_ms"] / cells[0]["cpu_ms"] for n, cells in quick["results"].items()}
    for name in SIGN_CHECKED[1:]:
        assert growth[name] < growth["dense"], growth


@pytest.mark.parametrize("name", [n for n, p in PIECES.items() if p.cache_bytes])
def test_cache_bytes_are_what_the_cache_holds(name):
    layer = build(name, QUICK)
    assert todays_cost.check_cache_bytes(name, layer, QUICK, 600)["bytes"] > 0
    # planted: the formula one number off, and the check says so
    wrong = dataclasses.replace(
        PIECES[name], cache_bytes=lambda z, T: PIECES[name].cache_bytes(z, T) + 4
    )
    planted = {**PIECES, name: wrong}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(todays_cost, "PIECES", planted)
        with pytest.raises(AssertionError, match=f"{name}: its cache holds"):
            todays_cost.check_cache_bytes(name, layer, QUICK, 600)


ROW = re.compile(r"^\| (.+?) \| ([\d.]+) \| (\d+) \| ([\d. ·]+) \| (.*?) \| (.*?) \|$")


def check_table(text: str, data: dict) -> None:
    """Every row of the table says what the result file says."""
    rows = [m for line in text.splitlines() if (m := ROW.match(line))]
    assert len(rows) == len(data["results"])
    summary = todays_cost.summary(data)
    for row, (name, cells) in zip(rows, data["results"].items(), strict=True):
        label, first, last, growth, per_token, held = row.groups()
        assert label == data["pieces"][name]["label"]
        assert float(first) == pytest.approx(cells[0]["cpu_ms"], abs=0.05)
        assert int(last) == round(cells[-1]["cpu_ms"])
        factors = [float(f) for f in growth.split(" · ")]
        assert factors == pytest.approx(todays_cost.per_doubling(cells), abs=0.051)
        if cells[-1]["cache_bytes"] is not None:
            assert float(per_token) == summary[name]["bytes_per_token"]
            assert held == todays_cost.human_bytes(cells[-1]["cache_bytes"])


def test_the_table_says_what_the_committed_file_says(tmp_path):
    data = json.loads(todays_cost.RESULT_FILE.read_text())
    text = todays_cost.table()
    check_table(text, data)
    assert '??? note "How this was measured"' in text and data["command"] in text
    # planted: a table of other numbers, or a file changed under the table, fail the check
    with pytest.raises(AssertionError):
        check_table(
            text.replace(f"| {round(data['results']['dense'][-1]['cpu_ms'])} |", "| 1 |", 1), data
        )
    changed = json.loads(json.dumps(data))
    changed["results"]["dsa"][0]["cpu_ms"] += 10
    with pytest.raises(AssertionError):
        check_table(text, changed)
    (tmp_path / "r.json").write_text(json.dumps(changed))
    check_table(todays_cost.table(tmp_path / "r.json"), changed)


def test_committed_result_covers_every_piece_and_the_bound():
    data = json.loads(todays_cost.RESULT_FILE.read_text())
    assert data["schema"] == todays_cost.SCHEMA
    assert list(data["results"]) == list(PIECES), "rerun python -m lab.todays_cost"
    seq_lens = data["settings"]["seq_lens"]
    assert max(seq_lens) >= 4 * todays_cost.PAST_T
    for name, cells in data["results"].items():
        assert [c["T"] for c in cells] == seq_lens
        if PIECES[name].growth == "sub-quadratic":
            past = data["pieces"][name]["largest_past"]
            assert past is not None and past <= todays_cost.BOUND, (name, past)
