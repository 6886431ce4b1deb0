//! A course at scale: synthetic courses of N lessons × M small exercises (shell and Python,
//! each saving a file and printing) over projects of 1, 200, 2,000 and 20,000 files, verified
//! by `lessonprobe --jobs J` (a first run, its working copies made, and a second run with
//! nothing changed, its copies kept) and, in the same run, by the independent limit: the same
//! saved files and commands run in place in one copy of the project by `xargs -P J`, no
//! isolation.
//! With `LESSONPROBE_BENCH_WATCH=1`, also `lessonprobe --watch` over each project: the time from
//! a saved lesson file to the rerun's first verdict, beside that probe's own time run in place.
//! `cargo test --release --bench course` (see benches/README.md for the settings).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lessonprobe_testkit::bench::setting;

/// One exercise: the file it saves and what its run command prints.
struct Exercise {
    lesson: usize,
    number: usize,
    file: String,
    body: String,
    command: String,
    expected: String,
}

/// A synthetic course on disk: its root, its exercises, and the in-place limit's scripts.
struct Course {
    root: PathBuf,
    files: usize,
    exercises: Vec<Exercise>,
}

/// `files` files of about 4 KiB (the issue's 2,000 files are 8 MB) in folders of 100.
fn write_project(project: &Path, files: usize) {
    let filler: String =
        "# filler line of a project module, as long as a real one\n".repeat(4096 / 56);
    for i in 0..files {
        let folder = project.join(format!("pkg{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&folder).unwrap();
        }
        std::fs::write(folder.join(format!("mod{i:05}.py")), &filler).unwrap();
    }
    std::fs::write(project.join("pkg000/__init__.py"), "").unwrap();
}

fn exercises(lessons: usize, per_lesson: usize) -> Vec<Exercise> {
    let mut all = Vec::new();
    for lesson in 1..=lessons {
        for number in 1..=per_lesson {
            let tag = format!("{lesson}-{number}");
            all.push(if number % 2 == 0 {
                Exercise {
                    lesson,
                    number,
                    file: format!("ex_{lesson}_{number}.py"),
                    body: format!(
                        "from pathlib import Path\nPath('out_{lesson}_{number}.txt').write_text('{tag}')\nprint('python', Path('out_{lesson}_{number}.txt').read_text())\n"
                    ),
                    command: format!("python3 ex_{lesson}_{number}.py"),
                    expected: format!("python {tag}\n"),
                }
            } else {
                Exercise {
                    lesson,
                    number,
                    file: format!("ex_{lesson}_{number}.sh"),
                    body: format!("echo {tag} > out_{lesson}_{number}.txt\necho shell $(cat out_{lesson}_{number}.txt)\n"),
                    command: format!("sh ex_{lesson}_{number}.sh"),
                    expected: format!("shell {tag}\n"),
                }
            });
        }
    }
    all
}

impl Course {
    fn write(root: &Path, files: usize, lessons: usize, per_lesson: usize) -> Course {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(root.join("lessons")).unwrap();
        write_project(&root.join("project"), files);
        let exercises = exercises(lessons, per_lesson);
        for lesson in 1..=lessons {
            let mut text = format!("# Lesson {}\n\n", 99 + lesson);
            for ex in exercises.iter().filter(|e| e.lesson == lesson) {
                let fence = if ex.file.ends_with(".py") {
                    "python"
                } else {
                    "sh"
                };
                text.push_str(&format!(
                    "### Answer EX-{}-{:02} [code]\n\nSave as `{}`, run from `project/`:\n\n```{fence}\n{}```\n\nRun:\n\n```sh\n{}\n```\n\nExpected output:\n\n```text\n{}```\n\n",
                    99 + lesson, ex.number, ex.file, ex.body, ex.command, ex.expected
                ));
            }
            std::fs::write(root.join(format!("lessons/{}-bench.md", 99 + lesson)), text).unwrap();
        }
        Course {
            root: root.to_owned(),
            files,
            exercises,
        }
    }

    /// The independent limit: a copy of the project made once (not timed), then every saved
    /// file written and every command run in place, `jobs` at a time, output compared.
    fn in_place(&self, jobs: usize) -> Duration {
        let place = self.root.join("in-place");
        let _ = std::fs::remove_dir_all(&place);
        let status = Command::new("cp")
            .arg("-r")
            .arg(self.root.join("project"))
            .arg(&place)
            .status()
            .unwrap();
        assert!(status.success());
        let scripts = self.root.join("in-place-scripts");
        let _ = std::fs::remove_dir_all(&scripts);
        std::fs::create_dir_all(&scripts).unwrap();
        let mut list = String::new();
        for ex in &self.exercises {
            let script = scripts.join(format!("{}-{}.sh", ex.lesson, ex.number));
            std::fs::write(
                &script,
                format!(
                    "cat > {} <<'EOF_SAVED'\n{}EOF_SAVED\ntest \"$({})\" = '{}'\n",
                    ex.file,
                    ex.body,
                    ex.command,
                    ex.expected.trim_end()
                ),
            )
            .unwrap();
            list.push_str(&format!("{}\n", script.display()));
        }
        std::fs::write(scripts.join("list"), list).unwrap();
        let started = Instant::now();
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "xargs -P {jobs} -n 1 sh -e < {}",
                scripts.join("list").display()
            ))
            .current_dir(&place)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .status()
            .unwrap();
        let took = started.elapsed();
        assert!(status.success(), "the in-place limit failed");
        took
    }

    /// `lessonprobe --course ROOT --jobs J`, every probe passing, its working copies kept in
    /// `cache` (emptied first when `fresh`).
    fn lessonprobe(&self, bin: &Path, jobs: usize, cache: &Path, fresh: bool) -> Duration {
        if fresh {
            let _ = std::fs::remove_dir_all(cache);
        }
        let started = Instant::now();
        let out = self
            .command(bin, jobs, cache)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let want = format!("{} passed, 0 failed, 0 errors", self.exercises.len());
        assert!(
            out.status.success() && stdout.contains(&want),
            "lessonprobe did not pass every probe:\n{}",
            stdout.lines().rev().take(5).collect::<Vec<_>>().join("\n")
        );
        took
    }

    /// `lessonprobe --course ROOT --jobs J` over the synthetic lessons, its working copies kept
    /// in `cache`.
    fn command(&self, bin: &Path, jobs: usize, cache: &Path) -> Command {
        let mut command = Command::new(bin);
        command
            .env("XDG_CACHE_HOME", cache)
            .arg("--course")
            .arg(&self.root)
            // Only the synthetic lessons (100 and up), not the built-in checkpoints.
            .args(["--select", "EX-1*", "--no-junit"])
            // A first run over 20,000 files on a loaded machine copies past the default 30 s.
            .args(["--timeout", "300s", "--jobs", &jobs.to_string()])
            .current_dir(&self.root);
        command
    }

    /// `lessonprobe --watch` over the course: after its first run, a lesson file saved (its
    /// text written again, as an editor saves it) `rounds` times, each time the time from the
    /// save to the rerun's first verdict, and that probe's own time run in place (the in-place
    /// limit's copy and scripts, made by [`Course::in_place`]).
    fn watch(
        &self,
        bin: &Path,
        jobs: usize,
        cache: &Path,
        rounds: usize,
    ) -> Vec<(Duration, Duration)> {
        let mut child = self
            .command(bin, jobs, cache)
            .arg("--watch")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, told) = mpsc::channel();
        let verdicts = tx.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let verdict = ["PASS", "FAIL", "ERROR"]
                    .iter()
                    .any(|v| line.starts_with(v));
                if verdict && verdicts.send(Told::Verdict(line)).is_err() {
                    return;
                }
            }
        });
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("waiting for a change") && tx.send(Told::Waiting).is_err() {
                    return;
                }
            }
        });
        let lesson = self.root.join("lessons/100-bench.md");
        let text = std::fs::read(&lesson).unwrap();
        let per_run = self.exercises.len();
        let mut seen = 0;
        let mut waits = 0;
        let mut next = |told: &mpsc::Receiver<Told>| {
            let got = told
                .recv_timeout(Duration::from_secs(600))
                .expect("lessonprobe --watch went silent");
            match &got {
                Told::Verdict(_) => seen += 1,
                Told::Waiting => waits += 1,
            }
            (got, seen, waits)
        };
        let mut measured = Vec::new();
        for round in 1..=rounds {
            // The previous run has ended.
            while !matches!(next(&told), (Told::Waiting, _, w) if w == round) {}
            std::fs::write(&lesson, &text).unwrap();
            let saved = Instant::now();
            let first = loop {
                if let (Told::Verdict(line), n, _) = next(&told) {
                    if n == round * per_run + 1 {
                        break line;
                    }
                }
            };
            measured.push((saved.elapsed(), first));
        }
        // SAFETY: kill only sends a signal to the process started above.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = child.wait();
        // Once the watch has ended: the limit's copy is inside the course it watched.
        measured
            .into_iter()
            .map(|(took, first)| (took, self.own_time(&first)))
            .collect()
    }

    /// The time the probe of the verdict line `line` (`PASS [ 0.01s] lesson 100 EX-100-03 …`)
    /// takes run in place: its saved file written and its command run, as the limit does it.
    fn own_time(&self, line: &str) -> Duration {
        let name = line
            .split_whitespace()
            .find(|w| w.starts_with("EX-"))
            .unwrap_or_else(|| panic!("no probe named in {line:?}"));
        let mut parts = name.split('-').skip(1).map(|n| n.parse::<usize>().unwrap());
        let (lesson, number) = (parts.next().unwrap() - 99, parts.next().unwrap());
        let script = self
            .root
            .join(format!("in-place-scripts/{lesson}-{number}.sh"));
        let started = Instant::now();
        let status = Command::new("sh")
            .arg("-e")
            .arg(&script)
            .current_dir(self.root.join("in-place"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .status()
            .unwrap();
        let took = started.elapsed();
        assert!(status.success(), "{} failed in place", script.display());
        took
    }
}

/// What `lessonprobe --watch` tells the bench: a verdict line, or that a run ended.
enum Told {
    Verdict(String),
    Waiting,
}

/// One measured row: a name, and how long it took on a course.
struct Row {
    name: &'static str,
    run: Box<dyn Fn(&Course) -> Duration>,
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// One project size's median wall and CPU times, a row each, and the watch's figures.
type Measured = (
    usize,
    Vec<Duration>,
    Vec<Duration>,
    Vec<(Duration, Duration)>,
);

/// CPU time (user + system) of every child process waited for so far, and of theirs: a
/// figure the load of other processes on a shared machine moves far less than wall time.
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn main() {
    let lessons = setting("LESSONPROBE_BENCH_LESSONS", 20);
    let per_lesson = setting("LESSONPROBE_BENCH_EXERCISES", 20);
    let jobs = setting("LESSONPROBE_BENCH_JOBS", 2);
    let rounds = setting("LESSONPROBE_BENCH_ROUNDS", 3);
    let sizes: Vec<usize> = std::env::var("LESSONPROBE_BENCH_FILES")
        .unwrap_or_else(|_| "1,200,2000,20000".into())
        .split(',')
        .map(|s| {
            s.trim().replace('_', "").parse().unwrap_or_else(|_| {
                panic!("LESSONPROBE_BENCH_FILES={s}: whole numbers separated by commas are needed")
            })
        })
        .collect();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_lessonprobe"));
    let probes = lessons * per_lesson;
    // Not named `lessonprobe-*`: a watch ignores such entries of the temporary folder as its own.
    let scratch = tempfile::Builder::new()
        .prefix("bench-course-")
        .tempdir()
        .unwrap();
    let cache = scratch.path().join("cache");
    let (first_bin, first_cache, watch_bin) = (bin.clone(), cache.clone(), bin.clone());
    let small_bin = bin.clone();
    let baseline_cache = scratch.path().join("cache-baseline");
    let second_cache = cache;
    let mut rows: Vec<Row> = vec![
        Row {
            name: "in place (limit)",
            run: Box::new(move |c: &Course| c.in_place(jobs)),
        },
        Row {
            name: "lessonprobe, first run",
            run: Box::new(move |c: &Course| c.lessonprobe(&first_bin, jobs, &first_cache, true)),
        },
        Row {
            name: "lessonprobe, second run",
            run: Box::new(move |c: &Course| c.lessonprobe(&bin, jobs, &second_cache, false)),
        },
    ];
    // The second run over the smallest project, in the same rounds as every size's: the
    // comparison of a size with the smallest is then made on the same machine state, as the
    // limit's is (sizes are measured one after another, and the load moves between them).
    let smallest = sizes.iter().copied().min().unwrap_or(1);
    let small_root = scratch.path().join("course-smallest");
    let small_cache = scratch.path().join("cache-smallest");
    let small: std::cell::OnceCell<Course> = std::cell::OnceCell::new();
    rows.push(Row {
        name: "lessonprobe, second run over the smallest project",
        run: Box::new(move |_: &Course| {
            let course = small.get_or_init(|| {
                let course = Course::write(&small_root, smallest, lessons, per_lesson);
                course.lessonprobe(&small_bin, jobs, &small_cache, true);
                course
            });
            course.lessonprobe(&small_bin, jobs, &small_cache, false)
        }),
    });
    // Another binary beside this one (e.g. the previous release), on projects up to a size: its
    // first run, or with LESSONPROBE_BENCH_BASELINE_SECOND=1 its second run (its copies kept
    // in a cache of its own, made by a run before the first round).
    if let Ok(baseline) = std::env::var("LESSONPROBE_BENCH_BASELINE") {
        let up_to = setting("LESSONPROBE_BENCH_BASELINE_FILES", 200);
        let second = setting("LESSONPROBE_BENCH_BASELINE_SECOND", 0) > 0;
        let baseline = PathBuf::from(baseline);
        rows.push(Row {
            name: match second {
                true => "baseline binary, second run",
                false => "baseline binary",
            },
            run: Box::new(move |c: &Course| {
                if c.files > up_to {
                    return Duration::ZERO;
                }
                let made = baseline_cache.join(format!("made-{}", c.files));
                if second && !made.exists() {
                    c.lessonprobe(&baseline, jobs, &baseline_cache, true);
                    std::fs::write(&made, "").unwrap();
                }
                c.lessonprobe(&baseline, jobs, &baseline_cache, !second)
            }),
        });
    }
    println!(
        "course benchmark: {lessons} lessons x {per_lesson} exercises = {probes} probes, --jobs {jobs}, median of {rounds} rounds (rows interleaved in each round), python3 and sh"
    );
    let watch_cache = scratch.path().join("cache");
    let watching = move |c: &Course| c.watch(&watch_bin, jobs, &watch_cache, rounds);
    let watch = (setting("LESSONPROBE_BENCH_WATCH", 0) > 0).then_some(&watching as &Watch);
    let results = measure(
        &rows,
        &sizes,
        rounds,
        scratch.path(),
        (lessons, per_lesson),
        watch,
    );
    print_table(&rows, &results, probes);
    if watch.is_some() {
        print_watch(&results);
    }
}

/// The watch's figures of one project: a (save to first verdict, that probe in place) pair
/// per round.
type Watch = dyn Fn(&Course) -> Vec<(Duration, Duration)>;

/// The watch's medians: from a saved lesson file to the rerun's first verdict, against the
/// probe's own time in place, and what is left over (the target: at most 0.5 s).
fn print_watch(results: &[Measured]) {
    println!("\n| project files | watch: save to the rerun's first verdict (s) | that probe run in place (s) | difference (s) | rounds: save to verdict (s) |");
    println!("|---:|---:|---:|---:|---|");
    for (files, _, _, watched) in results {
        let latency = median(watched.iter().map(|w| w.0).collect());
        let own = median(watched.iter().map(|w| w.1).collect());
        let each: Vec<String> = watched
            .iter()
            .map(|w| format!("{:.2}", w.0.as_secs_f64()))
            .collect();
        println!(
            "| {files} | {:.2} | {:.2} | {:.2} | {} |",
            latency.as_secs_f64(),
            own.as_secs_f64(),
            latency.as_secs_f64() - own.as_secs_f64(),
            each.join(", ")
        );
    }
}

/// Each project size's median wall and CPU time of every row, over `rounds` rounds with the
/// rows interleaved in each.
fn measure(
    rows: &[Row],
    sizes: &[usize],
    rounds: usize,
    scratch: &Path,
    (lessons, per_lesson): (usize, usize),
    watch: Option<&Watch>,
) -> Vec<Measured> {
    let mut results: Vec<Measured> = Vec::new();
    for &files in sizes {
        let made = Instant::now();
        let course = Course::write(&scratch.join("course"), files, lessons, per_lesson);
        eprintln!(
            "project of {files} files written in {:.1}s",
            made.elapsed().as_secs_f64()
        );
        // The kernel writes the new files back later: flushed now, that writeback does not
        // fall inside the first rounds of this size.
        let _ = std::process::Command::new("sync").status();
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
        let mut cpu: Vec<Vec<Duration>> = vec![Vec::new(); rows.len()];
        for _ in 0..rounds {
            for ((row, t), c) in rows.iter().zip(times.iter_mut()).zip(cpu.iter_mut()) {
                // What the row before wrote (a first run's copies, the cache it emptied) is
                // written back now, not inside the next row's time.
                let _ = std::process::Command::new("sync").status();
                let before = children_cpu();
                t.push((row.run)(&course));
                c.push(children_cpu().saturating_sub(before));
            }
        }
        let medians: Vec<Duration> = times.into_iter().map(median).collect();
        let cpu: Vec<Duration> = cpu.into_iter().map(median).collect();
        let shown: Vec<String> = rows
            .iter()
            .zip(&medians)
            .map(|(r, t)| format!("{} {:.2}s", r.name, t.as_secs_f64()))
            .collect();
        eprintln!("  {files} files: {}", shown.join(", "));
        let watched = watch.map(|w| w(&course)).unwrap_or_default();
        if !watched.is_empty() {
            eprintln!("  {files} files, --watch: save to first verdict, that probe in place: {watched:.2?}");
        }
        results.push((files, medians, cpu, watched));
    }
    results
}

/// The results as a Markdown table, with the ratios of the measured row (a rerun with nothing
/// changed) to the limit.
fn print_table(rows: &[Row], results: &[Measured], probes: usize) {
    // The row the ratios and overheads are of: a student's rerun with nothing changed.
    const MEASURED: usize = 2;
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let per_probe =
        |m: &[Duration]| (m[MEASURED].as_secs_f64() - m[0].as_secs_f64()) * 1000.0 / probes as f64;
    let seconds = |m: &[Duration]| {
        m.iter()
            .map(|t| match t.is_zero() {
                true => "-".to_owned(),
                false => format!("{:.2}", t.as_secs_f64()),
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    println!();
    println!(
        "| project files | wall: {} (s) | second run / limit (wall) | first run / limit (wall) | CPU: {} (s) | second run / limit (CPU) | overhead per probe of the second run, wall (ms) | the same, CPU (ms) |",
        names.join(" (s) | wall: "),
        names.join(" (s) | CPU: ")
    );
    println!("|---:|{}", "---:|".repeat(2 * rows.len() + 5));
    for (files, wall, cpu, _) in results {
        println!(
            "| {files} | {} | {:.2} | {:.2} | {} | {:.2} | {:.1} | {:.1} |",
            seconds(wall),
            wall[MEASURED].as_secs_f64() / wall[0].as_secs_f64(),
            wall[1].as_secs_f64() / wall[0].as_secs_f64(),
            seconds(cpu),
            cpu[MEASURED].as_secs_f64() / cpu[0].as_secs_f64(),
            per_probe(wall),
            per_probe(cpu)
        );
    }
    if let (Some((_, w1, ..)), Some((files, wn, ..))) = (results.first(), results.last()) {
        println!(
            "\nsecond run, largest project ({files} files) against smallest: wall {:.2}x",
            wn[MEASURED].as_secs_f64() / w1[MEASURED].as_secs_f64()
        );
    }
    if let Some(paired) = names
        .iter()
        .position(|n| n.ends_with("over the smallest project"))
    {
        for (files, wall, ..) in results {
            println!(
                "second run over {files} files against the smallest project's second run in the same rounds: wall {:.2}x",
                wall[MEASURED].as_secs_f64() / wall[paired].as_secs_f64()
            );
        }
    }
    if let (Some((_, w1, c1, _)), Some((_, wn, cn, _))) = (results.first(), results.last()) {
        println!(
            "\noverhead per probe, largest project against smallest: wall {:+.1} ms -> {:+.1} ms, CPU {:+.1} ms -> {:+.1} ms",
            per_probe(w1),
            per_probe(wn),
            per_probe(c1),
            per_probe(cn)
        );
    }
}
