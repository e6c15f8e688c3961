"""The skeleton of every lab command: its options, result header, progress, files.

Every `python -m lab.<page>` command has the same three options, with one rule each:

- `--quick`: small sizes, seconds (the test suite's run); written under
  test-artifacts/<command>-quick/ unless --out says otherwise;
- `--out DIR`: the folder the command writes into (default: the committed one);
- `--threads N`: torch threads (default: the command's, 1 where the sums must come
  out the same on every machine; 0 or none: torch's own choice).

A command that trains several models has a fourth, `--jobs N` (Command(..., jobs=N)
or add_jobs(parser, N)): models trained at once, each in a process of its own
(default: the command's N; with --quick, 1), resolved by Command.parse or jobs(args).

A new experiment, lab/my_page.py:

    from lab.shared import experiment

    def main(argv=None) -> int:
        cmd = experiment.Command("lab.my_page", __doc__)
        cmd.parser.add_argument("-T", "--seq-lens", type=experiment.int_list())
        args = cmd.parse(argv)                      # --threads applied here
        header = cmd.header("attention-guide/my-page/1")  # the machine, before the run
        data = {**header, "results": run(args)}     # run() calls experiment.progress(...)
        cmd.write("my-page.json", data)             # into cmd.out; says "wrote ..."
        print(table(data))                          # stdout: the result; progress(): stderr
        return 0

experiment.describe_machine(data) prints a result's machine for a page;
lab.shared.common.note_load_after(header) adds the load average after the run.
A command with subcommands (`python -m lab.masks cost`) is made with
Command(..., subcommands=True) and cmd.subcommand(name, help) for each: that
returns the subcommand's parser, with the three options; args.command names it.
"""

import argparse
import sys
from pathlib import Path

import torch

from lab.shared.common import command_line, result_header, write_json, write_text
from lab.shared.paths import ARTIFACTS, RESULTS_DIR
from lab.shared.style import save_svg


def progress(message: str) -> None:
    """A line for whoever watches a long command: to stderr, so stdout stays the result."""
    print(message, file=sys.stderr, flush=True)


def int_list(minimum: int = 1):
    """An argparse type for lists of integers such as T values: '64 128,256' -> [64, 128, 256].

    Spaces or commas between the numbers; each at least `minimum`.
    """

    def parse(text: str) -> list[int]:
        try:
            values = [int(v) for v in text.replace(",", " ").split()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from None
        if not values or any(v < minimum for v in values):
            raise argparse.ArgumentTypeError(f"expected integers >= {minimum}, got {text!r}")
        return values

    return parse


def count(text: str) -> int:
    """An argparse type for a count such as --seeds or --steps: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def randn(*shape: int, seed: int) -> torch.Tensor:
    """A normal tensor of its own seed, whatever else drew from torch's generator."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def add_jobs(parser: argparse.ArgumentParser, default: int) -> None:
    """--jobs N, with the rule of the module docstring; jobs(args) reads it."""
    parser.add_argument(
        "--jobs",
        type=count,
        metavar="N",
        help=f"models trained at once, one process each (default: {default}; --quick: 1)",
    )
    parser.set_defaults(full_run_jobs=default)


def jobs(args: argparse.Namespace) -> int:
    """The processes to train in: --jobs if given, else 1 with --quick, else the
    command's default."""
    if args.jobs is not None:
        return args.jobs
    return 1 if getattr(args, "quick", False) else args.full_run_jobs


def add_options(
    parser: argparse.ArgumentParser, threads: int | None, quick: bool = True, jobs=None
) -> None:
    """--quick, --out and --threads (and --jobs if `jobs`, its default), with the rules
    of the module docstring."""
    if quick:
        parser.add_argument("--quick", action="store_true", help="small sizes: seconds")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="folder to write into (default: the site's)"
    )
    choice = "torch's choice" if threads is None else threads
    parser.add_argument(
        "--threads", type=int, default=threads, help=f"torch threads (default: {choice})"
    )
    if jobs is not None:
        add_jobs(parser, jobs)


class Command:
    """One lab command: its parser, the options every command has, and its files.

    Args:
        module: "lab.<page>", as in `python -m lab.<page>`.
        description: the --help text (the module's docstring).
        threads: the default of --threads (None: torch's choice).
        out: the default of --out for a full run.
        quick: whether the command has --quick.
        jobs: the default of --jobs (None: no --jobs).
        subcommands: True if the command has subcommands (see subcommand()); the
            options then belong to each of them.
    """

    def __init__(
        self,
        module,
        description,
        threads=1,
        out=RESULTS_DIR,
        quick=True,
        subcommands=False,
        jobs=None,
    ):
        self.module, self.default_out = module, Path(out)
        self.threads, self.quick, self.jobs = threads, quick, jobs
        self.parser = argparse.ArgumentParser(
            prog=f"python -m {module}",
            description=description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        self._subparsers = None
        if subcommands:
            self._subparsers = self.parser.add_subparsers(dest="command", required=True)
        else:
            add_options(self.parser, threads, quick, jobs)
        self.argv: list[str] = []
        self.args = None

    def subcommand(self, name: str, help: str, description: str | None = None, **defaults):
        """A subcommand's parser with the three options; defaults override the Command's
        (threads=None, quick=False, jobs=2)."""
        sub = self._subparsers.add_parser(name, help=help, description=description or help)
        options = {"threads": self.threads, "quick": self.quick, "jobs": self.jobs, **defaults}
        add_options(sub, **options)
        return sub

    def parse(self, argv: list[str] | None = None) -> argparse.Namespace:
        """Parse argv (sys.argv[1:] by default) and set torch's threads."""
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.args = self.parser.parse_args(self.argv)
        if "full_run_jobs" in self.args:  # --jobs resolved: args.jobs is a count
            self.args.jobs = jobs(self.args)
        if self.args.threads:  # before a header records it
            torch.set_num_threads(self.args.threads)
        return self.args

    @property
    def out(self) -> Path:
        """The folder to write into: --out, else test-artifacts/<name>-quick with --quick,
        else the committed folder."""
        if self.args.out is not None:
            return Path(self.args.out)
        if getattr(self.args, "quick", False):
            name = self.module.rpartition(".")[2].replace("_", "-")
            return ARTIFACTS / f"{name}-quick"
        return self.default_out

    def header(self, schema: str) -> dict:
        """The first fields of the result file: schema, this command line, the machine."""
        return result_header(schema, command_line(self.module, self.argv))

    def write(self, name: str, content) -> Path:
        """Write into self.out: a dict as JSON, a str as text, a figure as SVG; say so."""
        path = self.out / name
        if isinstance(content, dict):
            write_json(path, content)
        elif isinstance(content, str):
            write_text(path, content)
        else:
            save_svg(content, path)
        progress(f"wrote {path}")
        return path


def describe_machine(data: dict, brief: bool = False) -> str:
    """Where a result was measured, from its header: a few lines for a page.

    brief: one line of processor and torch, one of the load averages (1 min)
    before and after; else the processor, memory, platform, torch and Python,
    the load per core, and the header's note.
    """
    m = data["machine"]
    if brief:
        return (
            f"{m['cpu_model']}, {m['cpu_count']} cores, torch {m['torch']} with"
            f" {m['torch_threads']} thread(s), {m['date'][:10]}\n"
            f"load average (1 min) before the run: {m['load_1min_before']},"
            f" after: {m['load_1min_after']}"
        )
    text = (
        f"{m['cpu_model']}, {m['cpu_count']} cores, {m['memory_gib']} GiB,"
        f" {m['date'][:10]}\n{m['platform']}\ntorch {m['torch']} with"
        f" {m['torch_threads']} threads, Python {m['python']}\n"
        f"load average before the run: {m['load_per_core']} per core"
    )
    if "load_1min_after" in m:
        text += f", after: {m['load_1min_after'] / m['cpu_count']:.2g} per core"
    if data.get("note"):
        text += f"\nnote: {data['note']}"
    return text
