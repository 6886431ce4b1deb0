//! The integration tests of the built `lessonprobe`, one module per area, in one test binary
//! (one link for all of them). Each run is stated with `lessonprobe_testkit::Test`; services come
//! from `scripts/test.sh`.

mod apache_kafka;
mod bless;
mod ci_outputs;
mod clean;
mod cli;
mod docs;
mod inputs;
mod interrupt;
mod isolation;
mod kafka;
mod lesson_docs;
mod lesson_kafka;
mod lesson_language;
mod notebook_agreement;
mod notebooks;
mod postgres;
mod preflight;
mod real_readmes;
mod remote;
mod replay;
mod replay_faults;
mod replay_kafka;
mod replay_outages;
mod replay_target;
mod replay_verify;
mod replay_workers;
mod reports;
mod sample_course;
mod service_lesson;
mod services;
mod student_loop;
mod transcripts;
mod watch;
