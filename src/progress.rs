//! Progress bars on standard error, one per partition with work left, fed by the replay job.

use std::collections::BTreeMap;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use ticketflow::replay::{DayPlan, Progress, ReplaySummary};

/// Bars that draw only when standard error is a terminal.
pub struct PartitionBars {
    bars: BTreeMap<i32, ProgressBar>,
    _multi: MultiProgress,
}

impl PartitionBars {
    pub fn new(plan: &DayPlan) -> PartitionBars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "partition {prefix:>3} {bar:30} {pos}/{len} records {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        let mut bars = BTreeMap::new();
        for p in plan.partitions.iter().filter(|p| p.remaining() > 0) {
            let bar = multi.add(ProgressBar::new(p.remaining() as u64));
            bar.set_style(style.clone());
            bar.set_prefix(p.partition.to_string());
            bars.insert(p.partition, bar);
        }
        PartitionBars {
            bars,
            _multi: multi,
        }
    }

    pub fn finish(&self) {
        self.bars.values().for_each(ProgressBar::finish);
    }
}

impl Progress for PartitionBars {
    fn batch_done(&self, partition: i32, so_far: &ReplaySummary) {
        if let Some(bar) = self.bars.get(&partition) {
            bar.set_position(so_far.counters.records);
        }
    }
}
