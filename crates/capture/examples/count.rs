fn main() {
    for path in std::env::args().skip(1) {
        match sluice_capture::CaptureFile::open(&path) {
            Ok(f) => {
                let mut r = f.reader().unwrap();
                let (mut n, mut bytes) = (0u64, 0u64);
                for p in r.by_ref() {
                    n += 1;
                    bytes += p.wire_len as u64;
                }
                println!("{path} {} {n} {bytes} {:?}", f.format(), r.warnings());
            }
            Err(e) => println!("ERR {e}"),
        }
    }
}
