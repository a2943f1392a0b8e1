//! Which cell owns which flows: a table of [`SLOTS`] slots, each owned by
//! one cell, indexed by bits of the symmetric flow hash.
//!
//! The table for N cells is built by letting cells join one at a time, in
//! the order of the list: a joining cell takes from the cells that hold
//! the most slots until every cell holds `SLOTS / N` slots or one more.
//! So going from N to N+1 cells moves exactly the slots the new cell
//! takes, `SLOTS / (N+1)` of them (a fifth of the flows from 4 to 5
//! cells), and removing the last cell of the list gives its slots back to
//! the cells they came from. A cell that leaves from the middle of the
//! list (written `-` in its place) hands its slots to the remaining cells
//! with the fewest slots, one at a time: only its own flows move, and the
//! others stay within a slot of each other.

/// Slots in the table: the finest share of the flows a cell can hold.
pub const SLOTS: usize = 4096;

/// The slot of a flow's hash.
///
/// Workers inside a probe are chosen by the high 32 bits of the same hash
/// (multiply-shift); the cells take the top bits of the low half so that
/// the flows a cell receives still spread evenly over its own workers.
#[inline]
pub fn slot_of(hash: u64) -> usize {
    ((hash as u32) >> (32 - SLOTS.trailing_zeros())) as usize
}

/// Each slot's cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellTable {
    owner: Box<[u16]>,
    cells: usize,
    present: Vec<bool>,
}

/// A cell list the table cannot be built from.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    #[error("no cells: give at least one (--cells)")]
    NoCells,
    #[error("{0} cells: at most {SLOTS}, one per slot of the table")]
    TooMany(usize),
    #[error("every cell of the list has left (`-`): at least one must remain")]
    NoneLeft,
}

impl CellTable {
    /// The table for `cells` cells, all present.
    pub fn new(cells: usize) -> Result<CellTable, TableError> {
        CellTable::with_present(&vec![true; cells])
    }

    /// The table for a list of cell positions, `false` for a position whose
    /// cell has left: its slots go to the remaining cells.
    pub fn with_present(present: &[bool]) -> Result<CellTable, TableError> {
        let cells = present.len();
        if cells == 0 {
            return Err(TableError::NoCells);
        }
        if cells > SLOTS {
            return Err(TableError::TooMany(cells));
        }
        if !present.iter().any(|&p| p) {
            return Err(TableError::NoneLeft);
        }
        // Cells gone from the end of the list never joined: the table is
        // the one of the shorter list, as it was before they came.
        let joined = present.iter().rposition(|&p| p).expect("one is present") + 1;
        // owned[c]: the slots of cell c, in the order they were given.
        let mut owned: Vec<Vec<u16>> = vec![(0..SLOTS as u16).collect()];
        for joining in 1..joined {
            let quota = SLOTS / (joining + 1);
            let mut taken = Vec::with_capacity(quota);
            while taken.len() < quota {
                // The donor: the cell with the most slots, the first of
                // equals; it gives the slot it received last.
                let donor = (0..joining)
                    .max_by_key(|&c| (owned[c].len(), std::cmp::Reverse(c)))
                    .expect("at least one cell");
                taken.push(owned[donor].pop().expect("a donor holds slots"));
            }
            owned.push(taken);
        }
        owned.resize(cells, Vec::new());
        for (gone, _) in present.iter().enumerate().filter(|(_, p)| !**p) {
            let slots = std::mem::take(&mut owned[gone]);
            for slot in slots {
                let heir = (0..cells)
                    .filter(|&c| present[c])
                    .min_by_key(|&c| (owned[c].len(), c))
                    .expect("one cell remains");
                owned[heir].push(slot);
            }
        }
        let mut owner = vec![0u16; SLOTS].into_boxed_slice();
        for (cell, slots) in owned.iter().enumerate() {
            for &slot in slots {
                owner[slot as usize] = cell as u16;
            }
        }
        Ok(CellTable {
            owner,
            cells,
            present: present.to_vec(),
        })
    }

    /// Positions in the list, present or not.
    pub fn cells(&self) -> usize {
        self.cells
    }

    pub fn is_present(&self, cell: usize) -> bool {
        self.present[cell]
    }

    /// The cell of a flow with this hash.
    #[inline]
    pub fn cell_of(&self, hash: u64) -> usize {
        self.owner[slot_of(hash)] as usize
    }

    /// Each slot's cell, slot by slot (what the kernel program's map holds).
    pub fn owners(&self) -> &[u16] {
        &self.owner
    }

    /// How many slots each cell holds.
    pub fn slot_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.cells];
        for &c in self.owner.iter() {
            counts[c as usize] += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn hashes(n: usize) -> Vec<u64> {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(39);
        (0..n).map(|_| rng.random()).collect()
    }

    fn moved(a: &CellTable, b: &CellTable, flows: &[u64]) -> usize {
        flows.iter().filter(|&&h| a.cell_of(h) != b.cell_of(h)).count()
    }

    #[test]
    fn every_cell_holds_an_even_share() {
        for n in 1..=67 {
            let counts = CellTable::new(n).unwrap().slot_counts();
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(max - min <= 1, "{n} cells: {counts:?}");
            assert_eq!(counts.iter().sum::<usize>(), SLOTS);
        }
    }

    #[test]
    fn a_joining_cell_moves_only_its_own_share() {
        let flows = hashes(100_000);
        for n in 1..40 {
            let before = CellTable::new(n).unwrap();
            let after = CellTable::new(n + 1).unwrap();
            let moved_slots = (0..SLOTS).filter(|&s| before.owner[s] != after.owner[s]).count();
            assert_eq!(moved_slots, SLOTS / (n + 1), "{n} -> {} cells", n + 1);
            // Every slot that moved went to the new cell.
            assert!((0..SLOTS).all(|s| before.owner[s] == after.owner[s] || after.owner[s] as usize == n));
            let share = moved(&before, &after, &flows) as f64 / flows.len() as f64;
            assert!(share <= 1.0 / (n + 1) as f64 + 0.01, "{n} -> {}: {share}", n + 1);
        }
    }

    #[test]
    fn four_to_five_cells_moves_at_most_a_quarter_of_the_flows() {
        let flows = hashes(200_000);
        let share = moved(&CellTable::new(4).unwrap(), &CellTable::new(5).unwrap(), &flows) as f64 / flows.len() as f64;
        assert!(share <= 0.25, "{share}");
        assert!((share - 0.2).abs() < 0.01, "a fifth moves, not {share}");
    }

    #[test]
    fn a_leaving_cell_moves_only_its_own_flows() {
        let all = CellTable::new(5).unwrap();
        for gone in 0..5 {
            let mut present = [true; 5];
            present[gone] = false;
            let less = CellTable::with_present(&present).unwrap();
            for s in 0..SLOTS {
                if all.owner[s] as usize != gone {
                    assert_eq!(all.owner[s], less.owner[s], "slot {s} moved though its cell stayed");
                } else {
                    assert_ne!(less.owner[s] as usize, gone);
                }
            }
            let counts: Vec<usize> = less
                .slot_counts()
                .into_iter()
                .enumerate()
                .filter(|&(c, _)| c != gone)
                .map(|(_, n)| n)
                .collect();
            assert!(
                counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
                "{counts:?}"
            );
        }
        // The last cell leaving gives its slots back where they came from.
        assert_eq!(
            CellTable::with_present(&[true, true, true, true, false]).unwrap().owner,
            CellTable::new(4).unwrap().owner
        );
    }

    #[test]
    fn bad_lists_are_refused() {
        assert_eq!(CellTable::new(0), Err(TableError::NoCells));
        assert_eq!(CellTable::new(SLOTS + 1), Err(TableError::TooMany(SLOTS + 1)));
        assert_eq!(CellTable::with_present(&[false, false]), Err(TableError::NoneLeft));
    }

    #[test]
    fn cells_take_bits_the_workers_do_not() {
        // Flows of one cell still spread over a probe's four workers,
        // which take the hash's high half by multiply-shift.
        let table = CellTable::new(4).unwrap();
        let mut per_worker = [0usize; 4];
        for h in hashes(100_000).into_iter().filter(|&h| table.cell_of(h) == 2) {
            per_worker[(((h >> 32) * 4) >> 32) as usize] += 1;
        }
        let mean = per_worker.iter().sum::<usize>() as f64 / 4.0;
        for w in per_worker {
            assert!((w as f64 - mean).abs() < 0.05 * mean, "{per_worker:?}");
        }
    }
}
