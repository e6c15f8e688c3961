"""Tests for lab/experiment.py: the options every lab command shares, their one rule each,
the result file it writes, and the machine lines a page prints."""

import argparse
import json

import pytest
import torch

from lab import experiment
from lab.paths import ARTIFACTS, RESULTS_DIR

MACHINE = {
    "cpu_model": "AMD EPYC", "cpu_count": 2, "memory_gib": 23.5, "date": "2026-11-30T10:00:00",
    "platform": "Linux", "torch": "2.13.0+cpu", "torch_threads": 1, "python": "3.11.7",
    "load_per_core": 0.5, "load_1min_before": 1.0, "load_1min_after": 3.0,
}  # fmt: skip


def test_int_lists_take_spaces_or_commas_and_name_the_rule():
    assert experiment.int_list()("64 128,256") == [64, 128, 256]
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected integers >= 128, got '64'"):
        experiment.int_list(minimum=128)("64")
    with pytest.raises(argparse.ArgumentTypeError, match="expected integers, got '64 x'"):
        experiment.int_list()("64 x")


def test_a_count_is_a_positive_integer_and_names_the_rule():
    assert experiment.count("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="must be positive, got 0"):
        experiment.count("0")
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer, got 'x'"):
        experiment.count("x")


def test_out_follows_one_rule(tmp_path):
    cmd = experiment.Command("lab.my_page", "a test", threads=None)
    cmd.parse([])
    assert cmd.out == RESULTS_DIR
    cmd.parse(["--quick"])
    assert cmd.out == ARTIFACTS / "my-page-quick"
    cmd.parse(["--quick", "--out", str(tmp_path)])
    assert cmd.out == tmp_path


def test_threads_are_set_before_the_header_records_them(tmp_path, capsys):
    before = torch.get_num_threads()
    try:
        cmd = experiment.Command("lab.my_page", "a test", threads=before + 1)
        cmd.parse(["--out", str(tmp_path)])
        header = cmd.header("attention-guide/test/1")
    finally:
        torch.set_num_threads(before)
    assert header["machine"]["torch_threads"] == before + 1
    assert header["command"] == f"python -m lab.my_page --out {tmp_path}"
    path = cmd.write("result.json", {**header, "results": [1, 2]})
    assert json.loads(path.read_text())["results"] == [1, 2]
    assert f"wrote {path}" in capsys.readouterr().err  # stdout stays the result


def test_subcommands_each_have_the_three_options():
    cmd = experiment.Command("lab.my_page", "a test", subcommands=True)
    cmd.subcommand("cost", help="a subcommand", threads=None)
    args = cmd.parse(["cost", "--quick", "--threads", "0"])
    assert args.command == "cost" and args.quick and args.threads == 0


def test_machine_lines_long_and_brief():
    data = {"machine": MACHINE, "note": "a busy machine"}
    assert experiment.describe_machine(data) == (
        "AMD EPYC, 2 cores, 23.5 GiB, 2026-11-30\nLinux\n"
        "torch 2.13.0+cpu with 1 threads, Python 3.11.7\n"
        "load average before the run: 0.5 per core, after: 1.5 per core\nnote: a busy machine"
    )
    assert experiment.describe_machine(data, brief=True) == (
        "AMD EPYC, 2 cores, torch 2.13.0+cpu with 1 thread(s), 2026-11-30\n"
        "load average (1 min) before the run: 1.0, after: 3.0"
    )
