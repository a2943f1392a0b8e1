//! Runs files through a fuzz target, as the fuzzer did, with the panic's
//! message and backtrace: for looking into a finding.
//!
//! cargo run -p sluice-fuzz-targets --example replay -- TARGET FILE...

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_default();
    let Some(target) = sluice_fuzz_targets::target(&name) else {
        let names: Vec<&str> = sluice_fuzz_targets::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: replay TARGET FILE..., TARGET one of {}", names.join(", "));
        std::process::exit(2);
    };
    let mut failed = 0;
    for file in args {
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        match std::panic::catch_unwind(|| target(&data)) {
            Ok(()) => println!("{file}: passes"),
            Err(_) => {
                println!("{file}: FAILS");
                failed += 1;
            }
        }
    }
    std::process::exit(i32::from(failed > 0));
}
