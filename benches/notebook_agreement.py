#!/usr/bin/env python3
"""`lessonprobe doc` against nbval on the same notebooks, cell by cell.

Each notebook is verified four ways, each from the repository root with one worker:

  * nbval strict: `PYTHON -m pytest --nbval --nbval-current-env -v NOTEBOOKS`;
  * nbval lax: the same with `--nbval-lax` (outputs compared only where a cell asks);
  * `lessonprobe doc --python PYTHON --jobs 1 --format json NOTEBOOKS`;
  * the same with `--notebook-outputs run-only`, against nbval lax.

It prints each code cell's verdicts (nbval names cells by their position among code cells;
lessonprobe's JSON gives `cell`, the index among all cells, mapped here), the cells one side
found and the other did not, the agreement of each pair, and the wall time of each way (median
of --rounds). Targets: agreement >= 98 %, no cell missed, lessonprobe's time <= nbval's.

  python3 benches/notebook_agreement.py --python VENV/bin/python [--lessonprobe BIN]
      [--rounds N] [--record] [NOTEBOOK_OR_FOLDER ...]

PYTHON needs nbval (0.11.0), ipykernel and nbclient. The default notebooks are nbval's own test
notebooks (tests/fixtures/nbval/) and docs/notebooks/. --record also writes
benches/runs/YYYY-MM-DD-notebook-agreement.txt (command, commit, the whole output).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULTS = ["tests/fixtures/nbval", "docs/notebooks"]
# nbval names a cell `PATH-WITHOUT-.ipynb::ipynb::Cell N`.
NBVAL_LINE = re.compile(r"^(\S+)::ipynb::Cell (\d+) (PASSED|FAILED|SKIPPED|ERROR)")
VERDICTS = {"PASSED": "PASS", "FAILED": "FAIL", "SKIPPED": "SKIP", "ERROR": "ERROR"}


def notebooks(paths):
    found = []
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if name.endswith(".ipynb"):
                    found.append(os.path.join(path, name))
        else:
            found.append(path)
    return found


def timed(command, rounds):
    """The last run's output and the median wall time of `rounds` runs."""
    times = []
    for _ in range(rounds):
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        times.append(time.monotonic() - started)
    return done, statistics.median(times)


def nbval(python, files, lax, rounds):
    command = [python, "-m", "pytest", "--nbval", "--nbval-current-env", "-v",
               "-p", "no:cacheprovider"]
    if lax:
        command.append("--nbval-lax")
    done, seconds = timed(command + files, rounds)
    cells = {}
    for line in done.stdout.splitlines():
        m = NBVAL_LINE.match(line.strip())
        if m:
            file = os.path.normpath(m.group(1) + ".ipynb")
            cells[(file, int(m.group(2)))] = VERDICTS[m.group(3)]
    return cells, seconds


def code_positions(path):
    """Each cell's index among all cells -> its position among code cells (nbval's numbering)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    positions, n = {}, 0
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            positions[index] = n
            n += 1
    return positions


def lessonprobe(binary, python, files, run_only, rounds):
    command = [binary, "doc", "--python", python, "--jobs", "1", "--format", "json",
               "--no-junit"]
    if run_only:
        command += ["--notebook-outputs", "run-only"]
    done, seconds = timed(command + files, rounds)
    cells = {}
    positions = {os.path.normpath(f): code_positions(f) for f in files}
    for outcome in json.loads(done.stdout)["outcomes"]:
        file = os.path.normpath(outcome["file"])
        position = positions.get(file, {}).get(outcome.get("cell"))
        if position is not None:
            cells[(file, position)] = outcome["verdict"]
    return cells, seconds


def compare(title, reference, ours, out):
    keys = sorted(set(reference) | set(ours))
    agree = sum(1 for k in keys if reference.get(k) == ours.get(k))
    missed = [k for k in keys if k not in ours]
    extra = [k for k in keys if k not in reference]
    out.append("## %s" % title)
    for k in keys:
        mark = "" if reference.get(k) == ours.get(k) else "   <-- differs"
        out.append("%s cell %d: nbval %s, lessonprobe %s%s"
                   % (k[0], k[1], reference.get(k, "-"), ours.get(k, "-"), mark))
    share = 100.0 * agree / len(keys) if keys else 100.0
    out.append("agreement: %d of %d cells (%.1f %%); missed by lessonprobe: %d; not seen by nbval: %d"
               % (agree, len(keys), share, len(missed), len(extra)))
    out.append("")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--lessonprobe", default=os.path.join(ROOT, "target/release/lessonprobe"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("paths", nargs="*", default=DEFAULTS)
    args = parser.parse_args()
    files = notebooks(args.paths)
    out = ["notebooks: %s" % " ".join(files), ""]
    strict, strict_time = nbval(args.python, files, False, args.rounds)
    lax, lax_time = nbval(args.python, files, True, args.rounds)
    ours, ours_time = lessonprobe(args.lessonprobe, args.python, files, False, args.rounds)
    ours_lax, ours_lax_time = lessonprobe(args.lessonprobe, args.python, files, True, args.rounds)
    compare("strict: nbval against lessonprobe", strict, ours, out)
    compare("run-only: nbval --nbval-lax against lessonprobe --notebook-outputs run-only",
            lax, ours_lax, out)
    out.append("wall time, median of %d (one worker each): nbval %.2fs, lessonprobe %.2fs; "
               "lax: nbval %.2fs, lessonprobe %.2fs"
               % (args.rounds, strict_time, ours_time, lax_time, ours_lax_time))
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        day = time.strftime("%Y-%m-%d", time.gmtime())
        path = os.path.join(HERE, "runs", "%s-notebook-agreement.txt" % day)
        with open(path, "w", encoding="utf-8") as f:
            f.write("command: %s\ncommit: %s\nmachine: %s, %d CPUs\n\n%s"
                    % (" ".join(sys.argv), commit, os.uname().machine, os.cpu_count(), text))
        sys.stdout.write("recorded in %s\n" % os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
