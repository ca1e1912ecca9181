"""`python -m ttc.engine.journal RUN_DIR_OR_JOURNAL`: a journal's lines as plain JSON lines on
stdout, compact or plain (`| jq`, `| grep`)."""

from __future__ import annotations

import sys
from pathlib import Path

from ttc.engine.contract._errors import DataError
from ttc.engine.journal._journal import journal_text


def main(argv: list[str]) -> int:
    """Prints the journal `argv` names (a run directory's journal.jsonl, or the file itself)."""
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        sys.stderr.write(__doc__.split(":", 1)[0].strip("`") + "\n")
        return 2
    path = Path(argv[0])
    if path.is_dir():
        path = path / "journal.jsonl"
    if not path.exists():
        sys.stderr.write(f"{path}: no such file\n")
        return 2
    out = sys.stdout.buffer
    try:
        for line in journal_text(path):
            out.write(line)
        out.flush()
    except DataError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    except BrokenPipeError:  # `| head`
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
