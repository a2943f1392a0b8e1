//! A table made with `prefault` holds its memory from the start: the
//! process's resident size grows by the slab for `capacity` flows when the
//! table is made, not as flows come. In a process of its own, so that no
//! other test's memory is counted.

use sluice_flow::{Flow, FlowConfig, FlowTable};

/// The resident size in bytes (`/proc/self/statm`, in pages).
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux: /proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_prefaulted_table_is_resident_from_the_start_and_another_is_not() {
    const CAPACITY: usize = 100_000;
    let slab = CAPACITY * std::mem::size_of::<Flow<()>>();
    let before = resident();
    let lazy: FlowTable<()> = FlowTable::new(FlowConfig {
        capacity: CAPACITY,
        ..FlowConfig::default()
    });
    let after_lazy = resident();
    let made: FlowTable<()> = FlowTable::new(FlowConfig {
        capacity: CAPACITY,
        prefault: true,
        ..FlowConfig::default()
    });
    let after_made = resident();
    assert!(
        after_lazy - before < slab / 10,
        "a table without prefault took {} bytes at start (slab {slab})",
        after_lazy - before
    );
    assert!(
        after_made - after_lazy >= slab,
        "a prefaulted table took {} bytes at start, less than its slab of {slab}",
        after_made - after_lazy
    );
    assert!(lazy.is_empty() && made.is_empty());
}
