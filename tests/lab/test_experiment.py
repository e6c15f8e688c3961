"""Tests for lab/shared/experiment.py: the options every lab command shares, their one rule each,
the result file it writes, and the machine lines a page prints."""

import argparse
import ast
import json

import pytest
import torch

from lab.shared import experiment
from lab.shared.common import ROOT
from lab.shared.paths import ARTIFACTS, RESULTS_DIR

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


def test_jobs_follow_one_rule(capsys):
    cmd = experiment.Command("lab.my_page", "a test", jobs=3)
    assert cmd.parse([]).jobs == 3  # the command's default for a full run
    assert cmd.parse(["--quick"]).jobs == 1  # the suite's quick run: one process
    assert cmd.parse(["--quick", "--jobs", "2"]).jobs == 2  # given: as given
    assert cmd.parse(["--jobs", "1"]).jobs == 1
    with pytest.raises(SystemExit):
        cmd.parse(["--jobs", "0"])
    assert "argument --jobs: must be positive, got 0" in capsys.readouterr().err
    assert "jobs" not in experiment.Command("lab.my_page", "a test").parse([])


def test_jobs_on_a_subcommand_and_on_a_parser_of_its_own():
    cmd = experiment.Command("lab.my_page", "a test", subcommands=True)
    cmd.subcommand("sweep", help="trains models", jobs=2)
    cmd.subcommand("timing", help="trains none")
    assert cmd.parse(["sweep"]).jobs == 2 and cmd.parse(["sweep", "--quick"]).jobs == 1
    assert "jobs" not in cmd.parse(["timing"])
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    experiment.add_jobs(parser, 4)
    assert experiment.jobs(parser.parse_args([])) == 4
    assert experiment.jobs(parser.parse_args(["--quick"])) == 1
    assert experiment.jobs(parser.parse_args(["--jobs", "3"])) == 3


PARALLEL_SPELLINGS = {"--jobs", "-j", "--workers", "--processes", "--procs", "--parallel"}


def options_defined(source: str) -> set[str]:
    """The option strings a module passes to add_argument."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            found |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    return found


@pytest.mark.parametrize(
    "path", sorted((ROOT / "lab").rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_models_trained_at_once_is_one_option_defined_once(path):
    """Every lab command that trains in parallel takes experiment's --jobs: none spells its
    own (--workers, --processes, -j, or a --jobs of other rules)."""
    if path.name == "experiment.py":
        assert "--jobs" in options_defined(path.read_text(encoding="utf-8"))
        return
    own = options_defined(path.read_text(encoding="utf-8")) & PARALLEL_SPELLINGS
    assert not own, (
        f"{path.relative_to(ROOT)} defines {sorted(own)}: use experiment.Command(..., jobs=N) or "
        "experiment.add_jobs(parser, N), the one --jobs"
    )


def test_the_parallel_commands_take_jobs(capsys):
    from lab import beyond_softmax, kv_heads_recall, positions, streaming, taming_softmax

    commands = {
        streaming.main: [], positions.main: [], kv_heads_recall.main: [],
        taming_softmax.main: ["growth"], beyond_softmax.main: ["recall"],
    }  # fmt: skip
    for main, sub in commands.items():
        with pytest.raises(SystemExit):
            main([*sub, "--help"])
        assert "--jobs N" in capsys.readouterr().out, main.__module__


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
