//! Mutation fuzzer for memwall's GGUF reader and model facts (cargo-fuzz needs a
//! nightly toolchain; this runs on stable).
//!
//! ```text
//! cargo run --release -p memwall-testkit --example fuzz_gguf -- --seconds 60 [--seed 1]
//!     [--cases N] [--models DIR] [--max-rss-mib 256] [--max-case-heap-mib 64] [--out DIR]
//! cargo run --release -p memwall-testkit --example fuzz_gguf -- --replay FILE
//! ```
//!
//! Seeds: headers built in code, plus the header region of every `*.gguf` in the
//! models folder (`$MEMWALL_MODELS`, default `~/.cache/memwall/models`; only the
//! header is read). Case `i` of seed `S` is always the same input
//! (`memwall_testkit::fuzz::make_case`). A panic, a broken invariant, a case whose
//! heap peak passes `--max-case-heap-mib`, or a resident set past `--max-rss-mib`
//! is a finding: the input is saved to `--out` (default `fuzz-findings/`) as
//! `case-<i>-seed-<S>-len-<told length>.gguf`, the line says how to replay it, and
//! the exit status is 1. The last line is the summary: cases, cases/s, panics,
//! errors by kind, max RSS.

use memwall_testkit::fuzz::{self, Case, Outcome, Seed, Stats};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to `System` unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const MIB: f64 = 1024.0 * 1024.0;

thread_local! {
    /// Where the last panic happened (the hook records it instead of printing).
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Resident set size from /proc/self/statm (pages × page size); 0 where unavailable.
fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}

/// CPU seconds (user + system) this process has used: on a shared machine the
/// wall-clock rate understates the fuzzer's own speed.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

struct Args {
    seconds: f64,
    cases: Option<u64>,
    seed: u64,
    models: PathBuf,
    max_rss_mib: f64,
    max_case_heap_mib: f64,
    out: PathBuf,
    replay: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 60.0,
        cases: None,
        seed: 1,
        models: memwall_core::probe::catalog::models_dir(),
        max_rss_mib: 256.0,
        max_case_heap_mib: 64.0,
        out: PathBuf::from("fuzz-findings"),
        replay: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{flag} {v}: not a non-negative number"))
        };
        match flag.as_str() {
            "--seconds" => a.seconds = num(val()?)?,
            "--cases" => a.cases = Some(num(val()?)? as u64),
            "--seed" => {
                let v = val()?;
                a.seed = v
                    .parse()
                    .map_err(|_| format!("--seed {v}: not an unsigned integer"))?
            }
            "--models" => a.models = PathBuf::from(val()?),
            "--max-rss-mib" => a.max_rss_mib = num(val()?)?,
            "--max-case-heap-mib" => a.max_case_heap_mib = num(val()?)?,
            "--out" => a.out = PathBuf::from(val()?),
            "--replay" => a.replay = Some(PathBuf::from(val()?)),
            "-h" | "--help" => {
                return Err("usage: fuzz_gguf [--seconds N] [--cases N] [--seed S] [--models DIR] [--max-rss-mib M] [--max-case-heap-mib M] [--out DIR] | --replay FILE".into());
            }
            other => return Err(format!("unknown flag {other} (see --help)")),
        }
    }
    Ok(a)
}

/// Seeds from the models folder: the header of each `*.gguf` (at most 64 MiB).
fn model_seeds(dir: &Path) -> Vec<Seed> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        match Seed::from_model(&p, 64 << 20) {
            Ok(s) => out.extend(s),
            Err(e) => eprintln!("fuzz_gguf: skipping {}: {e}", p.display()),
        }
    }
    out
}

fn replay(path: &Path) -> i32 {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("fuzz_gguf: {}: {e}", path.display());
            return 2;
        }
    };
    // The told length is in the name (`-len-N.gguf`), else the file's own.
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let len = name
        .as_deref()
        .and_then(|n| n.rsplit_once("-len-"))
        .and_then(|(_, l)| l.parse().ok())
        .unwrap_or(bytes.len() as u64);
    let o = fuzz::run_case(&bytes, len);
    println!("{}: told length {len}: {o:?}", path.display());
    i32::from(o.is_finding())
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fuzz_gguf: {e}");
            std::process::exit(2);
        }
    };
    if let Some(p) = &a.replay {
        std::process::exit(replay(p));
    }
    let mut seeds = fuzz::synthetic_seeds();
    let n_synth = seeds.len();
    seeds.extend(model_seeds(&a.models));
    let n_real = seeds.len() - n_synth;
    eprintln!(
        "fuzz_gguf: seed {}, {} seeds ({n_synth} synthetic, {n_real} from {}), {} s{}",
        a.seed,
        seeds.len(),
        a.models.display(),
        a.seconds,
        a.cases.map_or(String::new(), |c| format!(" or {c} cases"))
    );
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map_or("?".into(), |l| format!("{}:{}", l.file(), l.line()));
        LAST_PANIC.with(|p| *p.borrow_mut() = at);
    }));

    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut st = Stats::default();
    let (mut max_rss, mut max_heap, mut heap_case) = (rss_bytes(), 0usize, (0u64, 0usize));
    let mut findings = 0u64;
    let mut rss_over = false;
    let mut report = |i: u64, case: &Case, what: &str| {
        findings += 1;
        let _ = std::fs::create_dir_all(&a.out);
        let file = a.out.join(format!(
            "case-{i}-seed-{}-len-{}.gguf",
            a.seed, case.claimed_len
        ));
        let saved = std::fs::write(&file, &case.bytes).is_ok();
        println!(
            "FINDING case {i} (seed {}, from {:?}, mutations {:?}): {what}; input {} ({} bytes, told length {}); replay: cargo run --release -p memwall-testkit --example fuzz_gguf -- --replay {}",
            a.seed,
            seeds[case.seed].name,
            case.mutations,
            if saved {
                file.display().to_string()
            } else {
                "not saved".into()
            },
            case.bytes.len(),
            case.claimed_len,
            file.display()
        );
    };
    let limit_heap = (a.max_case_heap_mib * MIB) as usize;
    let mut i = 0u64;
    'run: loop {
        for _ in 0..256 {
            if a.cases.is_some_and(|c| i >= c) {
                break 'run;
            }
            let case = fuzz::make_case(&seeds, a.seed, i);
            let base = LIVE.load(Ordering::Relaxed);
            PEAK.store(base, Ordering::Relaxed);
            let o = fuzz::run_case(&case.bytes, case.claimed_len);
            let heap = PEAK.load(Ordering::Relaxed).saturating_sub(base);
            st.add(&case, &o);
            if heap > max_heap {
                max_heap = heap;
                heap_case = (i, case.seed);
            }
            match &o {
                Outcome::Panic(m) => {
                    let at = LAST_PANIC.with(|p| p.borrow().clone());
                    report(i, &case, &format!("PANIC at {at}: {m}"));
                }
                Outcome::Invariant(m) => report(i, &case, &format!("INVARIANT: {m}")),
                _ if heap > limit_heap => report(
                    i,
                    &case,
                    &format!(
                        "HEAP: {:.1} MiB for one case (limit {} MiB)",
                        heap as f64 / MIB,
                        a.max_case_heap_mib
                    ),
                ),
                _ => {}
            }
            i += 1;
        }
        let rss = rss_bytes();
        max_rss = max_rss.max(rss);
        if rss as f64 > a.max_rss_mib * MIB {
            println!(
                "FINDING: resident set {:.1} MiB after {i} cases passes --max-rss-mib {}",
                rss as f64 / MIB,
                a.max_rss_mib
            );
            rss_over = true;
            break;
        }
        if a.cases.is_none() && t0.elapsed().as_secs_f64() >= a.seconds {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "fuzz_gguf summary: {} cases in {secs:.1} s ({:.0} cases/s; {:.0} per CPU-second), seed {}, {} seeds ({n_real} from models), panics {}, invariant violations {}, findings {}, facts derived {}, max RSS {:.1} MiB, max heap per case {:.2} MiB (case {}, {}); errors by kind: {}",
        st.cases,
        st.cases as f64 / secs.max(1e-9),
        st.cases as f64 / cpu.max(1e-9),
        a.seed,
        seeds.len(),
        st.panics,
        st.invariants,
        findings + u64::from(rss_over),
        st.facts_ok,
        max_rss as f64 / MIB,
        max_heap as f64 / MIB,
        heap_case.0,
        seeds[heap_case.1].name,
        st.errors_line()
    );
    if findings > 0 || rss_over {
        std::process::exit(1);
    }
}
