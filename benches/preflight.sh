#!/usr/bin/env bash
# The preflight's cost on a course of 40 document probes that declares its environment, second
# run (the cached environment reused): the same course without [environment] is the
# independent baseline, measured alternately in the same run. Offline: the one requirement is a
# wheel made here. Usage: bash benches/preflight.sh [BINARY] [RUNS]
set -euo pipefail
bin=${1:-target/release/lessonprobe}
runs=${2:-15}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache

make_course() { # DIR DECLARED
    mkdir -p "$1/lessons" "$1/project" "$1/wheels"
    {
        echo "# Forty"
        for i in $(seq -w 1 40); do
            printf '\n### Answer EX-41-%s [code]\n\nRun:\n\n```sh\necho %s\n```\n\nExpected output:\n\n```text\n%s\n```\n' "$i" "$i" "$i"
        done
    } > "$1/lessons/41-forty.md"
    if [ "$2" = yes ]; then
        python3 - "$1/wheels" <<'PY'
import sys, zipfile, os
info = "lessonprobe_tiny-1.0.dist-info"
files = {"lessonprobe_tiny/__init__.py": "",
         f"{info}/METADATA": "Metadata-Version: 2.1\nName: lessonprobe-tiny\nVersion: 1.0\n",
         f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
with zipfile.ZipFile(os.path.join(sys.argv[1], "lessonprobe_tiny-1.0-py3-none-any.whl"), "w") as z:
    for p, t in files.items():
        z.writestr(p, t)
PY
        printf -- '--no-index\n--find-links wheels\nlessonprobe-tiny==1.0\n' > "$1/requirements.txt"
        printf '[environment]\nrequirements = "requirements.txt"\n' > "$1/lessonprobe.toml"
    else
        : > "$1/lessonprobe.toml"
    fi
}
make_course "$work/declared" yes
make_course "$work/plain" no
"$bin" env --course "$work/declared" > /dev/null 2>&1   # the first run's cost, not measured

seconds() { # COMMAND...: wall seconds of one run of it, its output dropped
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
declared=(); plain=()
for _ in $(seq "$runs"); do
    declared+=("$(seconds "$bin" --course "$work/declared" --lesson 41 --no-junit)")
    plain+=("$(seconds "$bin" --course "$work/plain" --lesson 41 --no-junit)")
done
# The checks alone, without the probes' noise: `doctor` makes the same lookup and checks.
dd=(); dp=()
for _ in $(seq "$runs"); do
    dd+=("$(seconds "$bin" doctor --course "$work/declared")")
    dp+=("$(seconds "$bin" doctor --course "$work/plain")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
md=$(median "${declared[@]}"); mp=$(median "${plain[@]}")
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "course: 40 document probes (sh), $runs runs each, alternating"
echo "declared environment, reused (median wall): ${md}s"
echo "no [environment] (baseline, median wall):    ${mp}s"
echo "preflight + reused environment (difference): $(echo "$md - $mp" | bc)s (limit 0.1s)"
mdd=$(median "${dd[@]}"); mdp=$(median "${dp[@]}")
echo "doctor, declared environment reused (median): ${mdd}s"
echo "doctor, no [environment] (median):            ${mdp}s"
echo "environment lookup + its check (difference):  $(echo "$mdd - $mdp" | bc)s (limit 0.1s)"
