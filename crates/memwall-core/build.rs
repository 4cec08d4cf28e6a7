//! Embeds provenance at build time: memwall's git commit and the version of the
//! llama.cpp bindings (from Cargo.lock).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    // `--no-optional-locks`: `git status` otherwise refreshes and rewrites the index,
    // and a build script that touches what it is watched on rebuilds memwall-core on
    // the next cargo command (scripts/check-built-once.py caught it in CI).
    let o = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    // The manifest dir is read when the script runs, not baked in with `env!` when
    // it is compiled: cargo reuses a compiled build script after the workspace moves
    // (a shared CARGO_TARGET_DIR used from two checkouts), and a baked-in path then
    // points at the other checkout, so every stored row said commit "unknown".
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../..");
    let commit = git(&[
        "-C",
        root.to_str().unwrap_or("."),
        "rev-parse",
        "--short=12",
        "HEAD",
    ])
    .unwrap_or_else(|| {
        println!(
            "cargo:warning=git could not name the commit of {}: stored rows will say build_commit \"unknown\"",
            root.display()
        );
        "unknown".into()
    });
    let dirty = git(&[
        "-C",
        root.to_str().unwrap_or("."),
        "status",
        "--porcelain",
        "--untracked-files=no",
    ])
    .is_some_and(|s| !s.is_empty());
    let commit = if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=MEMWALL_GIT_COMMIT={commit}");
    // llama-bench's `build_number` is llama.cpp's commit count; memwall's is its own. A
    // shallow clone counts only the fetched commits, so it gets none (empty).
    let shallow = git(&[
        "-C",
        root.to_str().unwrap_or("."),
        "rev-parse",
        "--is-shallow-repository",
    ]);
    let build_number = match shallow.as_deref() {
        Some("false") => git(&[
            "-C",
            root.to_str().unwrap_or("."),
            "rev-list",
            "--count",
            "HEAD",
        ])
        .unwrap_or_default(),
        _ => String::new(),
    };
    println!("cargo:rustc-env=MEMWALL_BUILD_NUMBER={build_number}");
    // Re-run on a new commit and on an edit of the sources a stored row's commit
    // describes (the "-dirty" suffix). Watched: this checkout's HEAD, the one ref it
    // points at (and packed-refs), found through git so a linked worktree works. Not
    // `.git/index` (any git command may rewrite it without a change to the tree) and
    // not all of `refs/heads` (a commit on another branch or worktree is not this
    // build's commit): each of those recompiled memwall-core between the CLI build
    // and the workspace's test build.
    let root_s = root.to_str().unwrap_or(".");
    let git_path = |p: &str| {
        git(&["-C", root_s, "rev-parse", "--git-path", p]).map(|g| {
            let g = Path::new(&g);
            if g.is_absolute() {
                g.to_path_buf()
            } else {
                root.join(g)
            }
        })
    };
    let mut watched: Vec<std::path::PathBuf> = ["HEAD", "packed-refs"]
        .iter()
        .filter_map(|p| git_path(p))
        .collect();
    if let Some(r) = git(&["-C", root_s, "symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git_path(&r));
    }
    watched.extend(["crates", "src-tauri/src"].iter().map(|p| root.join(p)));
    for p in watched {
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let mut version = "unknown".to_string();
    let mut in_pkg = false;
    for line in lock.lines() {
        if line == "name = \"llama-cpp-sys-2\"" {
            in_pkg = true;
        } else if in_pkg && line.starts_with("version = ") {
            version = line
                .trim_start_matches("version = ")
                .trim_matches('"')
                .to_string();
            break;
        }
    }
    if version == "unknown" {
        println!(
            "cargo:warning=no llama-cpp-sys-2 entry in {}: the engine build string will say \"unknown\"",
            root.join("Cargo.lock").display()
        );
    }
    println!("cargo:rustc-env=MEMWALL_LLAMA_CPP_SYS_VERSION={version}");
    // The CMake build type llama-cpp-sys-2 0.1.161 compiles llama.cpp with (its
    // build.rs: `LLAMA_LIB_PROFILE`, else RelWithDebInfo when cargo's DEBUG is
    // true, else Release). -O2 vs -O3 changed pp512 by 15 % here, so the build
    // string every stored row carries names it.
    let profile = std::env::var("LLAMA_LIB_PROFILE").unwrap_or_else(|_| {
        if std::env::var("DEBUG").as_deref() == Ok("true") {
            "RelWithDebInfo".into()
        } else {
            "Release".into()
        }
    });
    println!("cargo:rustc-env=MEMWALL_LLAMA_CPP_PROFILE={profile}");
    println!(
        "cargo:rustc-env=MEMWALL_MLX_VERSION={}",
        std::env::var("DEP_MLX_VERSION").unwrap_or_default()
    );
    println!("cargo:rerun-if-env-changed=LLAMA_LIB_PROFILE");
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
}
