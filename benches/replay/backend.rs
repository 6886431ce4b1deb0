//! One backend's parts, in the order they run: (i) and (b), (c) and (d), the further rounds,
//! the baseline's (d), then (e), (h) and (k).

use ticketflow::store::AuditDb;

use super::command::{replay_args, replayed};
use super::inserts::{independent_postgres, independent_sqlite, insert_only};
use super::process::{run_measured, run_measured_with, Finished};
use super::rounds::{paired_rounds, Paired};
use super::table::in_schema;
use super::verify::{by_hand, by_hand_rounds, kcat_rounds, verify_runs};
use super::{opt, rate, Bench, Figures};

/// (i) and (b) as measured on one backend, and the fresh targets (c) and (d) replay into.
struct Before {
    i_delivery: Option<f64>,
    i_key: Option<f64>,
    b: Option<f64>,
    db_c: String,
    db_d: String,
}

impl Bench<'_> {
    /// Every part on `backend` ("sqlite", or "postgres" at `url`), each figure printed to
    /// standard error as it is measured.
    pub fn measure(&self, backend: &'static str, url: &str) -> Figures {
        let settings = self.settings;
        let before = match backend {
            "sqlite" => self.before_sqlite(),
            _ => self.before_postgres(url),
        };
        eprintln!(
            "{backend} (i) delivery order {}/s, key order {}/s; (b) {}/s",
            opt(before.i_delivery),
            opt(before.i_key),
            opt(before.b)
        );
        let c_run = (!settings.skip("c")).then(|| {
            run_measured(&replay_args(
                self.servers,
                &before.db_c,
                &format!("bench-c-{backend}"),
                Some(self.c_list),
                Some(1),
                Some(1),
            ))
        });
        let d_run = run_measured(&replay_args(
            self.servers,
            &before.db_d,
            &format!("bench-d-{backend}"),
            None,
            None,
            settings.jobs,
        ));
        eprintln!(
            "{backend} (d) {:.0}/s whole, {:.0}/s execution, planning {:.2} s, {} partition(s) at once, CPU {:.2} s, RSS {:.1} MiB",
            rate(replayed(&d_run.stdout), d_run.wall),
            d_run.execute_rate,
            d_run.planning,
            d_run.lanes,
            d_run.cpu,
            d_run.peak_rss_mib
        );
        let paired = before.i_delivery.filter(|_| settings.rounds > 1);
        if let Some(i) = paired {
            paired_rounds(
                &Paired {
                    bench: self,
                    backend,
                    url,
                },
                settings.rounds,
                (
                    i,
                    d_run.execute_rate,
                    rate(replayed(&d_run.stdout), d_run.wall),
                ),
            );
        }
        if let Some(baseline) = settings.baseline.as_ref().filter(|_| paired.is_none()) {
            self.baseline_d(baseline, backend, url, &d_run);
        }
        let d_records = self.check_d(backend, url, &d_run);
        // A clean window exits 0, which run_measured asserts.
        let e = verify_runs(settings, self.servers, &before.db_d, self.total);
        let by_hand_run = (backend == "sqlite" && !settings.skip("h") && !e.is_empty())
            .then(|| by_hand(self.servers, &self.dir.join("d.db"), self.dir))
            .flatten();
        if let (Some((h1, _)), Some(e1)) = (by_hand_run, e.first().filter(|_| settings.rounds > 1))
        {
            by_hand_rounds(
                settings,
                (self.servers, self.dir),
                backend,
                &before.db_d,
                (h1, e1.seconds),
            );
        }
        if backend == "sqlite" && !settings.skip("k") && !e.is_empty() {
            kcat_rounds(settings, self.servers, backend, &before.db_d);
        }
        Figures {
            backend,
            i_delivery: before.i_delivery,
            i_key: before.i_key,
            b: before.b,
            c: c_run.as_ref().map(|c| rate(replayed(&c.stdout), c.wall)),
            d: rate(d_records, d_run.wall),
            d_exec: d_run.execute_rate,
            planning: d_run.planning,
            rss_c: c_run.as_ref().map(|c| c.peak_rss_mib),
            rss_d: d_run.peak_rss_mib,
            by_hand: by_hand_run,
            e,
        }
    }

    /// On SQLite: (i) and (b), each into a file of its own removed after, and the files (c)
    /// and (d) replay into.
    fn before_sqlite(&self) -> Before {
        let (n, dir, table) = (self.settings.events as u64, self.dir, self.table);
        let i_delivery = (!self.settings.skip("i")).then(|| {
            rate(
                n,
                independent_sqlite(&dir.join("i-delivery.db"), table, self.delivery),
            )
        });
        let i_key = (!self.settings.skip("i")).then(|| {
            rate(
                n,
                independent_sqlite(&dir.join("i-key.db"), table, self.by_key),
            )
        });
        for f in ["i-delivery.db", "i-key.db"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
        let b = (!self.settings.skip("b")).then(|| {
            table.before_replay_sqlite(&dir.join("insert.db"));
            let insert = AuditDb::Sqlite(dir.join("insert.db"));
            let b = rate(n, insert_only(&insert, self.events));
            let _ = std::fs::remove_file(dir.join("insert.db"));
            b
        });
        for f in ["c.db", "d.db"] {
            table.before_replay_sqlite(&dir.join(f));
        }
        Before {
            i_delivery,
            i_key,
            b,
            db_c: format!("sqlite:{}", dir.join("c.db").display()),
            db_d: format!("sqlite:{}", dir.join("d.db").display()),
        }
    }

    /// On PostgreSQL at `url`: (i) and (b), each into a schema of its own, and the fresh
    /// schemas (c) and (d) replay into.
    fn before_postgres(&self, url: &str) -> Before {
        let (n, table) = (self.settings.events as u64, self.table);
        let i_delivery = (!self.settings.skip("i")).then(|| {
            rate(
                n,
                independent_postgres(url, "lessonprobe_bench_copy", table, self.delivery),
            )
        });
        let i_key = (!self.settings.skip("i")).then(|| {
            rate(
                n,
                independent_postgres(url, "lessonprobe_bench_copy", table, self.by_key),
            )
        });
        let mut client = postgres::Client::connect(url, postgres::NoTls).expect("postgres");
        let b = (!self.settings.skip("b")).then(|| {
            let schema = "lessonprobe_bench_insert";
            table.fresh_postgres_schema(&mut client, schema);
            let insert = AuditDb::Postgres(in_schema(url, schema));
            let b = rate(n, insert_only(&insert, self.events));
            let _ = client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
            b
        });
        // (c) and (d) replay into schemas of their own, made fresh.
        for run in ["c", "d"] {
            table.fresh_postgres_schema(&mut client, &format!("lessonprobe_bench_{run}"));
        }
        Before {
            i_delivery,
            i_key,
            b,
            db_c: in_schema(url, "lessonprobe_bench_c"),
            db_d: in_schema(url, "lessonprobe_bench_d"),
        }
    }

    /// The baseline binary's (d), into a fresh target of its own, beside this one's `d_run`.
    fn baseline_d(&self, baseline: &str, backend: &str, url: &str, d_run: &Finished) {
        if backend == "postgres" {
            let mut client = postgres::Client::connect(url, postgres::NoTls).expect("postgres");
            self.table
                .fresh_postgres_schema(&mut client, "lessonprobe_bench_base");
        } else {
            self.table.before_replay_sqlite(&self.dir.join("base.db"));
        }
        let db = match backend {
            "sqlite" => format!("sqlite:{}", self.dir.join("base.db").display()),
            _ => in_schema(url, "lessonprobe_bench_base"),
        };
        let run = run_measured_with(
            baseline,
            &replay_args(
                self.servers,
                &db,
                &format!("bench-base-{backend}"),
                None,
                None,
                self.settings.jobs,
            ),
        );
        eprintln!(
            "{backend} (d) of the baseline binary: {:.0}/s whole, {:.0}/s execution, planning {:.2} s, CPU {:.2} s (this binary's (d): {:.2} s), RSS {:.1} MiB",
            rate(replayed(&run.stdout), run.wall),
            run.execute_rate,
            run.planning,
            run.cpu,
            d_run.cpu,
            run.peak_rss_mib
        );
        let _ = std::fs::remove_file(self.dir.join("base.db"));
    }

    /// Asserts that (d) wrote the columns the table has, no more (on the lesson's table, six),
    /// and replayed every record; the records it replayed.
    fn check_d(&self, backend: &str, url: &str, d_run: &Finished) -> u64 {
        let columns: i64 = match backend {
            "sqlite" => rusqlite::Connection::open(self.dir.join("d.db"))
                .and_then(|c| {
                    c.query_row(
                        "SELECT COUNT(*) FROM pragma_table_info('audit_events')",
                        [],
                        |r| r.get(0),
                    )
                })
                .expect("columns of (d)'s audit_events"),
            _ => postgres::Client::connect(url, postgres::NoTls)
                .and_then(|mut c| {
                    c.query_one(
                        "SELECT COUNT(*) FROM information_schema.columns
                         WHERE table_schema = 'lessonprobe_bench_d' AND table_name = 'audit_events'",
                        &[],
                    )
                })
                .expect("columns of (d)'s audit_events")
                .get(0),
        };
        assert_eq!(
            columns,
            self.table.columns() as i64,
            "(d)'s audit_events has {columns} columns"
        );
        let d_records = replayed(&d_run.stdout);
        let total = self.total;
        assert_eq!(
            d_records as i64, total,
            "(d) replayed {d_records} of {total}"
        );
        d_records
    }
}
