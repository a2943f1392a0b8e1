//! Replays the committed corpus of every fuzz target (`fuzz/corpus/TARGET/`)
//! and every finding kept as a regression (`fuzz/regressions/TARGET/`)
//! through the target's function: what the fuzzer once found must stay
//! fixed, and the seeds must stay valid inputs. Seconds, not hours: the
//! fuzzing itself is `bench/fuzz`.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

#[test]
fn every_seed_and_every_regression_runs_clean() {
    let mut replayed = 0;
    for (name, target) in sluice_fuzz_targets::TARGETS {
        let seeds = files(&fuzz_dir().join("corpus").join(name));
        assert!(!seeds.is_empty(), "fuzz/corpus/{name} has no seed");
        let regressions = files(&fuzz_dir().join("regressions").join(name));
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{}: the {name} target fails on it", file.display());
            replayed += 1;
        }
    }
    eprintln!("{replayed} inputs replayed");
}

/// Every directory under fuzz/regressions is a target's.
#[test]
fn regressions_are_filed_under_a_target() {
    for dir in std::fs::read_dir(fuzz_dir().join("regressions")).unwrap() {
        let dir = dir.unwrap();
        let name = dir.file_name().into_string().unwrap();
        if dir.path().is_dir() {
            assert!(
                sluice_fuzz_targets::target(&name).is_some(),
                "fuzz/regressions/{name}: no such target"
            );
        }
    }
}
