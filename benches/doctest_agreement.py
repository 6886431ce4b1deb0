#!/usr/bin/env python3
"""`lessonprobe doc` against Python's own doctest on real READMEs.

For each package pinned in benches/doctest-readmes/packages.txt: install it in a venv, take the
README.md of its sdist, and verify that README twice, each in a fresh empty folder with the
environment lessonprobe pins:

  * the reference: this script, under the venv's interpreter, finds the README's Python sessions
    with a Markdown reader of its own and runs each through doctest.DocTestParser and
    DocTestRunner (plain ```python blocks through exec), one namespace for the whole document,
    in document order;
  * `lessonprobe doc --python VENV/bin/python --format json README`.

It prints each block's two verdicts (by FILE:LINE of its opening fence), the blocks one side
found and the other did not, the agreement, and the wall time of each way (median of --rounds).
Targets: agreement >= 98 %, no block missed, lessonprobe <= 2x the direct doctest time.

  python3 benches/doctest_agreement.py [--lessonprobe BIN] [--work DIR] [--rounds N] [--record]

--record also writes benches/runs/YYYY-MM-DD-doctest-readmes.txt (command, commit, machine,
load, the whole output). Python 3 standard library only; needs PyPI through pip.
"""

import argparse
import doctest
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PACKAGES = os.path.join(HERE, "doctest-readmes", "packages.txt")

# The environment every document probe of lessonprobe runs with (docs/lesson-language.md).
PINNED = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "COLUMNS": "80",
    "NO_COLOR": "1",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

SESSION_LANGS = {"pycon", "python-repl", "doctest", "{doctest}"}
CODE_LANGS = {"python", "py", "python3"}
FENCE = re.compile(r"^( *)(`{3,}|~{3,})(.*)$")
QUOTE = re.compile(r"^ {0,3}> ?")
LIST_ITEM = re.compile(r"^( {0,3})([-+*]|[0-9]{1,9}[.)])( {1,4})(?=\S)")


# ---------------------------------------------------------------------------------------------
# The reference: a Markdown reader of its own (CommonMark's fences, indented code blocks, HTML
# comments, block quotes and list items, enough for READMEs), and doctest.


def blocks_of(text):
    """The Python blocks of a Markdown document, in order: dicts with line (of the opening fence,
    or of the first line of an indented block), kind ("session" or "code"), text, offset (the
    document line before the text's first line) and the MyST options of a {doctest} block."""
    lines = text.split("\n")
    found = []
    i = 0
    list_indent = None  # the content column of the list item we are in
    previous = "blank"  # what the line before was: blank, paragraph, or other
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if not stripped:
            previous = "blank"
            i += 1
            continue
        # Only a paragraph's lazy continuation stays in a list item from further left.
        if list_indent is not None and previous != "paragraph" and indent < list_indent:
            list_indent = None
        base = list_indent or 0
        item = LIST_ITEM.match(line[base:]) if indent - base <= 3 else None
        if item:
            list_indent = base + len(item.group(0))
            line = " " * list_indent + line[list_indent:]
            stripped = line.lstrip(" ")
            indent = len(line) - len(stripped)
            base = list_indent
            if not stripped:
                previous = "blank"
                i += 1
                continue
        fence = FENCE.match(line)
        if fence and len(fence.group(1)) - base <= 3 and len(fence.group(1)) >= base:
            mark, info = fence.group(2), fence.group(3).strip()
            if mark[0] == "`" and "`" in info:
                fence = None
        else:
            fence = None
        if fence:
            opened = i
            pad = len(fence.group(1))
            close = re.compile(r"^ {0,%d}%s{%d,}[ \t]*$" % (base + 3, re.escape(mark[0]), len(mark)))
            body = []
            i += 1
            while i < len(lines) and not close.match(lines[i]):
                raw = lines[i]
                cut = len(raw) - len(raw.lstrip(" "))
                body.append(raw[min(cut, pad):])
                i += 1
            i += 1
            add_fenced(found, opened + 1, info, body)
            previous = "other"
            continue
        quote = QUOTE.match(line[base:]) if indent - base <= 3 else None
        if quote:
            # A block quote: its lines without their markers, read as a document of their own.
            opened = i
            inner = []
            while i < len(lines) and QUOTE.match(lines[i][base:]):
                inner.append(QUOTE.sub("", lines[i][base:], count=1))
                i += 1
            for block in blocks_of("\n".join(inner)):
                block["line"] += opened
                block["offset"] += opened
                found.append(block)
            previous = "other"
            continue
        if stripped.startswith("<!--") and indent - base <= 3:
            while i < len(lines) and "-->" not in lines[i]:
                i += 1
            i += 1
            previous = "other"
            continue
        if indent - base >= 4 and previous != "paragraph":
            opened = i
            body = []
            while i < len(lines):
                raw = lines[i]
                if raw.strip() and len(raw) - len(raw.lstrip(" ")) - base < 4:
                    break
                body.append(raw[base + 4:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            first = next((l for l in body if l.strip()), "")
            if first.lstrip().startswith(">>>"):
                found.append(
                    {"line": opened + 1, "kind": "session", "text": "\n".join(body) + "\n",
                     "offset": opened, "options": ""}
                )
            previous = "other"
            continue
        previous = "other" if stripped.startswith("#") else "paragraph"
        i += 1
    return found


def add_fenced(found, line, info, body):
    words = info.split()
    lang = words[0].lower() if words else ""
    first = next((l for l in body if l.strip()), "")
    prompt = first.lstrip().startswith(">>>")
    options = ""
    if lang == "{doctest}":
        # MyST directive options (`:options: +ELLIPSIS`) head the block, and Sphinx applies
        # them; each becomes a blank line so that doctest's line numbers stay the document's.
        head = 0
        while head < len(body) and re.match(r"^:[\w-]+:", body[head]):
            key, _, value = body[head][1:].partition(":")
            if key == "options":
                options = value.strip()
            body[head] = ""
            head += 1
    if lang in SESSION_LANGS or (lang in CODE_LANGS and prompt):
        if not any(l.lstrip().startswith(">>>") for l in body):
            return  # no example: nothing doctest checks (lessonprobe's lint reports it)
        kind = "session"
    elif lang in CODE_LANGS and "no-run" not in words[1:]:
        kind = "code"
    else:
        return
    found.append({"line": line, "kind": kind, "text": "\n".join(body) + "\n", "offset": line,
                  "options": options})


def optionflags(options):
    flags = 0
    for word in options.replace(",", " ").split():
        name = word.lstrip("+-")
        if name in doctest.OPTIONFLAGS_BY_NAME and word.startswith("+"):
            flags |= doctest.OPTIONFLAGS_BY_NAME[name]
    return flags


def reference(path):
    """Every Python block of the document at `path` through doctest (sessions) or exec (plain
    code), one namespace, in order; the verdicts."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    namespace = {"__name__": "__main__"}
    parser = doctest.DocTestParser()
    verdicts = []
    for block in blocks_of(text):
        verdict, detail, failing = "PASS", "", None
        if block["kind"] == "session":
            try:
                test = parser.get_doctest(block["text"], namespace, "%s:%d" % (path, block["line"]),
                                          path, block["offset"])
            except ValueError as e:
                verdicts.append(dict(line=block["line"], kind="session", verdict="ERROR",
                                     detail=str(e)))
                continue
            test.globs = namespace
            report = []
            runner = doctest.DocTestRunner(verbose=False, optionflags=optionflags(block["options"]))
            result = runner.run(test, out=report.append, clear_globs=False)
            if result.failed:
                verdict, detail = "FAIL", "".join(report)
                at = re.search(r'^File ".*", line (\d+)', detail, re.M)
                failing = int(at.group(1)) if at else None
        else:
            try:
                exec(compile("\n" * block["offset"] + block["text"], path, "exec"), namespace)
            except BaseException as e:
                verdict, detail = "FAIL", traceback.format_exc()
                failing = block["offset"] + 1
                for frame in traceback.extract_tb(e.__traceback__):
                    if frame.filename == path and frame.lineno:
                        failing = frame.lineno
                if isinstance(e, SyntaxError) and e.filename == path and e.lineno:
                    failing = e.lineno
        verdicts.append(dict(line=block["line"], kind=block["kind"], verdict=verdict, detail=detail,
                             failing=failing))
    return verdicts


# ---------------------------------------------------------------------------------------------
# The bench: venv, sdists, both runs, the comparison.


def say(text=""):
    print(text, flush=True)


def packages():
    with open(PACKAGES, encoding="utf-8") as f:
        return [l.split("#")[0].strip() for l in f if l.split("#")[0].strip()]


def prepare(work):
    """The venv with the pinned packages and each package's README; [(pin, readme path)]."""
    venv = os.path.join(work, "venv")
    python = os.path.join(venv, "bin", "python")
    pins = packages()
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + pins,
                   check=True)
    sdists = os.path.join(work, "sdists")
    docs = []
    for pin in pins:
        name, version = pin.split("==")
        readme = os.path.join(work, "docs", "%s-%s" % (name, version), "README.md")
        if not os.path.exists(readme):
            subprocess.run([python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--no-binary", ":all:", "-d", sdists, pin], check=True)
            archive = next(os.path.join(sdists, f) for f in sorted(os.listdir(sdists))
                           if re.match(r"%s-%s\.(tar\.gz|zip)$" % (re.escape(name).replace("\\-", "[-_]"),
                                                                    re.escape(version)), f, re.I))
            with tarfile.open(archive) as tar:
                member = next(m for m in tar.getmembers()
                              if re.match(r"^[^/]+/README\.md$", m.name, re.I))
                data = tar.extractfile(member).read()
            os.makedirs(os.path.dirname(readme), exist_ok=True)
            with open(readme, "wb") as f:
                f.write(data)
        docs.append((pin, readme))
    return python, docs


def timed(command, cwd):
    env = dict(os.environ)
    env.update(PINNED)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=600)
    return time.perf_counter() - started, done


def run_reference(python, readme):
    with tempfile.TemporaryDirectory(prefix="doctest-ref-") as cwd:
        out = os.path.join(cwd, ".verdicts.json")
        seconds, done = timed([python, os.path.abspath(__file__), "--reference", readme, "--out", out],
                              cwd)
        if done.returncode != 0:
            raise SystemExit("the reference failed on %s:\n%s" % (readme, done.stderr.decode()))
        with open(out, encoding="utf-8") as f:
            return seconds, json.load(f)


def run_lessonprobe(binary, python, readme):
    with tempfile.TemporaryDirectory(prefix="doctest-lp-") as cwd:
        seconds, done = timed([binary, "doc", "--python", python, "--format", "json", "--no-junit",
                               readme], cwd)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            raise SystemExit("lessonprobe doc %s exited %d with no JSON report:\n%s%s" % (
                readme, done.returncode, done.stdout.decode(), done.stderr.decode()))
        return seconds, report["outcomes"]


def compare(name, readme, ours, theirs):
    """Rows of (line, kind, reference verdict, lessonprobe verdict, agree)."""
    by_line = {o.get("line"): o for o in theirs if o.get("file") and os.path.samefile(o["file"], readme)}
    rows = []
    for block in ours:
        outcome = by_line.pop(block["line"], None)
        got = outcome["verdict"] if outcome else "MISSED"
        same = got == block["verdict"]
        if same and block.get("failing") and outcome:
            # A failure must also name the example (or line) doctest names: FILE:LINE: ...
            named = re.match(r"^.*?:(\d+): ", outcome.get("message") or "")
            same = bool(named) and int(named.group(1)) == block["failing"]
        rows.append((block["line"], block["kind"], block["verdict"], got, same, outcome, block))
    extra = [(line, o) for line, o in sorted(by_line.items())]
    return rows, extra


def bench(args):
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    python, docs = prepare(work)
    binary = os.path.abspath(args.lessonprobe)
    version = subprocess.run([python, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    say("interpreter: %s (%s); lessonprobe: %s; rounds: %d" % (python, version, binary, args.rounds))
    totals = {"blocks": 0, "agree": 0, "missed": 0, "extra": 0, "ref": 0.0, "lp": 0.0}
    failures_seen = []
    for pin, readme in docs:
        ref_times, lp_times = [], []
        for _ in range(args.rounds):
            seconds, ours = run_reference(python, readme)
            ref_times.append(seconds)
            seconds, theirs = run_lessonprobe(binary, python, readme)
            lp_times.append(seconds)
        ref, lp = statistics.median(ref_times), statistics.median(lp_times)
        rows, extra = compare(pin, readme, ours, theirs)
        agree = sum(1 for r in rows if r[4])
        missed = sum(1 for r in rows if r[3] == "MISSED")
        say()
        say("## %s (%s)" % (pin, os.path.relpath(readme, work)))
        say("%d blocks (%d sessions, %d code), agreement %d/%d, missed %d, found only by lessonprobe %d"
            % (len(rows), sum(r[1] == "session" for r in rows), sum(r[1] == "code" for r in rows),
               agree, len(rows), missed, len(extra)))
        say("wall: doctest %.3f s, lessonprobe doc %.3f s (%.2fx)" % (ref, lp, lp / ref if ref else 0))
        for line, kind, want, got, same, outcome, block in rows:
            mark = "" if same else "   <-- MISMATCH"
            if block.get("failing"):
                mark = " at line %d%s" % (block["failing"], mark)
            say("  README.md:%-5d %-7s doctest %-5s lessonprobe %-6s%s" % (line, kind, want, got, mark))
            if not same or (args.verbose and want != "PASS"):
                detail = block["detail"].strip().splitlines()
                say("      doctest says: %s" % (" | ".join(detail[-3:]) if detail else "(passed)"))
                if outcome:
                    say("      lessonprobe says: %s" % (outcome.get("message") or "(passed)"))
            if want != "PASS":
                failures_seen.append("%s README.md:%d %s" % (pin, line, want))
        for line, outcome in extra:
            say("  README.md:%-5s %-7s only lessonprobe: %s %s" % (line, "", outcome["verdict"],
                                                                 outcome.get("name")))
        totals["blocks"] += len(rows)
        totals["agree"] += agree
        totals["missed"] += missed
        totals["extra"] += len(extra)
        totals["ref"] += ref
        totals["lp"] += lp
    say()
    say("## total")
    share = 100.0 * totals["agree"] / totals["blocks"] if totals["blocks"] else 0.0
    ratio = totals["lp"] / totals["ref"] if totals["ref"] else 0.0
    say("documents %d, blocks %d, agreement %d/%d = %.1f %% (target >= 98 %%), missed %d, "
        "found only by lessonprobe %d (target: 0 and 0)"
        % (len(docs), totals["blocks"], totals["agree"], totals["blocks"], share, totals["missed"],
           totals["extra"]))
    say("wall (sum of per-document medians): doctest %.3f s, lessonprobe doc %.3f s, "
        "lessonprobe/doctest %.2fx (target <= 2x)" % (totals["ref"], totals["lp"], ratio))
    say("blocks doctest fails (genuinely stale or environment-bound examples): %d" % len(failures_seen))
    for f in failures_seen:
        say("  " + f)
    met = share >= 98.0 and totals["missed"] == 0 and totals["extra"] == 0 and ratio <= 2.0
    say("targets %s" % ("met" if met else "NOT met"))
    return 0 if met else 1


def record(argv):
    """Runs the bench again under a dated record in benches/runs/."""
    out = os.path.join(HERE, "runs", "%s-doctest-readmes.txt" % time.strftime("%Y-%m-%d", time.gmtime()))
    if os.path.exists(out):
        raise SystemExit("%s exists; move it away first" % out)
    git = lambda *a: subprocess.run(["git", "-C", ROOT] + list(a), stdout=subprocess.PIPE,
                                    text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD"]).returncode != 0
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    command = [sys.executable, os.path.relpath(os.path.abspath(__file__), ROOT)] + [
        a for a in argv if a != "--record"]
    with open(out, "w", encoding="utf-8") as f:
        f.write("# command (in the repository root, commit %s%s):\n" % (
            git("rev-parse", "--short", "HEAD"), ", with uncommitted changes" if dirty else ""))
        f.write("python3 %s\n" % " ".join(command[1:]))
        f.write("# started: %s UTC\n" % time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
        f.write("# nproc: %d; cpu: %s\n" % (os.cpu_count() or 0, cpu))
        f.write("# load average before: %s\n" % open("/proc/loadavg").read().strip())
        f.write("# ---- output ----\n")
        f.flush()
        done = subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        f.write("# ---- end ----\n# exit status: %d\n" % done.returncode)
        f.write("# load average after: %s\n" % open("/proc/loadavg").read().strip())
    print(out)
    return done.returncode


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lessonprobe", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "lessonprobe"))
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "lessonprobe-doctest-readmes"),
                   help="where the venv, sdists and READMEs are kept between runs")
    p.add_argument("--rounds", type=int, default=3, help="runs of each way per document (median)")
    p.add_argument("--verbose", action="store_true", help="show what each side says of every failure")
    p.add_argument("--record", action="store_true")
    p.add_argument("--reference", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.reference:
        # Examples print to stdout; the verdicts go to their own file.
        verdicts = reference(args.reference)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(verdicts, f)
        return 0
    if args.record:
        return record(sys.argv[1:])
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
