//! The argon2id ceiling for bench/run: one thread per core hashes a password for a fixed time
//! with the argon2 crate latch uses (RustCrypto, the version in latch's Cargo.lock), the way
//! latch hashes (`hash_password`, a fresh memory block per hash). Prints one JSON line.
//!
//!   argon2-ceiling [SECONDS] [THREADS] [MEMORY_KIB] [ITERATIONS] [PARALLELISM]

use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: f64| args.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(default);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let seconds = arg(0, 5.0);
    let threads = arg(1, cores as f64) as usize;
    let (m, t, p) = (arg(2, 19456.0) as u32, arg(3, 2.0) as u32, arg(4, 1.0) as u32);
    let params = Params::new(m, t, p, None).expect("argon2 parameters");
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
    let salt = SaltString::encode_b64(b"bench-salt-16byt").unwrap();
    let hash = |n: &mut u64| {
        argon.hash_password(b"Bench-Passw0rd!", &salt).expect("hash");
        *n += 1;
    };
    // Warm up (page faults of the first blocks), then count.
    hash(&mut 0);
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0;
                    while Instant::now() < until {
                        hash(&mut n);
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{{\"tool\": \"argon2 crate 0.5.3 (as in latch), {threads} threads\", \"memory_kib\": {m}, \"iterations\": {t}, \"parallelism\": {p}, \"hashes\": {total}, \"seconds\": {elapsed:.2}, \"per_s\": {:.1}}}",
        total as f64 / elapsed
    );
}
