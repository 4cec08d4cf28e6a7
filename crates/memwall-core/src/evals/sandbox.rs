//! Executes untrusted generated Python (HumanEval completions) in a sandboxed
//! subprocess.
//!
//! Layers, each recorded in [`Execution`]:
//! - a fresh temporary directory as the working directory, deleted afterwards;
//! - `python3 -I` (isolated: no user site, no `PYTHON*` variables), an empty
//!   environment, stdin closed;
//! - resource limits set in the child before `exec` (`setrlimit`): CPU seconds,
//!   address space, file size, open files, no core dumps;
//! - a new session (`setsid`), so a timeout kills the whole process group;
//! - **no network**: on Linux the child first tries a private network namespace
//!   (`unshare(CLONE_NEWUSER | CLONE_NEWNET)`, or `CLONE_NEWNET` alone as root);
//!   in every case a guard prepended to the program replaces `socket.socket` and
//!   disables process-spawning and destructive functions (human-eval's
//!   `reliability_guard` idea);
//! - a wall-clock timeout, after which the process group is killed.
//!
//! This is defence in depth against accidents of a small model, not a security
//! boundary against a determined attacker: run it only on data you chose.

use super::EvalError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::process::{Command, Stdio};
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
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            timeout_ms: 10_000,
            memory_bytes: 1 << 30,
            file_bytes: 1 << 20,
        }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    /// Exit code 0 within the time limit.
    pub passed: bool,
    /// `passed`, `failed (exit N)`, `timeout`, `killed by signal N`.
    pub status: String,
    /// Last 600 bytes of stderr.
    pub stderr_tail: String,
    /// Wall time, ms.
    pub elapsed_ms: u64,
    /// `namespace` when the child ran in a private network namespace, else
    /// `python guard` (the socket guard only).
    pub network: String,
}

/// Prepended to every program: no sockets, no subprocesses, no destructive calls.
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
__memwall_guard()
del __memwall_guard
"#;

/// Runs `program` (Python source) under the sandbox with `limits`.
///
/// # Errors
/// [`EvalError::Sandbox`] when `python3` cannot be started or the temporary
/// directory cannot be made (a failing program is not an error: see
/// [`Execution::passed`]).
pub fn run_python(program: &str, limits: &SandboxLimits) -> Result<Execution, EvalError> {
    let dir = tempfile::Builder::new()
        .prefix("memwall-sandbox-")
        .tempdir()?;
    let file = dir.path().join("program.py");
    {
        let mut f = std::fs::File::create(&file)?;
        f.write_all(GUARD.as_bytes())?;
        f.write_all(b"\n")?;
        f.write_all(program.as_bytes())?;
    }
    let ns_flag = dir.path().join(".netns");
    let mut cmd = Command::new("python3");
    cmd.arg("-I")
        .arg("-B")
        .arg(&file)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let lim = limits.clone();
        let flag = std::ffi::CString::new(ns_flag.as_os_str().as_encoded_bytes())
            .expect("temp path has no NUL");
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                #[cfg(target_os = "linux")]
                {
                    let ok = libc::unshare(libc::CLONE_NEWNET) == 0
                        || libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0;
                    if ok {
                        let fd = libc::open(flag.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o600);
                        if fd >= 0 {
                            libc::close(fd);
                        }
                    }
                }
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
    let mut child = cmd
        .spawn()
        .map_err(|e| EvalError::Sandbox(format!("cannot start python3: {e} (install python3)")))?;
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ =
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut stderr, 1 << 20), &mut buf);
        buf
    });
    let deadline = Duration::from_millis(limits.timeout_ms);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if t0.elapsed() > deadline {
            #[cfg(unix)]
            // SAFETY: kill(2) on the child's own process group (setsid made it leader).
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    let err = reader.join().unwrap_or_default();
    let tail = String::from_utf8_lossy(&err[err.len().saturating_sub(600)..]).into_owned();
    let network = if ns_flag.exists() {
        "namespace"
    } else {
        "python guard"
    }
    .to_string();
    let (passed, status) = match status {
        None => (false, "timeout".to_string()),
        Some(st) if st.success() => (true, "passed".to_string()),
        Some(st) => match st.code() {
            Some(c) => (false, format!("failed (exit {c})")),
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::process::ExitStatusExt;
                    (
                        false,
                        format!("killed by signal {}", st.signal().unwrap_or(0)),
                    )
                }
                #[cfg(not(unix))]
                (false, "killed".to_string())
            }
        },
    };
    Ok(Execution {
        passed,
        status,
        stderr_tail: tail,
        elapsed_ms,
        network,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &str) -> Execution {
        run_python(
            p,
            &SandboxLimits {
                timeout_ms: 3000,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn pass_fail_and_timeout_are_told_apart() {
        assert!(run("assert 1 + 1 == 2\n").passed);
        let f = run("assert 1 + 1 == 3, 'wrong'\n");
        assert!(
            !f.passed && f.status == "failed (exit 1)" && f.stderr_tail.contains("wrong"),
            "{f:?}"
        );
        let t = run_python(
            "while True:\n    pass\n",
            &SandboxLimits {
                timeout_ms: 500,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            !t.passed && (t.status == "timeout" || t.status.starts_with("killed")),
            "{t:?}"
        );
        assert!(t.elapsed_ms < 3000, "{t:?}");
    }

    #[test]
    fn network_processes_and_deletion_are_blocked() {
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
        let d = run("import os\nos.remove('/etc/hostname')\n");
        assert!(!d.passed, "{d:?}");
    }

    #[test]
    fn memory_is_limited() {
        let m = run("x = bytearray(4 << 30)\n");
        assert!(!m.passed && m.stderr_tail.contains("MemoryError"), "{m:?}");
    }
}
