#!/usr/bin/env python3
"""`lessonprobe doc` against nbval on the same notebooks, cell by cell.

Each notebook is verified four ways, with the same number of workers (--jobs):

  * nbval strict: `PYTHON -m pytest --nbval --nbval-current-env -v NOTEBOOKS`
    (`-n N --dist loadscope`, pytest-xdist, when N > 1: a notebook's cells stay on one worker);
  * nbval lax: the same with `--nbval-lax` (outputs compared only where a cell asks);
  * `lessonprobe doc --python PYTHON --jobs N --format json NOTEBOOKS`;
  * the same with `--notebook-outputs run-only`, against nbval lax.

Both get the same per-cell limit (--cell-timeout: nbval's `--nbval-cell-timeout`, lessonprobe's
`--timeout`). Every run is in a fresh copy of the notebooks' folders, so what a notebook writes
(`%%writefile`) is not there for the next run.

It prints each code cell's verdicts (nbval names cells by their position among code cells;
lessonprobe's JSON gives `cell`, the index among all cells, mapped here), the cells one side
found and the other did not, the agreement of each pair, and the wall time of each way (median
of --rounds). Targets: agreement >= 98 %, no cell missed, lessonprobe's time <= nbval's.

  python3 benches/notebook_agreement.py --python VENV/bin/python [--lessonprobe BIN]
      [--jobs N] [--rounds N] [--cache DIR] [--long] [--record [NAME]] [NOTEBOOK_OR_FOLDER ...]

The default notebooks are others' (SDISTS: nbval's and nbmake's test notebooks, nbval's and
emcee's tutorials with --long, fetched as pinned sdists into --cache with `pip download`) and the
repository's docs/notebooks/; paths given instead are the repository's. PYTHON needs
REQUIREMENTS (`PYTHON -m pip install ...` them; the script says which are missing).
--record writes benches/runs/YYYY-MM-DD-NAME.txt (NAME defaults to notebook-agreement):
command, commit, load, the whole output.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OURS = ["docs/notebooks"]

# What the notebooks and both tools need in PYTHON, pinned (the versions checked 2026-12-06).
REQUIREMENTS = [
    "nbval==0.11.0", "ipykernel==7.4.0", "nbclient==0.11.0", "pytest==9.2.0",
    "pytest-xdist==3.8.0", "numpy==2.4.6", "matplotlib==3.11.2", "sympy==1.14.0",
    "scipy==1.17.1", "emcee==3.1.6", "corner==2.3.0",
]

# Others' notebooks: (package, version, the sdist's notebooks or folders of them).
SDISTS = [
    # nbval's test notebooks (`test-*` name what nbval expects) and its documentation's tutorial.
    ("nbval", "0.11.0", ["tests", "tests/ipynb-test-samples", "docs/source/index.ipynb"]),
    # nbmake's test notebooks (its tests say which pass).
    ("nbmake", "1.5.5", ["tests/resources"]),
    # emcee's tutorials, as its documentation runs them: about 20 s each through nbval here.
    ("emcee", "3.1.6", ["docs/tutorials/quickstart.ipynb", "docs/tutorials/line.ipynb",
                        "docs/tutorials/moves.ipynb"]),
]
# The packages of SDISTS taken only with --long (each of their notebooks runs for long).
LONG = {"emcee"}

# The sdists' notebooks left out, and why.
LEFT_OUT = [
    ("emcee/docs/tutorials/autocorr.ipynb",
     "minutes of MCMC per run (and celerite, a C++ build); not a network or a GUI"),
    ("emcee/docs/tutorials/monitor.ipynb", "minutes of MCMC per run; not a network or a GUI"),
    ("emcee/docs/tutorials/parallel.ipynb",
     "times a multiprocessing pool and an MPI pool (mpi4py under mpiexec)"),
]

# nbval names a cell `PATH-WITHOUT-.ipynb::ipynb::Cell N`; pytest-xdist puts the verdict first.
NBVAL_CELL = re.compile(r"(\S+)::ipynb::Cell (\d+)")
NBVAL_VERDICT = re.compile(r"\b(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b")
VERDICTS = {"PASSED": "PASS", "FAILED": "FAIL", "SKIPPED": "SKIP", "ERROR": "ERROR",
            "XFAIL": "XFAIL", "XPASS": "XPASS"}
# After a cell over its limit nbval interrupts the kernel and still runs the notebook's later
# cells in it, each marked an expected failure ("Previous cell timed out"): XFAIL when it fails,
# XPASS when it passes. lessonprobe runs them too, in the kernel that answered the interrupt,
# each with its own verdict: the cell ran and failed (XFAIL) or passed (XPASS), so they compare
# as FAIL and PASS, and the result shows nbval's own word beside it.
AFTER_TIMEOUT = {"XFAIL": "FAIL", "XPASS": "PASS"}
# lessonprobe's messages for a cell over its limit, and for the cells after one whose kernel did
# not answer the interrupt (issue 42, "Bounded": an ERROR naming the limit; a kernel killed, the
# later cells not run), where nbval fails the cell: a difference by design, counted apart.
BY_DESIGN = re.compile(r"exceeded its limit of|not run: the kernel was killed at cell")


def missing(python):
    """The REQUIREMENTS that PYTHON lacks or has at another version."""
    script = ("import importlib.metadata as m, sys\n"
              "for r in sys.argv[1:]:\n"
              "    name, version = r.split('==')\n"
              "    try:\n"
              "        ok = m.version(name) == version\n"
              "    except m.PackageNotFoundError:\n"
              "        ok = False\n"
              "    if not ok: print(r)\n")
    done = subprocess.run([python, "-c", script] + REQUIREMENTS, capture_output=True, text=True)
    return done.stdout.split()


def fetched(python, cache, sdists):
    """Each of `sdists` unpacked in `cache` (downloaded once)."""
    os.makedirs(cache, exist_ok=True)
    for package, version, _ in sdists:
        folder = os.path.join(cache, "%s-%s" % (package, version))
        if not os.path.isdir(folder):
            archive = os.path.join(cache, "%s-%s.tar.gz" % (package, version))
            if not os.path.exists(archive):
                subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps",
                                "--no-binary", ":all:", "-d", cache,
                                "%s==%s" % (package, version)], check=True)
            with tarfile.open(archive) as tar:
                tar.extractall(cache, filter="data")


class Plan:
    """The notebooks, as paths relative to the folder every run gets a fresh copy of, and the
    folders copied there (source, relative destination): each run starts from the files as
    shipped, so what one run writes (`%%writefile`) is not there for the next."""

    def __init__(self):
        self.files, self.sources, self.folders = [], [], []

    def add(self, source, folder):
        """The notebook `source`, copied into `folder` with the other files of its own."""
        if (os.path.dirname(source), folder) not in self.folders:
            self.folders.append((os.path.dirname(source), folder))
        self.files.append(os.path.join(folder, os.path.basename(source)))
        self.sources.append(source)

    def fresh(self):
        work = tempfile.mkdtemp(prefix="notebook-agreement-")
        for source, folder in self.folders:
            # Without the sdists' Python files (pytest would load a conftest.py) and notebooks
            # (only the chosen ones are copied).
            shutil.copytree(source, os.path.join(work, folder), dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.ipynb"))
        for file, source in zip(self.files, self.sources):
            shutil.copy(source, os.path.join(work, file))
        return work


def others(cache, sdists, plan):
    """The notebooks of `sdists` (unpacked in `cache`) into `plan`, each package's under its
    name (nbval's cell names replace the dots of a folder's name), without LEFT_OUT."""
    skipped = {path for path, _ in LEFT_OUT}
    for package, version, paths in sdists:
        top = os.path.join(cache, "%s-%s" % (package, version))
        for path in paths:
            for file in notebooks([os.path.join(top, path)]):
                relative = os.path.join(package, os.path.relpath(file, top))
                if relative not in skipped:
                    plan.add(file, os.path.dirname(relative))


def ours(paths, plan):
    """The repository's `paths` (notebooks or folders of them) into `plan`."""
    for file in notebooks([os.path.join(ROOT, p) for p in paths]):
        plan.add(file, os.path.dirname(os.path.relpath(file, ROOT)))


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


def timed(command, rounds, plan):
    """The last run's output and the median wall time of `rounds` runs, each in a fresh copy of
    the notebooks (copied before its clock starts)."""
    times = []
    for _ in range(rounds):
        work = plan.fresh()
        try:
            started = time.monotonic()
            done = subprocess.run(command + plan.files, cwd=work, capture_output=True,
                                  text=True)
            times.append(time.monotonic() - started)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return done, statistics.median(times)


def nbval(args, plan, lax):
    command = [args.python, "-m", "pytest", "--nbval", "--nbval-current-env", "-v",
               "-p", "no:cacheprovider", "--rootdir", ".",
               "--nbval-cell-timeout", str(args.cell_timeout)]
    if args.jobs > 1:
        command += ["-n", str(args.jobs), "--dist", "loadscope"]
    if lax:
        command.append("--nbval-lax")
    done, seconds = timed(command, args.rounds, plan)
    cells = {}
    for line in done.stdout.splitlines():
        cell, verdict = NBVAL_CELL.search(line), NBVAL_VERDICT.search(line)
        if cell and verdict:
            file = os.path.normpath(cell.group(1) + ".ipynb")
            cells[(file, int(cell.group(2)))] = VERDICTS[verdict.group(1)]
    return cells, seconds


def code_positions(path):
    """Each cell's index among all cells -> its position among code cells (nbval's numbering)."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    positions, n = {}, 0
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            positions[index] = n
            n += 1
    return positions


def lessonprobe(args, plan, run_only):
    command = [args.lessonprobe, "doc", "--python", args.python, "--jobs", str(args.jobs),
               "--timeout", "%ds" % args.cell_timeout, "--format", "json", "--no-junit"]
    if run_only:
        command += ["--notebook-outputs", "run-only"]
    done, seconds = timed(command, args.rounds, plan)
    cells = {}
    positions = {os.path.normpath(f): code_positions(s) for f, s in zip(plan.files, plan.sources)}
    try:
        outcomes = json.loads(done.stdout)["outcomes"]
    except ValueError:
        sys.exit("lessonprobe gave no JSON (exit %d): %s" % (done.returncode, done.stderr))
    designed = set()
    for outcome in outcomes:
        file = os.path.normpath(outcome["file"])
        position = positions.get(file, {}).get(outcome.get("cell"))
        if position is not None:
            cells[(file, position)] = outcome["verdict"]
            if BY_DESIGN.search(outcome.get("message") or ""):
                designed.add((file, position))
    return cells, designed, seconds


# Cells whose verdict is chance under either tool, by the notebook's own design: each is run and
# compared like any other, and when the two verdicts differ the cell is counted apart (left out
# of the share), never as agreeing.
BY_CHANCE = {
    ("nbval/docs/source/index.ipynb", 4):
        "prints '1' a random 1 to 7 times against 3 stored: it passes one run in seven",
}


def compare(title, reference, ours, designed, out):
    """Each cell's verdicts, then the agreement: cells with equal verdicts (nbval's XFAIL and
    XPASS after a timed-out cell taken as AFTER_TIMEOUT says), and those besides that differ by
    design (BY_DESIGN, when nbval's verdict is FAIL, XFAIL or XPASS) or by chance (BY_CHANCE)."""
    keys = sorted(set(reference) | set(ours))
    compared = {k: AFTER_TIMEOUT.get(v, v) for k, v in reference.items()}
    agree = [k for k in keys if compared.get(k) == ours.get(k)]
    after_timeout = [k for k in agree if reference[k] in AFTER_TIMEOUT]
    by_design = [k for k in keys if k not in agree and k in designed
                 and reference.get(k) in ("FAIL", "XFAIL", "XPASS")]
    by_chance = [k for k in keys if k not in agree and k in BY_CHANCE and k in ours]
    missed = [k for k in keys if k not in ours]
    extra = [k for k in keys if k not in reference]
    out.append("## %s" % title)
    for k in keys:
        mark = ("" if k in agree else "   <-- differs by design (a cell over its limit)"
                if k in by_design else "   <-- differs by chance: %s" % BY_CHANCE[k]
                if k in by_chance else "   <-- differs")
        theirs = reference.get(k, "-")
        if theirs in AFTER_TIMEOUT:
            theirs += " (after a timed-out cell: as %s)" % AFTER_TIMEOUT[theirs]
        out.append("%s cell %d: nbval %s, lessonprobe %s%s"
                   % (k[0], k[1], theirs, ours.get(k, "-"), mark))
    judged = len(keys) - len(by_chance)
    share = 100.0 * len(agree) / judged if judged else 100.0
    out.append("agreement: %d of %d cells (%.1f %%), %d of them nbval's XFAIL/XPASS after a "
               "timed-out cell taken as FAIL/PASS; differing by design: %d; differing by chance "
               "(left out of the share): %d; missed by lessonprobe: %d; not seen by nbval: %d"
               % (len(agree), judged, share, len(after_timeout), len(by_design), len(by_chance),
                  len(missed), len(extra)))
    out.append("")


def load():
    """The machine's load, said honestly in a recorded result."""
    one, five, _ = os.getloadavg()
    return "load average %.2f (1 min), %.2f (5 min) on %d CPUs" % (one, five, os.cpu_count())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--lessonprobe", default=os.path.join(ROOT, "target/release/lessonprobe"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cell-timeout", type=int, default=15)
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/lessonprobe/sdists"))
    parser.add_argument("--record", nargs="?", const="notebook-agreement")
    parser.add_argument("--long", action="store_true", help="emcee's tutorials too (LONG)")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    args.python = os.path.abspath(args.python) if os.sep in args.python else args.python
    args.lessonprobe = os.path.abspath(args.lessonprobe)
    lacking = missing(args.python)
    if lacking:
        sys.exit("%s lacks: %s (install them: %s -m pip install %s)"
                 % (args.python, " ".join(lacking), args.python, " ".join(lacking)))
    plan = Plan()
    if args.paths:
        ours(args.paths, plan)
    else:
        sdists = [s for s in SDISTS if args.long or s[0] not in LONG]
        fetched(args.python, args.cache, sdists)
        others(args.cache, sdists, plan)
        ours(OURS, plan)
    out = ["notebooks (%d): %s" % (len(plan.files), " ".join(plan.files))]
    if not args.paths:
        out += ["left out: %s: %s" % pair for pair in LEFT_OUT]
        if not args.long:
            out.append("left out: emcee's tutorials (--long takes them)")
    out += ["load before: %s" % load(), ""]
    strict, strict_time = nbval(args, plan, False)
    lax, lax_time = nbval(args, plan, True)
    mine, designed, mine_time = lessonprobe(args, plan, False)
    mine_lax, designed_lax, mine_lax_time = lessonprobe(args, plan, True)
    compare("strict: nbval against lessonprobe", strict, mine, designed, out)
    compare("run-only: nbval --nbval-lax against lessonprobe --notebook-outputs run-only",
            lax, mine_lax, designed_lax, out)
    out.append("wall time, median of %d (%d worker(s) each): nbval %.2fs, lessonprobe %.2fs; "
               "lax: nbval %.2fs, lessonprobe %.2fs"
               % (args.rounds, args.jobs, strict_time, mine_time, lax_time, mine_lax_time))
    out.append("load after: %s" % load())
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        day = time.strftime("%Y-%m-%d", time.gmtime())
        path = os.path.join(HERE, "runs", "%s-%s.txt" % (day, args.record))
        with open(path, "w", encoding="utf-8") as f:
            f.write("command: %s\ncommit: %s\nmachine: %s, %d CPUs\n\n%s"
                    % (" ".join(sys.argv), commit, os.uname().machine, os.cpu_count(), text))
        sys.stdout.write("recorded in %s\n" % os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
