//! A lesson over two declared services (two Redis servers, `cache` and `queue`): 10 steps, each
//! writing to both through `redis-cli`, verified by `lessonprobe --jobs 1` (which starts,
//! readies and stops the services), against the limit: the same two servers started by hand
//! (both at once, each polled with `redis-cli ping` until it answers), the same 10 commands run
//! one after the other with `sh -e`, each output compared, the servers stopped. The two are run
//! interleaved in each round; printed: medians, the services' own start and ready time, and the
//! overhead of lessonprobe beyond it.
//! `cargo test --release --bench services` (see benches/README.md for the settings).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lessonprobe_testkit::bench::setting;

/// The services, by name, and the variable that carries each one's port.
const SERVICES: [(&str, &str); 2] = [("cache", "CACHE_PORT"), ("queue", "QUEUE_PORT")];

/// Step `n`'s command and what it prints.
fn step(n: usize) -> (String, String) {
    (
        format!("redis-cli -p $CACHE_PORT set k{n} v{n} && redis-cli -p $QUEUE_PORT rpush q {n}"),
        format!("OK\n{n}\n"),
    )
}

/// The course: the two services declared, one lesson of `steps` code exercises needing both.
fn write_course(root: &Path, steps: usize) {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root.join("lessons")).unwrap();
    std::fs::create_dir_all(root.join("project")).unwrap();
    let mut config = String::new();
    for (name, var) in SERVICES {
        config.push_str(&format!(
            "[services.{name}]\nstart = \"exec redis-server --port {{port}} --bind 127.0.0.1 --save '' --dir {{data}}\"\nready = \"redis-cli -p {{port}} ping\"\nenv = {{ {var} = \"{{port}}\" }}\n\n"
        ));
    }
    std::fs::write(root.join("lessonprobe.toml"), config).unwrap();
    let mut lesson = "# Lesson 60\n\nServices: cache, queue\n\n".to_owned();
    for n in 1..=steps {
        let (command, expected) = step(n);
        lesson.push_str(&format!(
            "### Answer EX-60-{n:02} [code]\n\nRun:\n\n```sh\n{command}\n```\n\nExpected output:\n\n```text\n{expected}```\n\n"
        ));
    }
    std::fs::write(root.join("lessons/60-services.md"), lesson).unwrap();
}

/// `lessonprobe` on the course, every step passing: its wall time.
fn lessonprobe(binary: &Path, root: &Path) -> Duration {
    let started = Instant::now();
    let out = Command::new(binary)
        .arg("--course")
        .arg(root)
        .args(["--lesson", "60", "--no-junit", "--jobs", "1"])
        .args(["--python", "python3"])
        .current_dir(root)
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The limit: both servers started by hand and polled until they answer, then the steps run
/// in place, then the servers stopped. Its wall time, and the part of it until both were ready.
fn by_hand(scratch: &Path, steps: usize) -> (Duration, Duration) {
    let started = Instant::now();
    let mut servers: Vec<(Child, PathBuf)> = Vec::new();
    let mut env = BTreeMap::new();
    for (name, var) in SERVICES {
        let port = free_port();
        let data = scratch.join(format!("by-hand-{name}"));
        std::fs::create_dir_all(&data).unwrap();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        servers.push((child, data));
        env.insert(var, port.to_string());
    }
    for port in env.values() {
        while !Command::new("redis-cli")
            .args(["-p", port, "ping"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let ready = started.elapsed();
    for n in 1..=steps {
        let (command, expected) = step(n);
        let out = Command::new("sh")
            .args(["-ec", &command])
            .envs(&env)
            .current_dir(scratch)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "step {n}");
    }
    for (mut child, data) in servers {
        // SAFETY: the pid is a child this process started and has not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        child.wait().unwrap();
        std::fs::remove_dir_all(data).unwrap();
    }
    (started.elapsed(), ready)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    let steps = setting("LESSONPROBE_BENCH_STEPS", 10);
    let rounds = setting("LESSONPROBE_BENCH_ROUNDS", 7);
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_lessonprobe"));
    let scratch = tempfile::tempdir().unwrap();
    let course = scratch.path().join("course");
    write_course(&course, steps);
    // One warm-up of each, not counted: the binaries and redis-server in the page cache.
    lessonprobe(&binary, &course);
    by_hand(scratch.path(), steps);
    let (mut probe, mut hand, mut ready) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        // Interleaved, and in alternating order, so that a slow spell of the machine falls on
        // both.
        let (p, (h, r)) = if round % 2 == 1 {
            let p = lessonprobe(&binary, &course);
            (p, by_hand(scratch.path(), steps))
        } else {
            let h = by_hand(scratch.path(), steps);
            (lessonprobe(&binary, &course), h)
        };
        eprintln!(
            "round {round}: lessonprobe {:.3}s, by hand {:.3}s (ready after {:.3}s)",
            p.as_secs_f64(),
            h.as_secs_f64(),
            r.as_secs_f64()
        );
        probe.push(p);
        hand.push(h);
        ready.push(r);
    }
    let (p, h, r) = (median(probe), median(hand), median(ready));
    println!();
    println!("| steps | services | rounds | lessonprobe (s) | by hand (s) | of which start and ready (s) | overhead (s) | target (s) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {steps} | {} | {rounds} | {:.3} | {:.3} | {:.3} | {:+.3} | ≤ 0.5 |",
        SERVICES.len(),
        p.as_secs_f64(),
        h.as_secs_f64(),
        r.as_secs_f64(),
        p.as_secs_f64() - h.as_secs_f64()
    );
}
