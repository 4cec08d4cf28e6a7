//! How much the add chain's clock readings move, alone and beside busy threads: the
//! measurement behind `bench/add-chain-clock.sh`. A compute peak's bound adds
//! [`MEASURED_CLOCK_MARGIN`] to a measured clock, so readings of one core must not
//! spread by more than that, or a kernel at its ports' true limit fails its bound.
//!
//! ```text
//! cargo run --release -p memwall-core --example add_chain_clock -- [ROUNDS] [BUSY_THREADS]
//! ```
//!
//! Each round takes one reading alone, then one beside `BUSY_THREADS` spinning
//! threads (default: twice the logical CPUs, as a parallel test run has); both orders
//! alternate. Prints every reading (GHz), then the spread `max ÷ min − 1` against the
//! margin. Exit status 0 whatever the spread: this measures, it does not judge a
//! shared machine.

use memwall_core::measure::peak::{MEASURED_CLOCK_MARGIN, add_chain_hz};
use std::sync::atomic::{AtomicBool, Ordering};

/// One reading (GHz) of one worker, beside `busy` spinning threads.
fn read(busy: usize) -> Option<f64> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..busy {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let hz = add_chain_hz(1);
        stop.store(true, Ordering::Relaxed);
        hz.map(|h| h / 1e9)
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let parse = |a: Option<String>, what: &str, default: usize| match a {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("add_chain_clock: {what} must be a whole number, got {s:?}");
            std::process::exit(2)
        }),
    };
    let rounds = parse(args.next(), "ROUNDS", 10).max(1);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let busy = parse(args.next(), "BUSY_THREADS", 2 * cpus);
    println!("| round | alone GHz | beside {busy} busy threads GHz |");
    println!("| ----: | --------: | ---------: |");
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for r in 1..=rounds {
        // Alternate the order so a drift in time is not read as a busy/alone effect.
        let (a, b) = if r % 2 == 1 {
            let a = read(0);
            (a, read(busy))
        } else {
            let b = read(busy);
            (read(0), b)
        };
        let (Some(a), Some(b)) = (a, b) else {
            eprintln!(
                "add_chain_clock: no add chain on this architecture ({})",
                std::env::consts::ARCH
            );
            std::process::exit(1)
        };
        println!("| {r:>5} | {a:9.3} | {b:10.3} |");
        alone.push(a);
        beside.push(b);
    }
    let all: Vec<f64> = alone.iter().chain(&beside).copied().collect();
    let lo = all.iter().copied().fold(f64::MAX, f64::min);
    let hi = all.iter().copied().fold(0.0f64, f64::max);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let spread = hi / lo - 1.0;
    println!(
        "alone mean {:.3} GHz, beside busy threads mean {:.3} GHz; min {lo:.3}, max {hi:.3}",
        mean(&alone),
        mean(&beside)
    );
    println!(
        "spread max ÷ min − 1 = {:.1} % over {} readings ({} the {:.0} % margin a measured clock gets)",
        spread * 100.0,
        all.len(),
        if spread <= MEASURED_CLOCK_MARGIN {
            "within"
        } else {
            "ABOVE"
        },
        MEASURED_CLOCK_MARGIN * 100.0
    );
}
