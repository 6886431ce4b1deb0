//! The command line: clap definitions only; `commands::dispatch` runs what they parse to.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use ticketflow::{AuditDb, KafkaTarget};

use crate::config::db::DbChoice;
use crate::config::values;
use crate::render::TableFormat;
use crate::report::Format;

/// The exit codes, as `--help` lists them.
const EXIT_CODES: &str = "\
Exit codes:
  0    every selected probe passed or was skipped (PENDING too, unless --strict)
  1    a probe failed or errored, or was PENDING under --strict
  2    a usage or manifest error: nothing ran
  3    a file could not be read or written (a manifest folder, a report path)
  4    an operational command (replay, broker, hosts check, clean) failed
  5    a replay completed with findings (conflicts or quarantined records)
  6    replay verify found events missing from the audit table or stored differently
  130  interrupted with Ctrl-C (SIGINT); 143: stopped with SIGTERM";

#[derive(Debug, Parser)]
#[command(
    name = "lessonprobe",
    version,
    about = "Runs a lesson's checkpoint probes and reports PASS, FAIL, ERROR, SKIP or PENDING",
    args_conflicts_with_subcommands = true,
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// With no subcommand, `lessonprobe` runs probes as `lessonprobe run` does.
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run checkpoint probes (the default).
    Run(RunArgs),
    /// List checkpoints and their probes: id, name, kind, builtin, where each can run, claim
    /// and expected output.
    List(ListArgs),
    /// Run one test selector of a checkpoint on the authorized host (needs TICKETFLOW_REMOTE_TESTS=1).
    Remote(RemoteArgs),
    /// Authorized hosts: list them, or check one (connect, verify key and OS, show the commands).
    Hosts(HostsArgs),
    /// Replay a time window (or offsets) of a real topic into SQL: audit rows only, with its own
    /// consumer group, leaving the live group alone. Prints the plan; --execute runs it.
    Replay(ReplayArgs),
    /// Rewrite the expected-output blocks of a lesson's failing document probes with the actual
    /// output (only those bytes), and print the diff.
    Bless(BlessArgs),
    /// Host the embedded Kafka-protocol broker (librdkafka's mock cluster) until interrupted.
    ///
    /// The first line of standard output is the bootstrap address. The mock cluster keeps only
    /// about the newest 5 MiB (or 100,000 message sets) of each partition and silently drops
    /// older ones: spread large loads over many partitions.
    Broker(BrokerArgs),
    /// Find what earlier probe runs left (scratch schemas, Kafka topics and groups, SQLite
    /// files) by the run-id naming rule, and drop it with --execute.
    Clean(CleanArgs),
    /// Verify the terminal and Python sessions (and labelled blocks) of any Markdown files and
    /// folders, no lessonprobe.toml needed; each document runs in a fresh temporary folder.
    Doc(DocArgs),
    /// Make the course's declared environment ([environment] of lessonprobe.toml) in the user's
    /// cache folder, unless it is made already; print its interpreter.
    Env(EnvArgs),
    /// Check the environment a run would use — the course's interpreter and packages, the
    /// broker, the databases, the remote host — and print each check with its fix.
    Doctor(DoctorArgs),
}

#[derive(Debug, Args)]
pub struct DocArgs {
    /// Markdown files, and folders searched for *.md files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The report, selection and interpreter options of a run (--course, --rev and
    /// --changed-since are refused).
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub course: CourseArgs,
    /// The SQL backends a run would use (as `run --db`); repeatable.
    #[arg(long, env = "LESSONPROBE_DB", value_name = "DB", default_value = "sqlite", value_parser = DbChoice::from_str)]
    pub db: Vec<DbChoice>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub hosts: HostArgs,
    /// A table, or JSON.
    #[arg(long, value_enum, default_value_t = crate::render::TableFormat::Table)]
    pub format: crate::render::TableFormat,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// The course checkout [default: .].
    #[arg(long, env = "LESSONPROBE_COURSE", value_name = "DIR")]
    pub course: Option<PathBuf>,
    /// The interpreter to build the environment from [default: the course's `python`, else
    /// python3].
    #[arg(long, value_name = "INTERP")]
    pub python: Option<String>,
}

#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// Folder of checkpoint manifests [default: ./checkpoints, else the built-in copies].
    #[arg(long, env = "LESSONPROBE_CHECKPOINTS", value_name = "DIR")]
    pub checkpoints: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this lesson's checkpoint.
    #[arg(long, visible_alias = "checkpoint", value_name = "N")]
    pub lesson: Option<u32>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    #[command(flatten)]
    pub course: CourseArgs,
}

/// The course checkout whose lesson documents become probes.
#[derive(Debug, Args)]
pub struct CourseArgs {
    /// The course checkout: its lessons become document probes, and `command` probes run in it
    /// [default: ., a course only if it has lessonprobe.toml or lessons/].
    #[arg(long, env = "LESSONPROBE_COURSE", value_name = "DIR")]
    pub course: Option<PathBuf>,
    /// The interpreter that replaces a leading `python`/`python3` in a lesson's run command
    /// [default: the course's lessonprobe.toml, else python3].
    #[arg(long, env = "LESSONPROBE_PYTHON", value_name = "INTERP")]
    pub python: Option<String>,
    /// How notebooks' stored outputs are judged: `compared` (as nbval) or `run-only` (only
    /// where a cell asks, as nbval's --nbval-lax) [default: a notebook's own
    /// `lessonprobe.outputs` metadata, else the course's `[notebooks] outputs`, else compared].
    #[arg(long, value_name = "MODE")]
    pub notebook_outputs: Option<crate::lesson::notebook::Outputs>,
}

#[derive(Debug, Args)]
pub struct BlessArgs {
    /// The lesson whose document to bless.
    #[arg(long, visible_alias = "checkpoint", value_name = "N")]
    pub lesson: u32,
    /// Only document probes whose id or name matches (substring, or `*` glob); repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub select: Vec<String>,
    /// Probes run at once [default: the number of CPUs, at least 4: probes mostly wait].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// Deadline of a probe whose course sets none (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::config::duration::parse)]
    pub timeout: Duration,
    #[command(flatten)]
    pub course: CourseArgs,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

/// How to reach Kafka: embedded by default, or a broker by address with client properties.
#[derive(Debug, Args)]
pub struct KafkaArgs {
    /// Bootstrap servers of a real broker for every Kafka probe, or `embedded` [default: the
    /// embedded mock cluster].
    #[arg(long, env = "LESSONPROBE_KAFKA", value_name = "HOST:PORT[,...]", value_parser = KafkaTarget::from_str)]
    pub kafka: Option<KafkaTarget>,
    /// A client property for the broker given by --kafka (SASL, SSL, ...); repeatable.
    #[arg(short = 'X', value_name = "KEY=VALUE", value_parser = values::parse_property)]
    pub property: Vec<(String, String)>,
}

/// Where remote selectors run.
#[derive(Debug, Args)]
pub struct HostArgs {
    /// Authorized hosts file [default: ./lessonprobe-hosts.toml, then
    /// $XDG_CONFIG_HOME/lessonprobe/hosts.toml].
    #[arg(long, env = "LESSONPROBE_HOSTS", value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// The host to use [default: the first in the file].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run this lesson's checkpoint [default: every checkpoint].
    #[arg(long, visible_alias = "checkpoint", value_name = "N")]
    pub lesson: Option<u32>,
    /// Run only probes whose id or name matches (substring, or `*` glob); repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub select: Vec<String>,
    /// Where to write JUnit XML [default: reports/lesson-NN.xml, or reports/lessonprobe.xml].
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Do not write a JUnit report.
    #[arg(long, conflicts_with = "junit")]
    pub no_junit: bool,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Probes run at once [default: the number of CPUs, at least 4: probes mostly wait].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// Deadline of a probe whose manifest sets none (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::config::duration::parse)]
    pub timeout: Duration,
    /// PENDING probes fail the run (exit 1).
    #[arg(long)]
    pub strict: bool,
    /// Show each probe's claim, output and, for exercises, the answer key.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub course: CourseArgs,
    /// Verify the course's lessons and project as of this git revision (extracted into a
    /// temporary folder; the checkout is not touched).
    #[arg(long, value_name = "REV", conflicts_with = "changed_since")]
    pub rev: Option<String>,
    /// Run only the checkpoints whose lesson file or project files changed since this git
    /// revision of the course.
    #[arg(long, value_name = "REV")]
    pub changed_since: Option<String>,
    /// JUnit flavour: xunit2 (the strict Jenkins schema) or xunit1 (adds file and line to
    /// each test case, for annotations).
    #[arg(long, value_enum, default_value_t = crate::report::junit::Family::Xunit2)]
    pub junit_family: crate::report::junit::Family,
    /// Names this run on shared services (topics, groups, schemas, database files)
    /// [default: time and process id]. Lower-case letters, digits and '-'.
    #[arg(long, env = "LESSONPROBE_RUN_ID", value_name = "ID", value_parser = values::parse_run_id)]
    pub run_id: Option<String>,
    /// SQL backend of the SQL probes: sqlite (in memory), sqlite:DIR (a database file per probe
    /// case in DIR, kept), postgres://URL (a schema per probe case, dropped after), postgres
    /// (the URL in LESSONPROBE_POSTGRES), or all (sqlite and postgres); repeatable.
    #[arg(
        long,
        env = "LESSONPROBE_DB",
        value_name = "DB",
        default_value = "sqlite",
        value_parser = DbChoice::from_str
    )]
    pub db: Vec<DbChoice>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub hosts: HostArgs,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// Once N probes have failed or errored, start no other; those not started are NOT RUN
    /// and the run fails.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_fail: Option<u32>,
    /// Same as --max-fail 1: stop starting probes at the first failure.
    #[arg(long, conflicts_with = "max_fail")]
    pub fail_fast: bool,
    /// Run the selected probes again whenever a lesson, the course's project or a file of the
    /// current folder changes (what git ignores and the run's own reports aside), the failed
    /// ones first; Ctrl-C stops.
    #[arg(long, conflicts_with = "rev")]
    pub watch: bool,
    /// Run only the probes that failed or errored in the previous run of this course and
    /// selection (kept in ./.lessonprobe/); all of them when no run is recorded.
    #[arg(long)]
    pub last_failed: bool,
    /// Run a failing builtin, command or remote probe up to N more times (a manifest's
    /// `retries` wins); one that then passes is FLAKY [default: 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=crate::checkpoint::MAX_RETRIES as i64))]
    pub retries: Option<u32>,
    /// Retry document probes too (with --retries).
    #[arg(long, requires = "retries")]
    pub retry_documents: bool,
    /// Run only shard K of N of the selected probes (K/N, 1 <= K <= N): N jobs with K = 1..N
    /// run every probe exactly once.
    #[arg(long, value_name = "K/N")]
    pub partition: Option<String>,
    /// Also write a self-contained HTML report here: lessons and probes with verdicts, each
    /// failure's diff, PENDING probes and what would enable them, what was verified.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// GitHub Actions annotations and step summary: auto (when GITHUB_ACTIONS=true), github
    /// (always), none.
    #[arg(long, value_enum, default_value_t = crate::report::github::Annotations::Auto)]
    pub annotations: crate::report::github::Annotations,
    /// Say so when a probe is still running after this long, and again after each further
    /// such span (e.g. 60s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::config::duration::parse)]
    pub slow_after: Duration,
}

#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// The checkpoint the selector belongs to.
    #[arg(long, visible_alias = "lesson", value_name = "N")]
    pub checkpoint: u32,
    /// The test selector, e.g. a pytest node id.
    #[arg(long, value_name = "SELECTOR")]
    pub selector: String,
    /// Where to write JUnit XML [default: reports/remote-NN.xml].
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Deadline of the remote run (connect, prepare, run, fetch).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = crate::config::duration::parse)]
    pub timeout: Duration,
    /// A PENDING selector (remote tests not enabled) fails the run.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub hosts: HostArgs,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

#[derive(Debug, Args)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub action: HostsAction,
}

#[derive(Debug, Subcommand)]
pub enum HostsAction {
    /// The configured hosts and where the file was found; connects nowhere.
    List {
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// Connect, verify the host key and OS, and print the exact commands each remote probe
    /// would run; runs nothing else (needs TICKETFLOW_REMOTE_TESTS=1).
    Check {
        /// The host [default: the first in the file].
        name: Option<String>,
        #[command(flatten)]
        hosts: HostArgs,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnBadRecord {
    /// Keep it in lessonprobe_replay_quarantine with the reason, then move on.
    Quarantine,
    /// Stop at it.
    Fail,
}

impl From<OnBadRecord> for ticketflow::replay::BadRecords {
    fn from(choice: OnBadRecord) -> Self {
        match choice {
            OnBadRecord::Quarantine => ticketflow::replay::BadRecords::Quarantine,
            OnBadRecord::Fail => ticketflow::replay::BadRecords::Fail,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnConflict {
    /// Record it and end the run with a non-zero exit code.
    Fail,
    /// Record it and only report it.
    Warn,
}

#[derive(Debug, Subcommand)]
pub enum ReplayAction {
    /// The replays recorded in a target database: each plan and its partitions' progress.
    Status(ReplayStatusArgs),
    /// Compare a window of the topic with the audit table, reading both and writing neither:
    /// missing, mismatched, duplicated and undecodable events per partition, the replay plans
    /// that cover the window and the live group's lag. Exit 0 when nothing is missing or
    /// mismatched, 6 when something is, 4 when the comparison could not be made.
    // Boxed so that these arguments, the largest, do not set the size of every command value.
    Verify(Box<ReplayVerifyArgs>),
}

/// A window of a topic: a time range on every chosen partition, or one partition's offsets.
#[derive(Debug, Args)]
pub struct WindowArgs {
    /// Start of the window (RFC 3339, e.g. 2026-09-22T00:00:00Z).
    #[arg(long, value_name = "TIME", requires = "until", conflicts_with_all = ["start", "stop"], value_parser = values::parse_time)]
    pub since: Option<i64>,
    /// End of the window, exclusive (RFC 3339).
    #[arg(long, value_name = "TIME", requires = "since", value_parser = values::parse_time)]
    pub until: Option<i64>,
    /// First offset of one partition's explicit range (with --stop and one --partitions).
    #[arg(long, requires = "stop")]
    pub start: Option<i64>,
    /// Exclusive end offset of that range.
    #[arg(long, requires = "start")]
    pub stop: Option<i64>,
}

#[derive(Debug, Args)]
pub struct ReplayVerifyArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// The topic to verify.
    #[arg(long, value_parser = values::named)]
    pub topic: String,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Partitions to verify [default: all], e.g. 0,2.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub partitions: Option<Vec<i32>>,
    /// The audit database: sqlite:PATH (a file) or postgres://URL; opened read-only.
    #[arg(long, env = "LESSONPROBE_REPLAY_DB", value_name = "DB", value_parser = AuditDb::from_str)]
    pub db: Option<AuditDb>,
    /// The live consumer group: its committed offsets and lag are reported (only read).
    #[arg(long, value_name = "GROUP", value_parser = values::named)]
    pub live_group: Option<String>,
    /// Output: a table with examples, or the full list of discrepancies as JSON (with the
    /// counts) or CSV (one row each; the counts go to stderr).
    #[arg(long, value_enum, default_value_t = TableFormat::Table)]
    pub format: TableFormat,
    /// Examples shown per kind of discrepancy in the table.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub limit: usize,
    /// Wall-clock bound of reading the window.
    #[arg(long, default_value = "10m", value_parser = crate::config::duration::parse)]
    pub deadline: Duration,
    /// A partition that delivers nothing for this long before its range ends fails.
    #[arg(long, default_value = "5s", value_parser = crate::config::duration::parse)]
    pub idle_timeout: Duration,
    #[command(flatten)]
    pub retry: RetryArgs,
    /// Records read and looked up in the table together.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch: u32,
    /// How the table is compared with the window: scan reads it whole once and merges it by
    /// event_id, lookup asks for each batch's event_ids; auto scans a table of at most two
    /// rows per record of the window (or 100,000 rows), and looks up otherwise.
    #[arg(long, value_enum, default_value_t = CompareArg::Auto)]
    pub compare: CompareArg,
}

/// How long a replay or a verification waits for a peer gone away to come back.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// How long to wait out an outage of the broker or the database (a connection refused or
    /// reset, a broker transport failure, a coordinator not available or loading, PostgreSQL
    /// shutting down or starting, a peer silent past the idle timeout), counted from its first
    /// failure: the work is begun again — a replay from its durable checkpoints, a
    /// verification from the start — with backoff (0.5 s doubling to 5 s), one line on stderr
    /// when the outage begins and one when it ends. Past it the run ends with exit 4 naming the
    /// peer and the phase; 0 retries nothing.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::config::duration::parse_budget)]
    pub retry_for: Duration,
}

/// `replay verify --compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareArg {
    Auto,
    Scan,
    Lookup,
}

#[derive(Debug, Args)]
pub struct ReplayStatusArgs {
    /// The audit database: sqlite:PATH or postgres://URL.
    #[arg(long, env = "LESSONPROBE_REPLAY_DB", value_name = "DB", value_parser = AuditDb::from_str)]
    pub db: Option<AuditDb>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormat::Table)]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReplayArgs {
    #[command(subcommand)]
    pub action: Option<ReplayAction>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// The topic to replay.
    #[arg(long, required = true, value_parser = values::named)]
    pub topic: Option<String>,
    /// The running service's consumer group; only read, never moved.
    #[arg(long, value_name = "GROUP", required = true, value_parser = values::named)]
    pub live_group: Option<String>,
    /// The replay's own consumer group (must differ from the live group).
    #[arg(long, value_name = "GROUP", required = true, value_parser = values::named)]
    pub replay_group: Option<String>,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Partitions to replay [default: all], e.g. 0,2.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub partitions: Option<Vec<i32>>,
    /// The target audit database: sqlite:PATH (a file) or postgres://URL. Never taken from
    /// LESSONPROBE_DB, the probe runner's scratch database.
    #[arg(long, env = "LESSONPROBE_REPLAY_DB", value_name = "DB", value_parser = AuditDb::from_str)]
    pub db: Option<AuditDb>,
    /// Wall-clock bound of the whole replay.
    #[arg(long, default_value = "10m", value_parser = crate::config::duration::parse)]
    pub deadline: Duration,
    /// A partition that delivers nothing for this long before its stop fails.
    #[arg(long, default_value = "5s", value_parser = crate::config::duration::parse)]
    pub idle_timeout: Duration,
    #[command(flatten)]
    pub retry: RetryArgs,
    /// Plan and result format.
    #[arg(long, value_enum, default_value_t = TableFormat::Table)]
    pub format: TableFormat,
    /// Run the plan (without it, only the plan is printed).
    #[arg(long)]
    pub execute: bool,
    /// Continue this plan, recorded in the target, from its SQL checkpoints.
    #[arg(long)]
    pub resume: bool,
    /// Records per SQL transaction (1: one transaction and one offset commit per event). A
    /// transaction holds batches of at most 10,000 records (and 16 MiB) of one partition
    /// each, every one with its checkpoint, from as many partitions as it takes [default:
    /// into PostgreSQL 100,000; into SQLite a fifth of the plan's records, at least 100,000
    /// and at most 1,000,000]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch: Option<u32>,
    /// Payload bytes per SQL transaction, at least one record (bytes, or with KiB, MiB, GiB)
    /// [default: 64MiB; into SQLite without --batch, 64MiB per 100,000 records of its default]
    #[arg(long, value_name = "SIZE", value_parser = values::parse_bytes)]
    pub batch_bytes: Option<usize>,
    /// What to do with a record that is not an audit event.
    #[arg(long, value_enum, default_value_t = OnBadRecord::Quarantine)]
    pub on_bad_record: OnBadRecord,
    /// What a conflict (same event_id, other content) does to the exit code.
    #[arg(long, value_enum, default_value_t = OnConflict::Fail)]
    pub on_conflict: OnConflict,
    /// Exit 0 even when records were quarantined.
    #[arg(long)]
    pub allow_quarantine: bool,
    /// Partitions replayed at once [default: into PostgreSQL, the machine's cores, at least 2
    /// and at most 4; into SQLite, 1; never more than the partitions with work left]. `--jobs 1`
    /// replays one partition at a time.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
    /// Run as one of several workers of this plan (start the same command on each machine):
    /// the replay group's members share its partitions, one partition at a time per worker.
    #[arg(long, requires = "execute", conflicts_with = "jobs")]
    pub worker: bool,
    /// After each partition's stop, read on until records are this much later than --until,
    /// counting records of the window written after the stop (reported as `late`)
    /// [default: 0, no reading past stop].
    #[arg(long, value_name = "DURATION", value_parser = crate::config::duration::parse)]
    pub skew: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Where runs kept their SQL stores: postgres://URL, postgres (the URL in
    /// LESSONPROBE_POSTGRES) or sqlite:DIR; repeatable.
    #[arg(long, env = "LESSONPROBE_DB", value_name = "DB", value_parser = DbChoice::from_str)]
    pub db: Vec<DbChoice>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Only what the run with this id left [default: what every run left].
    #[arg(long, value_name = "ID", value_parser = values::parse_run_id)]
    pub run_id: Option<String>,
    /// Also the working copies of course projects kept in the user's cache between runs.
    #[arg(long)]
    pub copies: bool,
    /// Drop what is found (without it, only list it).
    #[arg(long)]
    pub execute: bool,
    /// How long each service may take to answer.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::config::duration::parse)]
    pub timeout: Duration,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// Brokers in the mock cluster.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=16))]
    pub brokers: i32,
    /// Partitions of the --sample-day topic.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=1000))]
    pub partitions: i32,
    /// Create this topic and load it with a generated day of audit events (three days of
    /// timestamps, 2026-09-21 to 23, with redeliveries and a few undecodable records).
    #[arg(long, value_name = "TOPIC")]
    pub sample_day: Option<String>,
    /// Distinct events in the sample day.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub events: u32,
    /// Instead of hosting a broker, load --sample-day into this running one (Apache Kafka, say)
    /// and exit; the topic must not exist yet and is kept.
    #[arg(long, value_name = "HOST:PORT[,...]", value_parser = KafkaTarget::from_str, conflicts_with = "brokers")]
    pub kafka: Option<KafkaTarget>,
    /// A client property for the broker given by --kafka (SASL, SSL, ...); repeatable.
    #[arg(short = 'X', value_name = "KEY=VALUE", value_parser = values::parse_property, requires = "kafka")]
    pub property: Vec<(String, String)>,
}
