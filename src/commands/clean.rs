//! `lessonprobe clean`: lists what earlier probe runs left on PostgreSQL, in `sqlite:DIR`
//! folders and on a real Kafka broker (every run's, or one run's), and with `--copies` the
//! working copies kept in the user's cache, and drops them with `--execute`.

use lessonprobe_probes::DbTarget;
use ticketflow::KafkaTarget;

use crate::checkpoint::Catalog;
use crate::clean::{self, Place, Runs};
use crate::cli::CleanArgs;
use crate::config::db;
use crate::exit::{Code, Error};

pub fn clean(args: CleanArgs) -> Result<Code, Error> {
    let copies = args.copies.then(|| copies(args.execute));
    if copies.is_some() && args.db.is_empty() && args.kafka.kafka.is_none() {
        return Ok(copies.unwrap_or(Code::Ok));
    }
    let places = places(&args)?;
    let runs = match &args.run_id {
        None => Runs::All,
        Some(run_id) => {
            let catalog =
                Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
            Runs::One {
                run_id: run_id.clone(),
                schemas: clean::run_schemas(&catalog.checkpoints, run_id),
            }
        }
    };
    let whose = match &args.run_id {
        None => "every run".to_owned(),
        Some(id) => format!("run {id}"),
    };
    let mut failed = copies.is_some_and(|code| code != Code::Ok);
    let (mut listed, mut dropped, mut unasked) = (0, 0, 0);
    for place in &places {
        let found = match clean::find(place, &runs, args.timeout) {
            Ok(found) => {
                for e in &found.unlisted {
                    errln!("lessonprobe: {e}");
                }
                found.leftovers
            }
            Err(e) => {
                errln!("lessonprobe: {e}");
                failed = true;
                unasked += 1;
                continue;
            }
        };
        listed += found.len();
        if !args.execute {
            for leftover in &found {
                outln!("would drop {leftover}");
            }
            continue;
        }
        for result in clean::drop_all(place, &found, args.timeout) {
            match result {
                Ok(leftover) => {
                    outln!("dropped {leftover}");
                    dropped += 1;
                }
                Err(e) => {
                    errln!("lessonprobe: {e}");
                    failed = true;
                }
            }
        }
    }
    let unasked = if unasked > 0 {
        format!(
            " ({unasked} of {} services could not be asked)",
            places.len()
        )
    } else {
        String::new()
    };
    match (listed, args.execute) {
        (0, _) => outln!("nothing to clean: no leftovers of {whose}{unasked}"),
        (n, false) => {
            outln!("{n} leftovers of {whose}{unasked}; run again with --execute to drop them")
        }
        (n, true) => outln!("dropped {dropped} of {n} leftovers of {whose}{unasked}"),
    }
    Ok(if failed { Code::Operation } else { Code::Ok })
}

/// Lists the working copies kept in the user's cache that no run holds, and with `execute`
/// removes them.
fn copies(execute: bool) -> Code {
    let root = crate::lesson::isolation::kept_root();
    let mut failed = false;
    let (mut listed, mut bytes) = (0, 0);
    for (kept, removed) in crate::lesson::isolation::clean_kept(execute) {
        let shown = kept.dir.display();
        match (execute, removed) {
            (false, _) => outln!("would remove {shown} ({} MB)", kept.bytes >> 20),
            (true, Ok(())) => outln!("removed {shown} ({} MB)", kept.bytes >> 20),
            (true, Err(e)) => {
                errln!("lessonprobe: cannot remove {shown}: {e}");
                failed = true;
            }
        }
        listed += 1;
        bytes += kept.bytes;
    }
    let mb = bytes >> 20;
    match (listed, execute) {
        (0, _) => outln!("no working copies kept in {}", root.display()),
        (n, false) => outln!(
            "{n} working copies ({mb} MB) kept in {}; run again with --execute to remove them",
            root.display()
        ),
        (n, true) => outln!(
            "removed {n} working copies ({mb} MB) from {}",
            root.display()
        ),
    }
    if failed {
        Code::Operation
    } else {
        Code::Ok
    }
}

/// The services `--db` and `--kafka` name; an in-memory database has nothing to clean.
fn places(args: &CleanArgs) -> Result<Vec<Place>, Error> {
    let postgres_env = std::env::var("LESSONPROBE_POSTGRES").ok();
    let databases = db::probe_databases(&args.db, postgres_env.as_deref())
        .map_err(|e| Error::Usage(format!("--db {e}")))?;
    let mut places: Vec<Place> = databases
        .into_iter()
        .filter_map(|target| match target {
            DbTarget::Postgres(url) => Some(Place::Postgres(url)),
            DbTarget::SqliteFile(dir) => Some(Place::SqliteDir(dir)),
            DbTarget::SqliteMemory => None,
        })
        .collect();
    match super::kafka_target(&args.kafka)? {
        _ if args.kafka.kafka.is_none() => {}
        KafkaTarget::Embedded => return Err(Error::Usage(
            "--kafka embedded: nothing to clean, the embedded broker lives and dies with each run"
                .into(),
        )),
        target => places.push(Place::Kafka(target)),
    }
    if places.is_empty() {
        return Err(Error::Usage(
            "clean needs a place to look: --db postgres://URL, --db sqlite:DIR, --kafka HOST:PORT or --copies"
                .into(),
        ));
    }
    Ok(places)
}
