//! The CI smoke of the fuzz targets (`fuzz/`, `scripts/fuzz`): every input of the committed
//! corpus goes through the same entry point the target calls (`latch::fuzzing`), so a crash once
//! found and fixed stays fixed and the entry points keep working without a nightly toolchain.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn fuzz_corpus_replays_without_a_panic() {
    for target in latch::fuzzing::TARGETS {
        let inputs = files(&fuzz_dir().join("corpus").join(target));
        assert!(!inputs.is_empty(), "the corpus of {target} is empty");
        for input in &inputs {
            let data = std::fs::read(input).expect("a corpus file");
            assert!(latch::fuzzing::run(target, &data), "{target} is not an entry point");
        }
    }
}

#[test]
fn every_fuzz_target_has_an_entry_point() {
    let mut binaries: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    binaries.sort();
    let mut targets: Vec<String> = latch::fuzzing::TARGETS.iter().map(|t| t.to_string()).collect();
    targets.sort();
    assert_eq!(binaries, targets, "fuzz/fuzz_targets and latch::fuzzing::TARGETS differ");
    assert!(!latch::fuzzing::run("no-such-target", b""));
}
