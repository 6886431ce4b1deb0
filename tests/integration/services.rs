//! Services a course declares (`[services.NAME]`), started by lessonprobe with real Redis: a
//! probe needing one sees its variables and passes; a start that is not found or never ready is
//! one `environment: service …` ERROR with its probes NOT RUN; nothing it started outlives the
//! run, even interrupted; a service no selected probe needs never starts; bad declarations and
//! undeclared names are usage errors naming their place; doctor says whether each can start.
//! Fault steps stop and start a service within a chain that holds it, so no other probe sees it
//! down; a service dying by itself, a port taken at the start, a stop that hangs; `--watch`
//! keeping services up between runs.

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
fn a_service_is_stopped_after_the_last_probe_that_needs_it() {
    if !services::redis() {
        return;
    }
    let dir = Dir::new();
    let queue = CACHE
        .replace("services.cache", "services.queue")
        .replace("CACHE_PORT", "QUEUE_PORT")
        .replace("CACHE_DATA", "QUEUE_DATA");
    // After set-get (the cache's only probe), the cache is down while the queue is up.
    let after = "if redis-cli -p $(cut -d' ' -f1 seen.txt) ping >/dev/null 2>&1; then echo cache up; else echo cache down; fi; redis-cli -p $QUEUE_PORT ping";
    let manifest = Manifest::lesson(41, "cache")
        .probe(
            Probe::script(
                "set-get",
                "echo $CACHE_PORT $CACHE_DATA > seen.txt; redis-cli -p $CACHE_PORT ping",
            )
            .services(&["cache"])
            .expect("PONG"),
        )
        .probe(
            Probe::script("after", after)
                .services(&["queue"])
                .expect("cache down\nPONG"),
        )
        .to_string();
    course(&dir, &format!("{CACHE}{queue}"), &manifest);
    run41(&dir)
        .args(["--jobs", "1"])
        .stdout_has("2 passed, 0 failed, 0 errors")
        .success();
    let (port, data) = seen(&dir);
    nothing_left(&port, &data);
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

/// A code step of lesson 43: its `labels` paragraphs, its command and its expected output.
fn step(id: &str, labels: &str, command: &str, expected: &str) -> String {
    format!("### Answer EX-43-{id} [code]\n\n{labels}Run:\n\n```sh\n{command}\n```\n\nExpected output:\n\n```text\n{expected}\n```\n\n")
}

/// Pings the cache 20 times over a second; `down` and a failure the first time it does not
/// answer.
const PINGS: &str = "for i in $(seq 20); do redis-cli -p $CACHE_PORT ping | grep -qx PONG || { echo down; exit 1; }; sleep 0.05; done; echo up";
/// `up` or `down`: whether the cache answers now.
const STATE: &str =
    "redis-cli -p $CACHE_PORT ping 2>/dev/null | grep -qx PONG && echo up || echo down";

/// Lesson 43: two steps pinging the cache, a chain that stops it, checks it is down (`second`
/// expected of its second step), and starts it again, then four more steps pinging it.
fn fault_lesson(second: &str) -> String {
    let mut text = "# Faults\n\nServices: cache\n\n".to_owned();
    text.push_str(&step("01", "", PINGS, "up"));
    text.push_str(&step("02", "", PINGS, "up"));
    text.push_str(&step("03", "Stop service: cache\n\n", STATE, "down"));
    let sleep_then = format!("sleep 0.5; {STATE}");
    text.push_str(&step("04", "Continues: EX-43-03\n\n", &sleep_then, second));
    let restart = "接续：EX-43-04\n\n启动服务：cache\n\n";
    text.push_str(&step("05", restart, STATE, "up"));
    for id in ["06", "07", "08", "09"] {
        text.push_str(&step(id, "", PINGS, "up"));
    }
    text
}

/// `lessonprobe --lesson 43 --jobs 4`, its temporary folders in `dir/tmp`.
fn run43(dir: &Dir) -> Test {
    run43_on(dir, "4")
}

/// `lessonprobe --lesson 43` on `jobs` workers, its temporary folders in `dir/tmp`.
fn run43_on(dir: &Dir, jobs: &str) -> Test {
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    dir.lessonprobe()
        .args(["--lesson", "43", "--jobs", jobs, "--no-junit"])
        .args(["--course", "course"])
        .args(["--python", "python3"])
        .env("TMPDIR", dir.join("tmp"))
        .within(Duration::from_secs(60))
}

/// No service's `{data}` folder is left in the run's temporary folder.
#[track_caller]
fn no_data_folder(dir: &Dir) {
    let left: Vec<String> = std::fs::read_dir(dir.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("lessonprobe-service-"))
        .collect();
    assert!(left.is_empty(), "data folders outlived the run: {left:?}");
}

/// With four workers, the probes needing the cache never see it down while a chain of steps
/// has it stopped: the chain holds it from its first step to its last, after the probes
/// already using it end, and starts it again before any other may use it.
#[test]
fn a_chain_that_stops_a_service_holds_it_and_no_other_probe_sees_it_down() {
    let Some(dir) = redis_course("") else {
        return;
    };
    std::fs::create_dir_all(dir.join("course/project")).unwrap();
    dir.write("course/lessons/43-faults.md", fault_lesson("down"));
    let ran = run43(&dir).success();
    assert_eq!(ran.stdout_lines_starting("PASS"), 9, "{}", ran.stdout);
    assert!(ran.stdout.contains("EX-43-03"), "{}", ran.stdout);
    assert!(!redis_on(&logged_port(&dir)), "the cache outlived the run");
    no_data_folder(&dir);
}

/// A chain that fails after stopping its service leaves it started again all the same: the
/// probes after it find it up.
#[test]
fn a_failing_chain_leaves_its_service_started_again() {
    let Some(dir) = redis_course("") else {
        return;
    };
    std::fs::create_dir_all(dir.join("course/project")).unwrap();
    dir.write("course/lessons/43-faults.md", fault_lesson("up"));
    let ran = run43(&dir)
        .stdout_has("FAIL    [")
        .stdout_has("not run: EX-43-04 failed")
        .failure();
    // Two before the chain, its first step, four after it.
    assert_eq!(ran.stdout_lines_starting("PASS"), 7, "{}", ran.stdout);
    assert!(!redis_on(&logged_port(&dir)), "the cache outlived the run");
    no_data_folder(&dir);
}

/// SIGTERM while a chain holds its service stopped: the run ends, and neither the service nor
/// its data folder remains.
#[test]
fn sigterm_while_a_chain_holds_its_service_stopped_leaves_nothing() {
    let Some(dir) = redis_course("") else {
        return;
    };
    std::fs::create_dir_all(dir.join("course/project")).unwrap();
    let lesson = format!(
        "# Faults\n\nServices: cache\n\n{}",
        step(
            "01",
            "Stop service: cache\n\n",
            "touch \"$MARK\"; sleep 60",
            ""
        )
    );
    dir.write("course/lessons/43-faults.md", lesson);
    let mark = dir.join("stopped");
    let mut running = run43(&dir).env("MARK", &mark).spawn();
    wait_for(&mark, Duration::from_secs(30));
    let port = logged_port(&dir);
    assert!(!redis_on(&port), "the fault step did not stop the cache");
    running.signal(libc::SIGTERM);
    running.within(Duration::from_secs(30)).status(143);
    assert!(!redis_on(&port), "the cache outlived the run");
    no_data_folder(&dir);
}

/// Two HTTP servers, `a` and `b`, each ready once it accepts on its port.
const TWO: &str = "[services.a]\nstart = \"exec python3 -m http.server --bind 127.0.0.1 {port}\"\nenv = { A_PORT = \"{port}\" }\n[services.b]\nstart = \"exec python3 -m http.server --bind 127.0.0.1 {port}\"\nenv = { B_PORT = \"{port}\" }\n";

/// `x up` when the service on `$X_PORT` accepts a connection.
fn accepts(x: &str) -> String {
    let upper = x.to_uppercase();
    format!("python3 -c \"import os, socket; socket.create_connection(('127.0.0.1', int(os.environ['{upper}_PORT'])), 1); print('{x} up')\"")
}

/// Two chains, each stopping one service while its steps use the other: neither waits on the
/// other for ever, with one worker or four, and each step finds the other service up.
#[test]
fn two_chains_each_faulting_what_the_other_uses_both_run() {
    let dir = Dir::new();
    dir.write("course/lessonprobe.toml", TWO);
    std::fs::create_dir_all(dir.join("course/project")).unwrap();
    let mut lesson = "# Two chains\n\nServices: a, b\n\n".to_owned();
    lesson.push_str(&step("01", "Stop service: a\n\n", &accepts("b"), "b up"));
    let then = "Continues: EX-43-01\n\nStart service: a\n\n";
    lesson.push_str(&step("02", then, &accepts("b"), "b up"));
    lesson.push_str(&step("03", "Stop service: b\n\n", &accepts("a"), "a up"));
    let then = "Continues: EX-43-03\n\nStart service: b\n\n";
    lesson.push_str(&step("04", then, &accepts("a"), "a up"));
    dir.write("course/lessons/43-faults.md", lesson);
    for jobs in ["1", "4"] {
        let ran = run43_on(&dir, jobs).success();
        assert_eq!(ran.stdout_lines_starting("PASS"), 4, "{}", ran.stdout);
    }
    no_data_folder(&dir);
}

/// A service ready once it accepts on its port: Python's HTTP server, which fails to start a
/// second time (the marker its first start leaves in `{data}`).
const ONCE: &str = "[services.web]\nstart = \"test -f {data}/once && { echo 'cannot start twice' >&2; exit 5; }; touch {data}/once; exec python3 -m http.server --bind 127.0.0.1 {port}\"\n";

/// A course declaring only [`ONCE`], as `web`, with no manifests.
fn web_course(dir: &Dir) {
    dir.write("course/lessonprobe.toml", ONCE);
    std::fs::create_dir_all(dir.join("course/project")).unwrap();
}

#[test]
fn a_fault_step_whose_start_fails_is_the_steps_error_with_the_services_log() {
    let dir = Dir::new();
    web_course(&dir);
    let lesson = format!(
        "# Faults\n\nServices: web\n\n{}",
        step("01", "Restart service: web\n\n", "echo ran", "ran")
    );
    dir.write("course/lessons/43-faults.md", lesson);
    run43(&dir)
        .stdout_has("ERROR   [")
        .stdout_has("43-faults.md:7: restart service web failed: service web: `test -f ")
        .stdout_has("ended before it was ready (exit status: 5); its log ")
        .stdout_has("ends: ")
        .stdout_has("cannot start twice")
        .failure();
    no_data_folder(&dir);
}

#[test]
fn a_fault_step_on_a_service_its_step_does_not_need_is_a_usage_error_at_its_line() {
    let dir = Dir::new();
    web_course(&dir);
    let lesson = format!(
        "# Faults\n\n{}",
        step("01", "停止服务：web\n\n", "true", "")
    );
    dir.write("course/lessons/43-faults.md", lesson);
    run43(&dir)
        .stderr_has(
            "course/lessons/43-faults.md:5: stop service \"web\": EX-43-01 does not need it",
        )
        .status(2);
}

/// A service that ends by itself during the run: the probes needing it that start after that
/// are ERROR naming it, not FAIL with the client's error.
#[test]
fn a_service_that_dies_mid_run_makes_the_probes_after_it_errors_naming_it() {
    if !services::redis() {
        return;
    }
    let dir = Dir::new();
    let manifest = Manifest::lesson(41, "cache")
        .probe(
            Probe::script(
                "shuts-down",
                "redis-cli -p $CACHE_PORT shutdown nosave >/dev/null 2>&1 || true; while redis-cli -p $CACHE_PORT ping >/dev/null 2>&1; do sleep 0.05; done",
            )
            .services(&["cache"]),
        )
        .probe(
            Probe::script("pings", "redis-cli -p $CACHE_PORT ping")
                .services(&["cache"])
                .expect("PONG"),
        )
        .probe(Probe::command("plain", ["echo", "plain"]).expect("plain"))
        .to_string();
    course(&dir, CACHE, &manifest);
    let ran = run41(&dir)
        .args(["--jobs", "1"])
        .stdout_has("ERROR   [")
        .stdout_has("lesson 41 pings")
        .stdout_has("service cache ended by itself during the run (exit status: 0); its log ")
        .stdout_lacks("FAIL    [")
        .failure();
    assert_eq!(ran.stdout_lines_starting("PASS"), 2, "{}", ran.stdout);
    assert!(!redis_on(&logged_port(&dir)));
}

/// A port another program takes between lessonprobe's pick and the service's start: the start
/// fails with a bind error, and the service is started again on a port picked again. The first
/// start plays the other program: it leaves a listener on its port, outside its process group.
#[test]
fn a_port_taken_between_the_pick_and_the_start_is_picked_again_once() {
    if !services::redis() {
        return;
    }
    let dir = Dir::new();
    let first = dir.join("first-port");
    let taken = format!(
        r#"[services.cache]
start = '''if [ ! -f {first} ]; then echo {{port}} > {first}; setsid python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {{port}})); s.listen(); time.sleep(5)" & sleep 1; echo 'bind: Address already in use' >&2; exit 1; fi; echo port={{port}}; exec redis-server --port {{port}} --bind 127.0.0.1 --save '' --dir {{data}}'''
ready = "redis-cli -p {{port}} ping"
env = {{ CACHE_PORT = "{{port}}", CACHE_DATA = "{{data}}" }}
"#,
        first = first.display()
    );
    course(&dir, &taken, &manifest(""));
    run41(&dir)
        .stdout_has("PASS    [")
        .stdout_lacks("ERROR")
        .within(Duration::from_secs(30))
        .success();
    let (port, data) = seen(&dir);
    let first_port = std::fs::read_to_string(&first).unwrap();
    assert_ne!(port, first_port.trim(), "not picked again");
    nothing_left(&port, &data);
}

/// A service that ignores its stop signal is killed with its whole group after `stop_timeout`.
#[test]
fn a_stop_that_hangs_is_killed_after_stop_timeout() {
    let dir = Dir::new();
    let marker = format!("{}.25", 100_000 + std::process::id());
    let deaf = format!(
        "[services.deaf]\nstart = \"trap '' TERM; sleep {marker} & sleep {marker}; wait\"\nready = \"true\"\nstop_timeout = \"1s\"\n"
    );
    let manifest = Manifest::lesson(41, "deaf")
        .probe(Probe::script("uses", "true").services(&["deaf"]))
        .to_string();
    course(&dir, &deaf, &manifest);
    let started = std::time::Instant::now();
    run41(&dir).within(Duration::from_secs(20)).success();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "stop_timeout not waited"
    );
    let left = std::process::Command::new("pgrep")
        .args(["-f", &format!("sleep {marker}")])
        .output()
        .unwrap();
    assert!(
        !left.status.success(),
        "the deaf service outlived the run: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// The pid of the cache's redis-server each run of lesson 41's `pid` probe saw, noted outside
/// the watched folders.
fn pids(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Under `--watch` the services stay up between runs: the same redis-server serves a rerun,
/// a changed declaration starts a new one, and Ctrl-C stops it with its data folder.
#[test]
fn watch_keeps_services_up_between_runs_and_restarts_one_whose_declaration_changed() {
    if !services::redis() {
        return;
    }
    let (dir, outside) = (Dir::new(), Dir::new());
    let manifest = Manifest::lesson(41, "cache")
        .probe(
            Probe::script(
                "pid",
                r#"redis-cli -p $CACHE_PORT info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p' >> "$PIDS"; echo $CACHE_DATA > "$PIDS.data""#,
            )
            .services(&["cache"]),
        )
        .to_string();
    course(&dir, CACHE, &manifest);
    std::fs::create_dir_all(outside.join("tmp")).unwrap();
    let log = outside.join("pids");
    let mut running = run41(&dir)
        .arg("--watch")
        .env("PIDS", &log)
        .env("TMPDIR", outside.join("tmp"))
        .env("XDG_CACHE_HOME", outside.join("cache"))
        .spawn();
    let step = Duration::from_secs(60);
    running.wait_for_stderr("the first run", step, |_| pids(&log).len() == 1);
    dir.write("checkpoints/notes.txt", "a change");
    running.wait_for_stderr("the rerun", step, |_| pids(&log).len() == 2);
    let seen = pids(&log);
    assert_eq!(seen[0], seen[1], "the cache was started anew for a rerun");
    dir.write(
        "course/lessonprobe.toml",
        format!("{CACHE}stop_timeout = \"5s\"\n"),
    );
    running.wait_for_stderr("the run after the change", step, |_| pids(&log).len() == 3);
    let seen = pids(&log);
    assert_ne!(seen[1], seen[2], "a changed declaration kept the old cache");
    let first_gone = !std::path::Path::new(&format!("/proc/{}", seen[1])).exists();
    assert!(first_gone, "the old cache outlived its declaration");
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(30)).status(130);
    assert!(
        !std::path::Path::new(&format!("/proc/{}", seen[2])).exists(),
        "the cache outlived the watch"
    );
    let data = std::fs::read_to_string(format!("{}.data", log.display())).unwrap();
    assert!(
        !Path::new(data.trim()).exists(),
        "its data folder outlived the watch"
    );
}
