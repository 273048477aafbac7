//! The one registry of workloads: name → generator + checkers (the [`Workload`] trait),
//! for the harness's workloads and Maelstrom's. Adding a workload is its file beside this
//! one and a line in [`all`] (or in Maelstrom's `WORKLOADS`).
//!
//! This file names the workloads; no workload names it, nor `check.rs`, which asks it
//! (so checking and workloads form no import circle; `tests/import_cycles.rs` holds that).

use super::{bank, eventual, register, train, txn, Workload};
use crate::maelstrom::workloads::MaelstromWorkload;

/// Every workload `splitbrain test --workload` runs against the targets.
pub fn all() -> Vec<Box<dyn Workload>> {
    vec![
        Box::new(register::RegisterWorkload),
        Box::new(register::AppendWorkload),
        Box::new(txn::ListAppendWorkload),
        Box::new(txn::RwRegisterWorkload),
        Box::new(bank::BankWorkload),
        Box::new(train::TrainWorkload),
        Box::new(eventual::SetWorkload),
        Box::new(eventual::BookingWorkload),
        Box::new(eventual::CounterWorkload),
    ]
}

/// A target workload by its `--workload` name.
pub fn by_name(name: &str) -> Option<Box<dyn Workload>> {
    all().into_iter().find(|w| w.name() == name)
}

/// Any workload a history can be checked as: a target workload, or a Maelstrom one (a
/// stored Maelstrom run names its workload: `echo`, `kafka`, ...).
pub fn checkable_by_name(name: &str) -> Option<Box<dyn Workload>> {
    by_name(name)
        .or_else(|| MaelstromWorkload::parse(name).map(|w| Box::new(w) as Box<dyn Workload>))
}

#[cfg(test)]
mod tests {
    use super::{all, checkable_by_name};
    use crate::check_options::CheckOptions;

    #[test]
    fn every_workload_and_maelstrom_workload_builds_its_checkers_by_name() {
        let opts = CheckOptions::default();
        let mut names: Vec<&str> = all().iter().map(|w| w.name()).collect();
        names.extend(
            crate::maelstrom::workloads::WORKLOADS
                .iter()
                .map(|(n, _)| *n),
        );
        for name in names {
            let w = checkable_by_name(name).unwrap_or_else(|| panic!("{name} not found"));
            assert_eq!(w.name(), name);
            let checkers = w
                .checkers(&opts)
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            // `train` is judged by its own report; every other workload has a checker.
            assert!(
                !checkers.is_empty() || name == "train",
                "{name}: no checker"
            );
        }
        assert!(checkable_by_name("no-such-workload").is_none());
    }
}
