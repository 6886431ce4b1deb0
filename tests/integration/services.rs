//! Services a course declares (`[services.NAME]`), started by lessonprobe with real Redis: a
//! probe needing one sees its variables and passes; a start that is not found or never ready is
//! one `environment: service …` ERROR with its probes NOT RUN; nothing it started outlives the
//! run, even interrupted; a service no selected probe needs never starts; bad declarations and
//! undeclared names are usage errors naming their place; doctor says whether each can start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::*;

/// Redis on the port lessonprobe picks (its log's first line names it), its data in the folder
/// lessonprobe makes.
const CACHE: &str = "[services.cache]\nstart = \"echo port={port}; exec redis-server --port {port} --bind 127.0.0.1 --save '' --dir {data}\"\nready = \"redis-cli -p {port} ping\"\nenv = { CACHE_PORT = \"{port}\", CACHE_DATA = \"{data}\" }\n";

/// Probes of lesson 41: `set-get` needs the cache (and notes its port and data folder in
/// `seen.txt`, then runs `then` after), `plain` needs nothing.
fn manifest(then: &str) -> String {
    let set_get = format!("echo $CACHE_PORT $CACHE_DATA > seen.txt; redis-cli -p $CACHE_PORT set k v >/dev/null && redis-cli -p $CACHE_PORT get k{then}");
    Manifest::lesson(41, "cache")
        .probe(
            Probe::script("set-get", &set_get)
                .services(&["cache"])
                .expect("v"),
        )
        .probe(Probe::command("plain", ["echo", "plain"]).expect("plain"))
        .to_string()
}

/// A course in `dir/course` declaring `services`, with lesson 41's manifest in `dir/checkpoints`.
fn course(dir: &Dir, services: &str, manifest: &str) {
    dir.write("course/lessonprobe.toml", services);
    std::fs::create_dir_all(dir.join("course/lessons")).unwrap();
    dir.write("checkpoints/41-cache.toml", manifest);
}

/// A course declaring Redis as `cache`, with lesson 41's probes (`then` after `set-get`), where
/// Redis is installed.
fn redis_course(then: &str) -> Option<Dir> {
    if !services::redis() {
        return None;
    }
    let dir = Dir::new();
    course(&dir, CACHE, &manifest(then));
    Some(dir)
}

/// `lessonprobe --lesson 41` on the course, no JUnit.
fn run41(dir: &Dir) -> Test {
    dir.lessonprobe()
        .args(["--lesson", "41", "--no-junit", "--course", "course"])
        .args(["--checkpoints", "checkpoints"])
}

/// The port and data folder the probe saw.
fn seen(dir: &Dir) -> (String, PathBuf) {
    let text = dir.read("course/seen.txt");
    let (port, data) = text.trim().split_once(' ').unwrap();
    (port.to_owned(), PathBuf::from(data))
}

/// Whether a redis-server on `port` is running.
fn redis_on(port: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", &format!("redis-server 127.0.0.1:{port}")])
        .output()
        .unwrap()
        .status
        .success()
}

/// Nothing the run started remains: no redis-server on the port, no data folder.
#[track_caller]
fn nothing_left(port: &str, data: &Path) {
    assert!(!redis_on(port), "redis-server on {port} outlived the run");
    assert!(!data.exists(), "{} outlived the run", data.display());
}

#[test]
fn a_probe_needing_a_declared_redis_passes_and_the_service_is_gone_after() {
    let Some(dir) = redis_course("") else {
        return;
    };
    run41(&dir)
        .stdout_has("PASS    [")
        .stdout_has("lesson 41 set-get")
        .stdout_lacks("ERROR")
        .success();
    let (port, data) = seen(&dir);
    assert!(port.parse::<u16>().is_ok(), "{port}");
    assert!(data.starts_with(std::env::temp_dir()), "{}", data.display());
    nothing_left(&port, &data);
    let log = dir.read(".lessonprobe/services/cache.log");
    assert!(log.contains("Ready to accept connections"), "{log}");
}

#[test]
fn a_service_no_selected_probe_needs_never_starts() {
    let Some(dir) = redis_course("") else {
        return;
    };
    run41(&dir)
        .args(["--select", "plain"])
        .stdout_has("PASS    [")
        .stdout_lacks("set-get")
        .success();
    assert!(
        !dir.join(".lessonprobe/services/cache.log").exists(),
        "the cache was started though nothing selected needs it"
    );
}

#[test]
fn a_service_never_ready_is_one_environment_error_and_its_probes_are_not_run() {
    if !services::redis() {
        return;
    }
    let dir = Dir::new();
    let never = CACHE.replace("redis-cli -p {port} ping", "false") + "ready_timeout = \"1s\"\n";
    course(&dir, &never, &manifest(""));
    let ran = run41(&dir)
        .stdout_has(
            "ERROR   environment: service cache: not ready within 1s (ready: false); its log ",
        )
        .stdout_has(".lessonprobe/services/cache.log ends: ")
        .stdout_has("Ready to accept connections")
        .stdout_has("— read its log, then correct start, ready or ready_timeout")
        .stdout_has("NOT RUN [  0.000s] lesson 41 set-get")
        .stdout_has("PASS    [")
        .within(Duration::from_secs(20))
        .failure();
    assert_eq!(ran.stdout_lines_starting("ERROR"), 1, "{}", ran.stdout);
    assert!(!dir.join("course/seen.txt").exists(), "the probe ran");
    assert!(
        !redis_on(&logged_port(&dir)),
        "the never-ready redis-server outlived the run"
    );
}

/// The port the cache's log says it was started on.
fn logged_port(dir: &Dir) -> String {
    let log = dir.read(".lessonprobe/services/cache.log");
    let first = log.lines().next().unwrap_or_default();
    first
        .strip_prefix("port=")
        .unwrap_or_else(|| panic!("{log}"))
        .to_owned()
}

#[test]
fn a_start_not_found_says_so_with_the_fix() {
    let dir = Dir::new();
    course(
        &dir,
        "[services.cache]\nstart = \"no-such-server-lessonprobe --port {port}\"\nenv = { CACHE_PORT = \"{port}\" }\n",
        &manifest(""),
    );
    run41(&dir)
        .stdout_has("ERROR   environment: service cache: `no-such-server-lessonprobe --port ")
        .stdout_has(" was not found (the shell's status 127)")
        .stdout_has("not found")
        .stdout_has("— install the program, or correct start in lessonprobe.toml's [services]")
        .stdout_has("NOT RUN [  0.000s] lesson 41 set-get")
        .within(Duration::from_secs(10))
        .failure();
}

#[test]
fn an_interrupted_run_leaves_no_service_and_no_data_folder() {
    if !services::redis() {
        return;
    }
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let dir = Dir::new();
        course(&dir, CACHE, &manifest("; sleep 60"));
        let mut running = run41(&dir).args(["--select", "set-get"]).spawn();
        wait_for(&dir.join("course/seen.txt"), Duration::from_secs(30));
        let (port, data) = seen(&dir);
        assert!(
            redis_on(&port),
            "the cache is not running while its probe runs"
        );
        assert!(data.is_dir());
        running.signal(signal);
        running.within(Duration::from_secs(30)).status(code);
        nothing_left(&port, &data);
    }
}

/// A second Ctrl-C ends the run at once, and its services with it: they run in process groups
/// of their own, which no signal of the terminal reaches. This service ignores its stop signal,
/// so the first Ctrl-C's stop waits out its `stop_timeout` and the second one lands during it.
#[test]
fn a_second_ctrl_c_ends_the_run_at_once_and_kills_its_services() {
    let dir = Dir::new();
    let marker = format!("{}.5", 100_000 + std::process::id());
    let deaf = format!(
        "[services.deaf]\nstart = \"trap '' TERM; exec sleep {marker}\"\nready = \"true\"\nstop_timeout = \"60s\"\n"
    );
    let manifest = Manifest::lesson(41, "deaf")
        .probe(Probe::script("waits", "touch started; sleep 60").services(&["deaf"]))
        .to_string();
    course(&dir, &deaf, &manifest);
    let running_service = || {
        std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {marker}")])
            .output()
            .unwrap()
            .status
            .success()
    };
    let mut running = run41(&dir)
        .stderr_has("interrupted again: exiting now")
        .spawn();
    wait_for(&dir.join("course/started"), Duration::from_secs(30));
    assert!(
        running_service(),
        "the service is not running while its probe runs"
    );
    running.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        running_service(),
        "the service went before its stop_timeout"
    );
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(5)).status(130);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while running_service() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!running_service(), "the service outlived a second Ctrl-C");
}

#[test]
fn bad_declarations_and_undeclared_services_are_usage_errors_at_their_place() {
    let dir = Dir::new();
    let cases = [
        (
            "[services.cache]\nready = \"tcp\"\n".to_owned(),
            "course/lessonprobe.toml:1:11: services.cache: missing start",
        ),
        (
            format!("{CACHE}colour = \"red\"\n"),
            "course/lessonprobe.toml:5:1: unknown field `colour`",
        ),
        (
            format!("{CACHE}ready_timeout = \"soon\"\n"),
            "course/lessonprobe.toml:5:17: services.cache.ready_timeout",
        ),
        (
            format!("{CACHE}stop = \"STOP\"\n"),
            "course/lessonprobe.toml:5:8: services.cache.stop \"STOP\" is not a signal",
        ),
        (
            "[services.cache]\nkind = \"mysql\"\n".to_owned(),
            "course/lessonprobe.toml:2:8: services.cache: kind \"mysql\" is not a built-in kind; use \"postgres\" or \"kafka\"",
        ),
        (
            String::new(),
            "checkpoints/41-cache.toml:6: probe set-get needs service \"cache\", which the course's lessonprobe.toml does not declare",
        ),
    ];
    for (config, expected) in cases {
        course(&dir, &config, &manifest(""));
        run41(&dir).stderr_has(expected).status(2);
    }
}

#[test]
fn doctor_says_whether_each_declared_service_can_start() {
    if !services::redis() {
        return;
    }
    let dir = Dir::new();
    let broken = "[services.broken]\nstart = \"exit 4\"\n";
    course(&dir, &format!("{CACHE}{broken}"), &manifest(""));
    let ran = dir
        .lessonprobe()
        .args(["doctor", "--course", "course", "--python", "python3"])
        .args(["--format", "json"])
        .within(Duration::from_secs(20))
        .failure();
    let rows = ran.json();
    let result = |check: &str| {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["check"] == check);
        row.unwrap_or_else(|| panic!("no {check} in {rows}"))
            .clone()
    };
    assert_eq!(result("service cache")["result"], "ok", "{rows}");
    let broken = result("service broken");
    assert_eq!(broken["result"], "FAILED");
    assert!(
        broken["problem"]
            .as_str()
            .unwrap()
            .contains("ended before it was ready (exit status: 4)"),
        "{broken}"
    );
    assert!(
        !redis_on(&logged_port(&dir)),
        "doctor left the cache running"
    );
}

/// A lesson whose `Services:` label (before its first exercise) or its exercise's own names the
/// cache, written `label`.
fn lesson(label: &str, inside: bool) -> String {
    let (before, within) = if inside { ("", label) } else { (label, "") };
    format!(
        "# Cache\n\n{before}\n\n### Answer EX-42-01 [code]\n\n{within}\n\nRun:\n\n```sh\nredis-cli -p ${{CACHE_PORT:?no cache}} ping\n```\n\nExpected output:\n\n```text\nPONG\n```\n"
    )
}

/// `lessonprobe --lesson 42` on the course's lesson document.
fn run42(dir: &Dir) -> Test {
    dir.lessonprobe()
        .args(["--lesson", "42", "--no-junit", "--course", "course"])
        .args(["--python", "python3"])
}

#[test]
fn a_lesson_names_its_services_with_a_label_in_english_or_chinese() {
    let Some(dir) = redis_course("") else {
        return;
    };
    std::fs::create_dir_all(dir.join("course/project")).unwrap();
    for (label, inside) in [("Services: cache", false), ("服务：cache", true)] {
        dir.write("course/lessons/42-cache.md", lesson(label, inside));
        run42(&dir)
            .stdout_has("PASS    [")
            .stdout_has("EX-42-01")
            .stdout_lacks("ERROR")
            .success();
        assert!(!redis_on(&logged_port(&dir)), "the cache outlived the run");
    }
    // Without the label the exercise has no cache: its command fails.
    dir.write("course/lessons/42-cache.md", lesson("", false));
    run42(&dir).stdout_has("FAIL    [").failure();
    dir.write(
        "course/lessons/42-cache.md",
        lesson("Services: cache, audit_db", false),
    );
    run42(&dir)
        .stderr_has("course/lessons/42-cache.md:3: service \"audit_db\" is not declared in the course's lessonprobe.toml")
        .status(2);
}

/// A course declaring one service of a built-in kind as `svc` (`kind`, then its `env`: the
/// address as `ADDR` and its data folder as `DATA`), with lesson 41's probe `through` needing
/// it: `script` reads and writes through `$ADDR` and notes `$ADDR $DATA` in `seen.txt`.
fn builtin_course(kind: &str, address: &str, script: &str, expected: &str) -> Dir {
    let dir = Dir::new();
    let config =
        format!("[services.svc]\n{kind}\nenv = {{ ADDR = \"{address}\", DATA = \"{{data}}\" }}\n");
    let manifest = Manifest::lesson(41, "builtin")
        .probe(
            Probe::script("through", &format!("echo $ADDR $DATA > seen.txt; {script}"))
                .services(&["svc"])
                .timeout("120s")
                .expect(expected),
        )
        .to_string();
    course(&dir, &config, &manifest);
    dir
}

/// After the run: no process holds the service's data folder, the folder is gone, and nothing
/// accepts on the port of `address` (`HOST:PORT`, or a URL whose authority ends in one).
#[track_caller]
fn builtin_gone(dir: &Dir) {
    let (address, data) = seen(dir);
    let data = data.to_string_lossy().into_owned();
    let left = process::gone_within(&data, Duration::from_secs(5));
    assert!(left.is_empty(), "still running: {left:?}");
    assert!(!Path::new(&data).exists(), "{data} outlived the run");
    let port = address
        .rsplit_once(':')
        .map(|(_, p)| p.split('/').next().unwrap_or(p))
        .unwrap_or_default();
    let port: u16 = port.parse().unwrap_or_else(|e| panic!("{address}: {e}"));
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "{address} still accepts after the run"
    );
}

#[test]
fn a_postgres_service_is_a_throwaway_cluster_a_probe_writes_to_and_nothing_is_left() {
    if services::pg_ctl().is_none() || !services::tool("psql") {
        return;
    }
    let dir = builtin_course(
        "kind = \"postgres\"",
        "{url}",
        "psql -qAt \"$ADDR\" -c 'CREATE TABLE t (x int)' -c 'INSERT INTO t VALUES (7)' -c 'SELECT x FROM t'",
        "7",
    );
    run41(&dir)
        .stdout_has("PASS    [")
        .within(Duration::from_secs(120))
        .success();
    let (url, _) = seen(&dir);
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "{url}");
    builtin_gone(&dir);
    let log = dir.read(".lessonprobe/services/svc.log");
    assert!(log.contains("database system is ready"), "{log}");
}

#[test]
fn a_kafka_service_is_the_embedded_cluster_a_probe_produces_to_and_nothing_is_left() {
    if !services::tool("kcat") {
        return;
    }
    let dir = builtin_course(
        "kind = \"kafka\"",
        "{bootstrap}",
        "echo hello | kcat -P -b \"$ADDR\" -t lesson -p 0 && kcat -C -b \"$ADDR\" -t lesson -p 0 -c 1 -e",
        "hello",
    );
    run41(&dir)
        .stdout_has("PASS    [")
        .within(Duration::from_secs(60))
        .success();
    builtin_gone(&dir);
}

#[test]
fn a_kafka_service_of_flavor_apache_is_one_node_a_probe_produces_to_and_nothing_is_left() {
    on_apache_kafka(|_| {
        if !services::tool("kcat") {
            return;
        }
        let dir = builtin_course(
            "kind = \"kafka\"\nflavor = \"apache\"\nready_timeout = \"90s\"",
            "{bootstrap}",
            "echo hello | kcat -P -b \"$ADDR\" -t lesson -p 0 && kcat -C -b \"$ADDR\" -t lesson -p 0 -c 1 -e",
            "hello",
        );
        run41(&dir)
            .env("LESSONPROBE_KAFKA_CLASSPATH", kafka_classpath())
            .stdout_has("PASS    [")
            .within(Duration::from_secs(180))
            .success();
        builtin_gone(&dir);
    });
}

/// The classpath file of the pinned Apache Kafka, as `scripts/kafka.sh fetch` prints it.
fn kafka_classpath() -> String {
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/kafka.sh"))
        .arg("fetch")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn apache_kafka_without_its_jars_is_an_environment_error_naming_them() {
    let dir = builtin_course(
        "kind = \"kafka\"\nflavor = \"apache\"",
        "{bootstrap}",
        "true",
        "",
    );
    run41(&dir)
        .env("LESSONPROBE_KAFKA_CLASSPATH", dir.join("no-such-classpath"))
        .stdout_has("ERROR   environment: service svc: ")
        .stdout_has("was not found (the shell's status 127)")
        .stdout_has("Apache Kafka's jars were not found: run scripts/kafka.sh fetch")
        .stdout_has("NOT RUN [  0.000s] lesson 41 through")
        .within(Duration::from_secs(20))
        .failure();
}
