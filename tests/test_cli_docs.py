"""The documentation (the README and the site's pages) says what the CLI does: the options documented for `serve`, `token` and
`experiments` are the parser's own, `tauopt --help` names every token action, the
serve options have help with their defaults, and the schema version is today's."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tauopt.cli import build_parser
from tauopt.store._sqlite import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
# the documentation as one text: the README, then the site's pages
README = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
OPTION = re.compile(r"--[a-z][a-z0-9-]*")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser, common: set[str]) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - common - {"--help"}


def _documented(command: str) -> dict[str, set[str]]:
    """Each `tauopt COMMAND ACTION ...` line of the README's sh blocks: its options."""
    found: dict[str, set[str]] = {}
    for line in README.splitlines():
        m = re.match(rf"tauopt {command} ([a-z-]+)(.*)", line)
        if m:
            usage = m.group(2).split("#", 1)[0]
            found.setdefault(m.group(1), set()).update(OPTION.findall(usage))
    return found


@pytest.mark.parametrize(("command", "common"), [
    ("experiments", {"--db", "--url", "--token-file"}),
    ("token", {"--db"}),
])  # fmt: skip
def test_every_action_and_option_of_the_cli_is_documented_and_nothing_else(command: str, common: set[str]) -> None:
    actions = _subparsers(_subparsers(build_parser())[command])
    documented = _documented(command)
    assert set(documented) == set(actions)
    for name, parser in actions.items():
        assert documented[name] == _options(parser, common), f"tauopt {command} {name}"


def test_the_serve_options_in_the_readme_are_the_parsers() -> None:
    serve = _subparsers(build_parser())["serve"]
    paragraph = README[README.index("Options (`tauopt serve --help`"):README.index("Interactive docs:")]
    assert set(OPTION.findall(paragraph)) - {"--help"} == _options(serve, set())


def test_serve_help_gives_each_option_a_text_and_the_main_ones_their_defaults() -> None:
    serve = _subparsers(build_parser())["serve"]
    for action in serve._actions:
        assert action.help, action.option_strings
    text = " ".join(serve.format_help().split())
    for shown in ("--host HOST the address to listen on (default 127.0.0.1", "(default 8080)", "(default os)"):
        assert shown in text, shown


def test_tauopt_help_names_every_token_action() -> None:
    top = " ".join(build_parser().format_help().split())
    token_line = re.search(r"token (manage bearer tokens \([^)]*\))", top)
    assert token_line is not None
    for action in _subparsers(_subparsers(build_parser())["token"]):
        assert action in token_line.group(1), action


def test_the_readme_states_todays_schema_version() -> None:
    assert f"**Schema** (version {SCHEMA_VERSION})" in README


def test_the_hyperband_example_states_its_schedule_and_ships_its_worker() -> None:
    from tauopt.strategies.hyperband import HyperbandSchedule
    from tauopt.transport.grpc._oracle import HyperbandConfig

    schedule = HyperbandSchedule(27, 3)
    epochs = sum(schedule.size(b, r) * schedule.epochs(b, r) for b in range(schedule.num_brackets()) for r in range(b + 1))
    trials = HyperbandConfig(27, 3, 1).total_trials()
    assert f"the schedule is {trials} trials" in README and f"{epochs} epochs in all" in README
    worker = Path(__file__).resolve().parent.parent / "examples" / "kerastuner_hyperband.py"
    assert "examples/kerastuner_hyperband.py" in README and "kt.Hyperband(" in worker.read_text()
    assert f"= {trials} trials" in worker.read_text() and "MAX_EPOCHS, FACTOR = 27, 3" in worker.read_text()


def test_the_kerastuner_chief_docs_say_where_its_experiment_is_listed() -> None:
    chief = _subparsers(_subparsers(build_parser())["kerastuner"])["chief"]
    (db,) = [a for a in chief._actions if "--db" in a.option_strings]
    assert db.default is None  # in memory: `experiments list` (./tauopt.db by default) cannot show it
    start = README.index("<!-- snippet: kerastuner/chief.sh -->")
    snippet = README[start:README.index("```\n", README.index("```sh", start) + 5)]
    assert "--db" not in snippet
    assert "This chief keeps its experiment in memory (no `--db`)" in README
    assert "`tauopt experiments list --db kt.db`" in README
