//! The argon2id ceiling for bench/run: one thread per core hashes a password for a fixed time
//! with the argon2 crate latch uses (RustCrypto, the version in latch's Cargo.lock), the way
//! latch hashes: each thread keeps its argon2 working memory between hashes (no allocation,
//! zeroing or page faults per hash; allocating per hash, as `hash_password` does, is about 7%
//! slower here and made an easier ceiling). Prints one JSON line.
//!
//!   argon2-ceiling [SECONDS] [THREADS] [MEMORY_KIB] [ITERATIONS] [PARALLELISM]

use std::time::{Duration, Instant};

use argon2::{Algorithm, Argon2, Block, Params, Version};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: f64| args.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(default);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let seconds = arg(0, 5.0);
    let threads = arg(1, cores as f64) as usize;
    let (m, t, p) = (arg(2, 19456.0) as u32, arg(3, 2.0) as u32, arg(4, 1.0) as u32);
    let params = Params::new(m, t, p, None).expect("argon2 parameters");
    let blocks = params.block_count();
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
    let hash = |memory: &mut Vec<Block>, n: &mut u64| {
        if memory.is_empty() {
            memory.resize(blocks, Block::new());
        }
        let mut out = [0u8; 32];
        argon
            .hash_password_into_with_memory(b"Bench-Passw0rd!", b"bench-salt-16byt", &mut out, &mut memory[..])
            .expect("hash");
        *n += 1;
    };
    // Each thread first hashes once uncounted (the page faults of its memory), then counts for
    // `seconds`; the rates of the threads add up.
    let per_thread: Vec<(u64, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let (mut memory, mut n) = (Vec::new(), 0);
                    hash(&mut memory, &mut 0);
                    let start = Instant::now();
                    let until = start + Duration::from_secs_f64(seconds);
                    while Instant::now() < until {
                        hash(&mut memory, &mut n);
                    }
                    (n, start.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: u64 = per_thread.iter().map(|(n, _)| n).sum();
    let per_s: f64 = per_thread.iter().map(|(n, t)| *n as f64 / t).sum();
    let elapsed = per_thread.iter().map(|(_, t)| *t).fold(0.0, f64::max);
    println!(
        "{{\"tool\": \"argon2 crate 0.5.3 as latch uses it (memory kept per thread), {threads} threads\", \"memory_kib\": {m}, \"iterations\": {t}, \"parallelism\": {p}, \"hashes\": {total}, \"seconds\": {elapsed:.2}, \"per_s\": {per_s:.1}}}"
    );
}
