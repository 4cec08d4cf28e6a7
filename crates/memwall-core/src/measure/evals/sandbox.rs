//! Executes untrusted generated Python (HumanEval completions) in an isolated
//! subprocess, and decides whether its tests really passed.
//!
//! **A pass is proven, not inferred from the exit status.** A trusted runner
//! reads a fresh random token (128 bits from the OS, [`new_nonce`]) from its stdin,
//! runs the program (which ends with HumanEval's `check(entry_point)`), and only
//! when that returns writes the token to a copy of stdout it took before the
//! program started. An execution passes when the token is on stdout *and* the
//! process exited 0 ([`verdict`]). A completion that calls `sys.exit(0)` or
//! `os._exit(0)` before or inside the tests exits 0 without the token: failed.
//! The token lives only in the runner's memory and its stdin pipe, never in the
//! program text, so a completion cannot print it by accident or by reading the file.
//!
//! Layers, each recorded in [`Execution`]:
//! - **isolation** ([`Isolation`]): Debian's `bubblewrap` runs the program with
//!   every namespace unshared (user, mount, PID, network, IPC, UTS, cgroup): the
//!   host file system is mounted read-only, `/tmp` is a fresh tmpfs, and the network
//!   namespace is empty (its loopback is not the host's). When `bwrap` is missing or
//!   cannot create namespaces, [`run_python`] refuses unless
//!   [`SandboxLimits::unsafe_no_sandbox`] is set (`--unsafe-no-sandbox`); the
//!   isolation used is part of every stored item and cell configuration;
//! - `python3 -I` (isolated: no user site, no `PYTHON*` variables), an empty
//!   environment;
//! - resource limits set in the child before `exec` (`setrlimit`): CPU seconds,
//!   address space, file size, open files, no core dumps;
//! - a new session (`setsid`), so a timeout kills the whole process group
//!   (bubblewrap's `--die-with-parent` takes its PID namespace with it);
//! - a guard run before the program replaces `socket.socket` and disables
//!   process-spawning and destructive functions (human-eval's `reliability_guard`
//!   idea);
//! - a wall-clock timeout, after which the process group is killed.
//!
//! What this does not stop: code that deliberately inspects the runner's own
//! frames for the token. The isolation bounds what such code can touch; run the
//! evaluation only on data you chose.

use super::EvalError;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Limits of one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxLimits {
    /// Wall-clock timeout.
    pub timeout_ms: u64,
    /// Address-space limit, bytes.
    pub memory_bytes: u64,
    /// Largest file the program may write, bytes.
    pub file_bytes: u64,
    /// Run without file-system and network isolation when bubblewrap is unavailable
    /// (`--unsafe-no-sandbox`): only the Python guard and the resource limits remain.
    #[serde(default)]
    pub unsafe_no_sandbox: bool,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            timeout_ms: 10_000,
            memory_bytes: 1 << 30,
            file_bytes: 1 << 20,
            unsafe_no_sandbox: false,
        }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    /// The tests ran to the end (the runner's token is on stdout) and the process
    /// exited 0 within the time limit.
    pub passed: bool,
    /// `passed`, `failed (exit N)`, `failed (exit 0 before the tests finished)`,
    /// `timeout`, `killed by signal N`.
    pub status: String,
    /// Last 600 bytes of stderr.
    pub stderr_tail: String,
    /// Wall time, ms.
    pub elapsed_ms: u64,
    /// `bubblewrap` or `none (--unsafe-no-sandbox)`.
    pub isolation: String,
}

/// Isolation available for running untrusted code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// `bwrap` at this path created every namespace in a probe run.
    Bubblewrap(PathBuf),
    /// None: why not (for the refusal message).
    Unavailable(String),
}

impl Isolation {
    /// Probes once per process: finds `bwrap` on `PATH` (or `/usr/bin`, `/bin`) and
    /// runs `/bin/true` (or `true`) under the same flags the sandbox uses.
    pub fn detect() -> Isolation {
        static CACHE: OnceLock<Isolation> = OnceLock::new();
        CACHE.get_or_init(probe_bwrap).clone()
    }

    /// The label stored with each execution.
    pub fn label(&self) -> &'static str {
        match self {
            Isolation::Bubblewrap(_) => "bubblewrap",
            Isolation::Unavailable(_) => "none (--unsafe-no-sandbox)",
        }
    }
}

fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

/// bubblewrap's arguments up to (not including) the command: every namespace
/// unshared, the host read-only, a private `/tmp` with `dir` read-only at `/tmp/prog`.
fn bwrap_args(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut a: Vec<std::ffi::OsString> = [
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--tmpfs",
        "/tmp",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--ro-bind",
    ]
    .iter()
    .map(Into::into)
    .collect();
    a.push(dir.as_os_str().to_owned());
    for s in [
        "/tmp/prog",
        "--chdir",
        "/tmp",
        "--setenv",
        "HOME",
        "/tmp",
        "--",
    ] {
        a.push(s.into());
    }
    a
}

fn probe_bwrap() -> Isolation {
    let Some(bwrap) = find_bwrap() else {
        return Isolation::Unavailable(
            "bwrap (bubblewrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
                .into(),
        );
    };
    let dir = match tempfile::Builder::new().prefix("memwall-probe-").tempdir() {
        Ok(d) => d,
        Err(e) => return Isolation::Unavailable(format!("no temporary directory: {e}")),
    };
    let out = Command::new(&bwrap)
        .args(bwrap_args(dir.path()))
        .arg("true")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(o) if o.status.success() => Isolation::Bubblewrap(bwrap),
        Ok(o) => Isolation::Unavailable(format!(
            "{} could not create the namespaces ({}): {}. Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or AppArmor's kernel.apparmor_restrict_unprivileged_userns=0)",
            bwrap.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Isolation::Unavailable(format!("{} cannot start: {e}", bwrap.display())),
    }
}

/// Refuses when there is no isolation and `limits` does not allow running without
/// it. Call before a long evaluation, so it fails before measuring anything.
///
/// # Errors
/// [`EvalError::Sandbox`] naming why isolation is unavailable and the flag.
pub fn check_isolation(limits: &SandboxLimits) -> Result<Isolation, EvalError> {
    allowed(Isolation::detect(), limits)
}

fn allowed(iso: Isolation, limits: &SandboxLimits) -> Result<Isolation, EvalError> {
    match &iso {
        Isolation::Unavailable(why) if !limits.unsafe_no_sandbox => {
            Err(EvalError::Sandbox(format!(
                "refusing to execute generated code without isolation: {why}. Install bubblewrap, or pass --unsafe-no-sandbox to run it with only the Python guard (items are then marked 'isolation: none')"
            )))
        }
        _ => Ok(iso),
    }
}

/// Defines the guard the runner applies before the program: no sockets, no
/// subprocesses, no destructive calls.
pub const GUARD: &str = r#"
def __memwall_guard():
    import builtins, os, shutil, socket, subprocess, sys
    def _blocked(*a, **k):
        raise PermissionError("blocked by the memwall sandbox")
    class _NoSocket:
        def __init__(self, *a, **k):
            raise PermissionError("network blocked by the memwall sandbox")
    socket.socket = _NoSocket
    socket.create_connection = _blocked
    socket.getaddrinfo = _blocked
    for name in ("system", "popen", "kill", "killpg", "fork", "forkpty", "execv", "execve", "execvp",
                 "execvpe", "spawnv", "spawnve", "remove", "unlink", "rmdir", "removedirs", "rename",
                 "renames", "truncate", "chmod", "chown", "putenv", "setuid", "chdir"):
        if hasattr(os, name):
            setattr(os, name, _blocked)
    shutil.rmtree = _blocked
    shutil.move = _blocked
    subprocess.Popen = _NoSocket
    subprocess.run = _blocked
    subprocess.call = _blocked
    subprocess.check_output = _blocked
    sys.modules["ctypes"] = None
"#;

/// The trusted runner (after [`GUARD`]): reads the token from stdin, keeps a copy of
/// stdout, compiles the program named by `argv[1]`, applies the guard, runs the
/// program in a fresh namespace (not `__main__`'s), and writes the token only if
/// the program returned.
const RUNNER: &str = r#"
def __memwall_main():
    import os, sys
    token = sys.stdin.readline().strip().encode()
    sys.stdin.close()
    out = os.dup(1)
    write = os.write
    with open(sys.argv[1], encoding="utf-8") as f:
        code = compile(f.read(), "program.py", "exec")
    __memwall_guard()
    exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    try:
        sys.stdout.flush()
    except Exception:
        pass
    write(out, b"\n" + token + b"\n")
__memwall_main()
"#;

/// A fresh pass token: 32 hex digits from the OS's random source.
///
/// # Errors
/// [`EvalError::Sandbox`] when `/dev/urandom` cannot be read.
pub fn new_nonce() -> Result<String, EvalError> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| {
            EvalError::Sandbox(format!("cannot read /dev/urandom for the pass token: {e}"))
        })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// How the process ended, before the token is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Killed by the wall-clock timeout.
    Timeout,
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// Exit code bubblewrap and shells use for a child killed by `SIGXCPU` (the CPU-seconds limit).
const EXIT_SIGXCPU: i32 = 128 + libc_sigxcpu();

const fn libc_sigxcpu() -> i32 {
    #[cfg(unix)]
    {
        libc::SIGXCPU
    }
    #[cfg(not(unix))]
    {
        24
    }
}

/// Whether a sandboxed program passed, and why ([`verdict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Exited 0 and printed the nonce line.
    pub passed: bool,
    /// How it ended, as a row shows it: `passed`, `timeout`, `failed (exit 1)`, ….
    pub status: String,
}

/// The verdict: passed only when the process exited 0 *and* a whole stdout line is
/// `nonce`.
pub fn verdict(exit: Exit, stdout_tail: &str, nonce: &str) -> Verdict {
    let token = !nonce.is_empty() && stdout_tail.lines().any(|l| l.trim() == nonce);
    let (passed, status) = match exit {
        Exit::Timeout => (false, "timeout".into()),
        Exit::Code(0) if token => (true, "passed".into()),
        Exit::Code(0) => (false, "failed (exit 0 before the tests finished)".into()),
        Exit::Signal(s) if s == libc_sigxcpu() => (false, "timeout (CPU limit)".into()),
        Exit::Code(c) if c == EXIT_SIGXCPU => (false, "timeout (CPU limit)".into()),
        Exit::Code(c) => (false, format!("failed (exit {c})")),
        Exit::Signal(s) => (false, format!("killed by signal {s}")),
    };
    Verdict { passed, status }
}

/// Reads a pipe to the end on a thread, keeping the last `keep` bytes of at most
/// 16 MiB (a program that writes more is blocked and then timed out).
fn tail_reader(mut r: impl Read + Send + 'static, keep: usize) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut tail = Vec::new();
        let mut buf = [0u8; 8192];
        let mut total = 0usize;
        while total < 16 << 20 {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    total += n;
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > 2 * keep {
                        tail.drain(..tail.len() - keep);
                    }
                }
            }
        }
        if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
        tail
    })
}

/// Runs `program` (Python source ending with the tests' `check(...)` call) under
/// the sandbox with `limits`, using the isolation [`Isolation::detect`] finds.
///
/// # Errors
/// [`EvalError::Sandbox`] when there is no isolation and
/// [`SandboxLimits::unsafe_no_sandbox`] is not set, when `python3`/`bwrap` cannot be
/// started or the temporary directory cannot be made (a failing program is not an
/// error: see [`Execution::passed`]).
pub fn run_python(program: &str, limits: &SandboxLimits) -> Result<Execution, EvalError> {
    run_python_with(program, limits, Isolation::detect())
}

/// [`run_python`] with the isolation given (tests force [`Isolation::Unavailable`]).
///
/// # Errors
/// As [`run_python`].
pub fn run_python_with(
    program: &str,
    limits: &SandboxLimits,
    isolation: Isolation,
) -> Result<Execution, EvalError> {
    let isolation = allowed(isolation, limits)?;
    let nonce = new_nonce()?;
    let dir = tempfile::Builder::new()
        .prefix("memwall-sandbox-")
        .tempdir()?;
    std::fs::write(dir.path().join("program.py"), program)?;
    std::fs::write(dir.path().join("runner.py"), format!("{GUARD}\n{RUNNER}"))?;
    let mut cmd = match &isolation {
        Isolation::Bubblewrap(bwrap) => {
            let mut c = Command::new(bwrap);
            c.args(bwrap_args(dir.path())).args([
                "python3",
                "-I",
                "-B",
                "/tmp/prog/runner.py",
                "/tmp/prog/program.py",
            ]);
            c
        }
        Isolation::Unavailable(_) => {
            let mut c = Command::new("python3");
            c.arg("-I")
                .arg("-B")
                .arg(dir.path().join("runner.py"))
                .arg(dir.path().join("program.py"));
            c
        }
    };
    cmd.current_dir(dir.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Isolation::Unavailable(_) = isolation {
        // Under bubblewrap HOME is the private /tmp (--setenv).
        cmd.env("HOME", dir.path());
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let lim = limits.clone();
        let try_netns = matches!(isolation, Isolation::Unavailable(_));
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                #[cfg(target_os = "linux")]
                if try_netns {
                    // Best effort without bubblewrap: a private network namespace.
                    let _ = libc::unshare(libc::CLONE_NEWNET) == 0
                        || libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0;
                }
                #[cfg(not(target_os = "linux"))]
                let _ = try_netns;
                let set = |res, v: u64| {
                    let r = libc::rlimit {
                        rlim_cur: v as libc::rlim_t,
                        rlim_max: v as libc::rlim_t,
                    };
                    libc::setrlimit(res, &r);
                };
                let cpu = lim.timeout_ms.div_ceil(1000) + 1;
                set(libc::RLIMIT_CPU, cpu);
                set(libc::RLIMIT_AS, lim.memory_bytes);
                set(libc::RLIMIT_FSIZE, lim.file_bytes);
                set(libc::RLIMIT_NOFILE, 64);
                set(libc::RLIMIT_CORE, 0);
                Ok(())
            });
        }
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        EvalError::Sandbox(format!(
            "cannot start {}: {e} (install python3{})",
            cmd.get_program().to_string_lossy(),
            if matches!(isolation, Isolation::Bubblewrap(_)) {
                " and bubblewrap"
            } else {
                ""
            }
        ))
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A program that never reads is fine: the pipe buffer holds the line.
        let _ = stdin.write_all(format!("{nonce}\n").as_bytes());
    }
    let out = tail_reader(child.stdout.take().expect("piped"), 64 << 10);
    let err = tail_reader(child.stderr.take().expect("piped"), 600);
    let deadline = Duration::from_millis(limits.timeout_ms);
    let exit = loop {
        if let Some(st) = child.try_wait()? {
            break exit_of(st);
        }
        if t0.elapsed() > deadline {
            #[cfg(unix)]
            // SAFETY: kill(2) on the child's own process group (setsid made it leader).
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            break Exit::Timeout;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let Verdict { passed, status } = verdict(exit, &String::from_utf8_lossy(&stdout), &nonce);
    Ok(Execution {
        passed,
        status,
        stderr_tail: String::from_utf8_lossy(&stderr).into_owned(),
        elapsed_ms,
        isolation: isolation.label().to_string(),
    })
}

fn exit_of(st: std::process::ExitStatus) -> Exit {
    if let Some(c) = st.code() {
        return Exit::Code(c);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        Exit::Signal(st.signal().unwrap_or(0))
    }
    #[cfg(not(unix))]
    Exit::Signal(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(timeout_ms: u64) -> SandboxLimits {
        SandboxLimits {
            timeout_ms,
            ..Default::default()
        }
    }

    fn run(p: &str) -> Execution {
        run_python(p, &limits(20_000)).unwrap()
    }

    /// A HumanEval-shaped program: the completion, the tests, then `check(f)`.
    fn program(completion: &str) -> String {
        format!(
            "{completion}\n\ndef check(candidate):\n    assert candidate(1) == 2\n    assert candidate(41) == 42\n\ncheck(f)\n"
        )
    }

    /// Skips loudly when this machine cannot isolate (MEMWALL_REQUIRE_SANDBOX=1 fails instead).
    fn isolated() -> bool {
        match Isolation::detect() {
            Isolation::Bubblewrap(_) => true,
            Isolation::Unavailable(why) => {
                assert!(
                    std::env::var("MEMWALL_REQUIRE_SANDBOX").as_deref() != Ok("1"),
                    "MEMWALL_REQUIRE_SANDBOX=1 but no isolation: {why}"
                );
                eprintln!("!!!!!!!! SKIPPED: no sandbox isolation here ({why}) !!!!!!!!");
                false
            }
        }
    }

    #[test]
    fn a_correct_completion_passes_and_a_wrong_one_fails() {
        if !isolated() {
            return;
        }
        let ok = run(&program("def f(x):\n    return x + 1\n"));
        assert!(ok.passed && ok.status == "passed", "{ok:?}");
        assert_eq!(ok.isolation, "bubblewrap");
        let bad = run(&program("def f(x):\n    return x\n"));
        assert!(
            !bad.passed
                && bad.status == "failed (exit 1)"
                && bad.stderr_tail.contains("AssertionError"),
            "{bad:?}"
        );
    }

    #[test]
    fn exiting_zero_before_the_tests_finish_is_a_failure() {
        if !isolated() {
            return;
        }
        for c in [
            // At import time, before the tests run.
            "import sys\nsys.exit(0)\ndef f(x):\n    return x\n",
            "import os\nos._exit(0)\ndef f(x):\n    return x\n",
            // Inside the function under test, on the first assert's call.
            "def f(x):\n    import sys\n    sys.exit(0)\n",
            "def f(x):\n    import os\n    os._exit(0)\n",
            "def f(x):\n    raise SystemExit\n",
        ] {
            let ex = run(&program(c));
            assert!(
                !ex.passed && ex.status == "failed (exit 0 before the tests finished)",
                "{c:?} → {ex:?}"
            );
        }
    }

    #[test]
    fn printing_a_guessed_token_does_not_pass() {
        if !isolated() {
            return;
        }
        // The same shape as the real token (32 hex digits), printed and then exiting 0.
        let guess = "0123456789abcdef0123456789abcdef";
        let ex = run(&format!(
            "import os, sys\nprint('{guess}')\nsys.stdout.flush()\nos.write(1, b'\\n{guess}\\n')\nos._exit(0)\n"
        ));
        assert!(!ex.passed, "{ex:?}");
        // The program text does not hold the token: printing its own source proves nothing.
        let ex = run("import sys\nprint(open(sys.argv[1]).read())\nsys.exit(0)\n");
        assert!(!ex.passed, "{ex:?}");
    }

    #[test]
    fn verdict_needs_both_the_token_and_exit_zero() {
        let want = |passed: bool, status: &str| Verdict {
            passed,
            status: status.into(),
        };
        let n = "5f0e";
        assert_eq!(verdict(Exit::Code(0), "x\n5f0e\n", n), want(true, "passed"));
        assert_eq!(
            verdict(Exit::Code(0), "x\n", n),
            want(false, "failed (exit 0 before the tests finished)")
        );
        assert_eq!(
            verdict(Exit::Code(1), "5f0e\n", n),
            want(false, "failed (exit 1)")
        );
        assert!(!verdict(Exit::Code(0), "5f0e5f0e\n", n).passed);
        assert_eq!(verdict(Exit::Timeout, "5f0e\n", n), want(false, "timeout"));
        assert_eq!(
            verdict(Exit::Code(152), "", n),
            want(false, "timeout (CPU limit)")
        );
        assert_eq!(
            verdict(Exit::Signal(9), "", n),
            want(false, "killed by signal 9")
        );
        assert_eq!(
            verdict(Exit::Code(0), "\n\n", ""),
            want(false, "failed (exit 0 before the tests finished)")
        );
        let a = new_nonce().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, new_nonce().unwrap());
    }

    #[test]
    fn writes_outside_the_private_tmp_do_not_reach_the_host() {
        if !isolated() {
            return;
        }
        // Outside /tmp: the host is mounted read-only. The folder must be outside /tmp
        // by construction (a clone under /tmp would sit inside the sandbox's private
        // tmpfs, where the path does not exist at all): /var/tmp, else $HOME.
        let outside = [
            "/var/tmp".to_string(),
            std::env::var("HOME").unwrap_or_default(),
        ]
        .into_iter()
        .map(std::path::PathBuf::from)
        .filter_map(|p| p.canonicalize().ok())
        .find(|p| !p.starts_with("/tmp") && p.is_dir())
        .expect("/var/tmp or $HOME, outside /tmp");
        let host = tempfile::Builder::new()
            .prefix("memwall-sandbox-test-")
            .tempdir_in(&outside)
            .unwrap();
        let target = host.path().join("written-by-the-sandbox");
        let ex = run(&program(&format!(
            "open({:?}, 'w').write('x')\ndef f(x):\n    return x + 1\n",
            target.display().to_string()
        )));
        assert!(
            !ex.passed && ex.stderr_tail.contains("Read-only file system"),
            "{ex:?}"
        );
        assert!(!target.exists());
        // Under /tmp: the write lands in the sandbox's own tmpfs, never on the host's /tmp.
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("written-by-the-sandbox");
        let ex = run(&program(&format!(
            "import os\nos.makedirs({:?}, exist_ok=True)\nopen({:?}, 'w').write('x')\ndef f(x):\n    return x + 1\n",
            tmp.path().display().to_string(),
            target.display().to_string()
        )));
        assert!(ex.passed, "{ex:?}");
        assert!(!target.exists());
    }

    #[test]
    fn the_hosts_network_is_unreachable() {
        if !isolated() {
            return;
        }
        // A listener on the host's loopback: reachable from any process sharing the
        // host's network namespace, not from the sandbox's (its loopback is its own).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // `_socket` bypasses the Python guard's `socket.socket`: only the namespace stops it.
        let ex = run(&program(&format!(
            "import _socket\ns = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\ns.settimeout(5)\ns.connect(('127.0.0.1', {port}))\ndef f(x):\n    return x + 1\n"
        )));
        assert!(!ex.passed, "{ex:?}");
        assert!(
            ex.stderr_tail.contains("Connection refused") || ex.stderr_tail.contains("unreachable"),
            "{ex:?}"
        );
        let n = run("import socket\ns = socket.socket()\n");
        assert!(
            !n.passed && n.stderr_tail.contains("network blocked"),
            "{n:?}"
        );
        let p = run("import subprocess\nsubprocess.run(['true'])\n");
        assert!(
            !p.passed && p.stderr_tail.contains("blocked by the memwall sandbox"),
            "{p:?}"
        );
    }

    #[test]
    fn the_timeout_is_enforced() {
        if !isolated() {
            return;
        }
        let t0 = Instant::now();
        let t = run_python(&program("while True:\n    pass\n"), &limits(500)).unwrap();
        // The wall-clock deadline (0.5 s) comes before the CPU limit (2 s of CPU); both say timeout.
        assert!(!t.passed && t.status.starts_with("timeout"), "{t:?}");
        // Generous: only proves the loop did not run on unbounded.
        assert!(t0.elapsed() < Duration::from_secs(60), "{t:?}");
    }

    #[test]
    fn memory_is_limited() {
        if !isolated() {
            return;
        }
        let m = run("x = bytearray(4 << 30)\n");
        assert!(!m.passed && m.stderr_tail.contains("MemoryError"), "{m:?}");
    }

    #[test]
    fn without_isolation_it_refuses_unless_allowed() {
        let none = Isolation::Unavailable("bwrap is not installed".into());
        let e = run_python_with("pass\n", &limits(20_000), none.clone())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "refusing to execute generated code without isolation: bwrap is not installed"
            ) && e.contains("--unsafe-no-sandbox"),
            "{e}"
        );
        let unsafe_limits = SandboxLimits {
            unsafe_no_sandbox: true,
            ..limits(20_000)
        };
        let ok = run_python_with(
            &program("def f(x):\n    return x + 1\n"),
            &unsafe_limits,
            none.clone(),
        )
        .unwrap();
        assert!(ok.passed, "{ok:?}");
        assert_eq!(ok.isolation, "none (--unsafe-no-sandbox)");
        // The pass token still decides without isolation.
        let ex =
            run_python_with(&program("import sys\nsys.exit(0)\n"), &unsafe_limits, none).unwrap();
        assert!(!ex.passed, "{ex:?}");
    }
}
