//! One fuzzing binary for every target: `sluice-fuzz TARGET`, its input
//! from AFL++ (see `sluice_fuzz_targets::TARGETS`).

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = sluice_fuzz_targets::target(&name) else {
        let names: Vec<&str> = sluice_fuzz_targets::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: sluice-fuzz TARGET, one of {}", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| target(data));
}
