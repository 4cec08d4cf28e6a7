//! The README and `docs/` as a newcomer meets them:
//!
//! 1. every relative link (and image) in `README.md` and `docs/*.md` resolves to a file
//!    or folder of the repository, and a `#fragment` into a Markdown file names one of
//!    its headings;
//! 2. the README has at most [`README_MAX_LINES`] lines and [`README_MAX_BYTES`] bytes,
//!    and no line longer than [`README_MAX_LINE_CHARS`] characters;
//! 3. every `docs/*.md` page is linked from the README, and starts (after its title)
//!    with the question it answers;
//! 4. every figure that looks like a measurement sits in a block (a paragraph, a list
//!    item, a table row) that names an existing file or folder under `results/`,
//!    unless an entry of [`ALLOWED`] (each with its reason) says it is not a measurement;
//! 5. every command's `--help` names an existing docs page.
//!
//! Each rule is also run on a planted violation, so a rule that cannot fail fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const README_MAX_LINES: usize = 150;
const README_MAX_BYTES: usize = 12_000;
const README_MAX_LINE_CHARS: usize = 300;

/// Figures in the docs that are not measurements: (page, exact text, why). The text
/// is removed from its block before the block is scanned. Keep this short: a figure
/// that was measured names its `results/` file instead.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "docs/bench.md",
        "plus 10 %",
        "the margin memwall adds to the add-chain clock in the peak's bound: a setting",
    ),
    (
        "docs/bench.md",
        "600 runs of about 50 µs",
        "the length of each timed add chain: a setting of the clock measurement",
    ),
    (
        "docs/bench.md",
        "(revision 5.10,",
        "stream.c's version number",
    ),
    (
        "docs/bench.md",
        "(goal ≥ 0.98)",
        "a goal set before measuring, not a measurement",
    ),
    (
        "docs/energy.md",
        "goal ≥ 0.99",
        "a goal set before measuring, not a measurement",
    ),
    (
        "docs/mlx.md",
        "(goal ≥ 0.95)",
        "a goal set before measuring, not a measurement",
    ),
    (
        "docs/mlx.md",
        "meeting the 0.95 goal",
        "a goal set before measuring, not a measurement",
    ),
    (
        "docs/mlx.md",
        "passes at ≥ 90 % identical and cosine ≥ 0.999",
        "the agreement check's pass thresholds: a definition",
    ),
    (
        "docs/mlx.md",
        "8.5 / 4.5 bits per weight",
        "bits per weight of MLX's formats, by their definition (4 or 8 bits + an f16 scale and bias per 64)",
    ),
    (
        "docs/predict.md",
        "4.5 / 8.5 bits per weight",
        "bits per weight of MLX's formats, by their definition (4 or 8 bits + an f16 scale and bias per 64)",
    ),
    (
        "docs/frontier.md",
        "Wilson 95 % intervals",
        "the confidence level of an interval: a definition",
    ),
    (
        "docs/evidence.md",
        "with 95 % intervals",
        "the confidence level of an interval: a definition",
    ),
    (
        "docs/methodology.md",
        "|z| > 3.5",
        "the outlier threshold (Iglewicz & Hoaglin): a definition",
    ),
    (
        "docs/methodology.md",
        "coefficient of variation above 5 %",
        "the variance warning's threshold: a definition",
    ),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files the rules cover: `README.md` and `docs/*.md`, as paths relative
/// to `root`.
fn pages(root: &Path) -> Vec<String> {
    let mut out = vec!["README.md".to_string()];
    if let Ok(rd) = std::fs::read_dir(root.join("docs")) {
        let mut docs: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("docs/{n}"))
            .collect();
        docs.sort();
        out.extend(docs);
    }
    out
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers, inline
/// code spans blanked (links and figures inside code are not checked).
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut s = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                s.push(' ');
            } else if in_code {
                s.push(' ');
            } else {
                s.push(c);
            }
        }
        out.push((i + 1, s));
    }
    out
}

/// Every `[text](target)` and `![alt](target)` target on a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.to_string());
        rest = &after[end..];
    }
    out
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#').replace('`', "").as_str()));
        }
    }
    out
}

/// Rule 1: every relative link resolves.
fn broken_links(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for page in pages(root) {
        let Ok(text) = std::fs::read_to_string(root.join(&page)) else {
            out.push(format!("{page}: cannot be read"));
            continue;
        };
        let dir = Path::new(&page).parent().unwrap_or(Path::new(""));
        for (n, line) in prose_lines(&text) {
            for t in link_targets(&line) {
                if t.is_empty() || t.contains("://") || t.starts_with("mailto:") {
                    continue;
                }
                let (file, frag) = match t.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (t.as_str(), None),
                };
                let target = if file.is_empty() {
                    root.join(&page)
                } else {
                    root.join(dir).join(file)
                };
                if !target.exists() {
                    out.push(format!("{page}:{n}: link to {t}: no such file or folder"));
                    continue;
                }
                if let Some(a) = frag
                    && target.extension().is_some_and(|e| e == "md")
                    && !anchors(&std::fs::read_to_string(&target).unwrap_or_default()).contains(a)
                {
                    out.push(format!("{page}:{n}: link to {t}: no heading #{a} there"));
                }
            }
        }
    }
    out
}

/// Rule 2: the README fits on a screen or two.
fn readme_size(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    let mut out = Vec::new();
    let lines = text.lines().count();
    if lines > README_MAX_LINES {
        out.push(format!(
            "README.md: {lines} lines (at most {README_MAX_LINES})"
        ));
    }
    if text.len() > README_MAX_BYTES {
        out.push(format!(
            "README.md: {} bytes (at most {README_MAX_BYTES})",
            text.len()
        ));
    }
    for (i, line) in text.lines().enumerate() {
        let n = line.chars().count();
        if n > README_MAX_LINE_CHARS {
            out.push(format!(
                "README.md:{}: {n} characters (at most {README_MAX_LINE_CHARS})",
                i + 1
            ));
        }
    }
    out
}

/// Rule 3: every docs page is in the README's table of contents and opens with its
/// question.
fn pages_reachable(root: &Path) -> Vec<String> {
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    let linked: BTreeSet<String> = prose_lines(&readme)
        .iter()
        .flat_map(|(_, l)| link_targets(l))
        .map(|t| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let mut out = Vec::new();
    for page in pages(root).into_iter().filter(|p| p.starts_with("docs/")) {
        if !linked.contains(&page) {
            out.push(format!("{page}: not linked from README.md"));
        }
        let text = std::fs::read_to_string(root.join(&page)).unwrap_or_default();
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        if !lines.next().is_some_and(|l| l.starts_with("# ")) {
            out.push(format!("{page}: does not start with a `# ` title"));
        }
        let first = lines.next().unwrap_or("").trim().trim_matches(['*', '_']);
        if !first.ends_with('?') {
            out.push(format!(
                "{page}: the line after the title is not the question the page answers: {first:?}"
            ));
        }
    }
    out
}

/// A block: a paragraph, a list item with its continuation lines, a table row or a
/// heading, as (first line number, text).
fn blocks(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (n, line) in prose_lines(text) {
        let t = line.trim_start();
        if t.is_empty() {
            open = false;
            continue;
        }
        let starts_new = t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with('|')
            || t.starts_with('#')
            || t.split_once(". ")
                .is_some_and(|(a, _)| !a.is_empty() && a.chars().all(|c| c.is_ascii_digit()));
        if open && !starts_new {
            let last = out.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(t);
        } else {
            out.push((n, t.to_string()));
        }
        open = !t.starts_with('|') && !t.starts_with('#');
    }
    out
}

/// Units after which a number reads as a measurement, even a whole one.
const UNITS: &[&str] = &[
    "%",
    "×",
    "t/s",
    "tok/s",
    "tokens/s",
    "GB/s",
    "GiB/s",
    "MB/s",
    "TB/s",
    "GFLOP/s",
    "TFLOP/s",
    "J/token",
    "tokens/Wh",
    "ms",
    "µs",
    "W",
    "min",
];

/// The figures in `s` that look like measurements: a decimal number that is neither
/// part of a name (`Qwen2.5`, `0.5B`) nor a version (`0.32.2`), or any number followed
/// by one of [`UNITS`] (`×` only without a space: `2 × layers` is a formula).
fn figures(s: &str) -> Vec<String> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if !c[i].is_ascii_digit() || (i > 0 && (c[i - 1].is_ascii_digit() || c[i - 1] == '.')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < c.len()
            && (c[i].is_ascii_digit()
                || c[i] == ',' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            i += 1;
        }
        let mut decimal = false;
        if i + 1 < c.len() && c[i] == '.' && c[i + 1].is_ascii_digit() {
            decimal = true;
            i += 1;
            while i < c.len() && c[i].is_ascii_digit() {
                i += 1;
            }
        }
        let num: String = c[start..i].iter().collect();
        let before = if start > 0 { Some(c[start - 1]) } else { None };
        let after = c.get(i).copied();
        let in_name = before.is_some_and(|b| {
            b.is_alphabetic()
                || b == '_'
                || b == '-' && start >= 2 && c[start - 2].is_alphanumeric()
        }) || after.is_some_and(|a| a.is_alphabetic() || a == '_');
        let version = after == Some('.') && c.get(i + 1).is_some_and(|d| d.is_ascii_digit());
        let rest: String = c[i..].iter().collect();
        let unit = UNITS.iter().copied().find(|&u| {
            // `×` must touch its number (`2 × layers` is a formula); the others may
            // follow a space, and must not run into a word (`5 minutes`).
            let text = if u == "×" {
                rest.as_str()
            } else {
                rest.trim_start_matches([' ', '\u{a0}'])
            };
            text.strip_prefix(u).is_some_and(|after| {
                u == "%" || u == "×" || !after.starts_with(char::is_alphanumeric)
            })
        });
        if version {
            while i < c.len() && (c[i].is_ascii_digit() || c[i] == '.') {
                i += 1;
            }
            continue;
        }
        let name_before = before.is_some_and(|b| b.is_alphabetic() || b == '_');
        if (decimal && !in_name) || (unit.is_some() && !name_before) {
            out.push(match unit {
                Some(u) => format!("{num} {u}"),
                None => num,
            });
        }
    }
    out
}

/// Whether `block` names an existing file or folder under `results/` of `root`.
fn names_results(root: &Path, block: &str) -> bool {
    let mut rest = block;
    while let Some(i) = rest.find("results/") {
        let path: String = rest[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || "_./-".contains(*c))
            .collect();
        let path = path.trim_end_matches('.');
        if path.len() > "results/".len() && root.join(path).exists() {
            return true;
        }
        rest = &rest[i + "results/".len()..];
    }
    false
}

/// Rule 4: every measurement-looking figure names its results file.
fn unsourced_figures(root: &Path, allowed: &[(&str, &str, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for page in pages(root) {
        let text = std::fs::read_to_string(root.join(&page)).unwrap_or_default();
        for (n, block) in blocks(&text) {
            let mut b = block.clone();
            for (p, frag, _) in allowed {
                if *p == page {
                    b = b.replace(frag, " ");
                }
            }
            let f = figures(&b);
            if !f.is_empty() && !names_results(root, &block) {
                out.push(format!(
                    "{page}:{n}: figures {f:?} on a line that names no results/ file: {}",
                    block.chars().take(120).collect::<String>()
                ));
            }
        }
    }
    out
}

fn check(root: &Path) -> Vec<String> {
    let mut out = broken_links(root);
    out.extend(readme_size(root));
    out.extend(pages_reachable(root));
    out.extend(unsourced_figures(root, ALLOWED));
    out
}

#[test]
fn readme_and_docs_hold_the_rules() {
    let v = check(&repo());
    assert!(v.is_empty(), "{} violation(s):\n{}", v.len(), v.join("\n"));
}

#[test]
fn every_allow_list_entry_is_used_and_has_a_reason() {
    let root = repo();
    for (page, frag, why) in ALLOWED {
        assert!(why.len() > 10, "{page}: {frag:?} needs a reason");
        let text = std::fs::read_to_string(root.join(page)).unwrap_or_default();
        let used = blocks(&text).iter().any(|(_, b)| b.contains(frag));
        assert!(
            used,
            "ALLOWED entry {page}: {frag:?} matches nothing: remove it"
        );
        assert!(
            !figures(frag).is_empty(),
            "ALLOWED entry {page}: {frag:?} holds no figure: remove it"
        );
    }
}

/// A scratch copy of a tiny repository: a README, two docs pages, one results file.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("memwall-docs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("docs")).unwrap();
        std::fs::create_dir_all(d.join("results/run")).unwrap();
        std::fs::write(d.join("results/run/bench.md"), "| pp512 | 177.5 |\n").unwrap();
        std::fs::write(
            d.join("README.md"),
            "# x\n\nSee [a](docs/a.md) and [b](docs/b.md#usage).\n",
        )
        .unwrap();
        std::fs::write(
            d.join("docs/a.md"),
            "# A\n\n**What is a?**\n\npp512 177.5 t/s (results/run/bench.md).\n",
        )
        .unwrap();
        std::fs::write(
            d.join("docs/b.md"),
            "# B\n\n*What is b?*\n\n## Usage\n\nRun it.\n",
        )
        .unwrap();
        Scratch(d)
    }
    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.0.join(rel), text).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_clean_scratch_repository_passes() {
    let s = Scratch::new("clean");
    assert_eq!(check(&s.0), Vec::<String>::new());
}

#[test]
fn planted_violations_are_caught() {
    // A broken link, a link to a missing heading, and a broken image.
    let s = Scratch::new("links");
    s.write(
        "docs/b.md",
        "# B\n\n*What is b?*\n\n## Usage\n\n[gone](missing.md), [c](a.md#nowhere), ![x](img/none.png)\n",
    );
    let v = broken_links(&s.0);
    assert_eq!(v.len(), 3, "{v:?}");
    assert!(v[0].contains("missing.md: no such file"), "{v:?}");
    assert!(v[1].contains("no heading #nowhere"), "{v:?}");
    assert!(v[2].contains("img/none.png"), "{v:?}");

    // A README line over 300 characters, and a README over the line and byte limits.
    let s = Scratch::new("long");
    let long = format!(
        "# x\n\n[a](docs/a.md) [b](docs/b.md) {}\n",
        "word ".repeat(70)
    );
    s.write("README.md", &long);
    let v = readme_size(&s.0);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("README.md:3: 3"), "{v:?}");
    s.write(
        "README.md",
        &format!("[a](docs/a.md) [b](docs/b.md)\n{}", "a line\n".repeat(2000)),
    );
    let v = readme_size(&s.0);
    assert!(v.iter().any(|e| e.contains("lines (at most 150)")), "{v:?}");
    assert!(
        v.iter().any(|e| e.contains("bytes (at most 12000)")),
        "{v:?}"
    );

    // A docs page the README does not link, and a page that opens without a question.
    let s = Scratch::new("pages");
    s.write("docs/c.md", "# C\n\nThis page has no question.\n");
    let v = pages_reachable(&s.0);
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].contains("docs/c.md: not linked from README.md"),
        "{v:?}"
    );
    assert!(
        v[1].contains("docs/c.md: the line after the title is not the question"),
        "{v:?}"
    );

    // Figures without their results file: a decimal rate, a whole percentage, a
    // ratio; a results file that does not exist does not count; a figure in a
    // table row is checked per row; the allow-list lets a named definition through.
    let s = Scratch::new("figures");
    s.write(
        "docs/a.md",
        "# A\n\n**What is a?**\n\n\
         tg128 36.2 t/s on this VM.\n\n\
         - decode reached 62 % of STREAM\n\
         - it ran 3× faster (results/run/nothere.md)\n\n\
         | arm | tok/s |\n| --- | --- |\n| Q4_0 | 30.80 |\n| Q8_0 | 25.42 (results/run/bench.md) |\n\n\
         Qwen2.5-Coder-0.5B with `-p 512 -n 128` at 4 threads, llama.cpp 0.1.160.\n\n\
         The check uses 95 % intervals.\n",
    );
    let v = unsourced_figures(&s.0, &[]);
    assert_eq!(v.len(), 5, "{v:#?}");
    assert!(
        v[0].contains("docs/a.md:5:") && v[0].contains("36.2"),
        "{v:?}"
    );
    assert!(
        v[1].contains("docs/a.md:7:") && v[1].contains("62 %"),
        "{v:?}"
    );
    assert!(
        v[2].contains("docs/a.md:8:") && v[2].contains("3 ×"),
        "{v:?}"
    );
    assert!(
        v[3].contains("docs/a.md:12:") && v[3].contains("30.80"),
        "{v:?}"
    );
    assert!(
        v[4].contains("docs/a.md:17:") && v[4].contains("95 %"),
        "{v:?}"
    );
    let allow = [("docs/a.md", "uses 95 % intervals", "a confidence level")];
    assert_eq!(unsourced_figures(&s.0, &allow).len(), 4);
}

/// Rule 5: `memwall --help` lists the commands; each command's help names its docs page.
#[test]
fn every_command_help_names_its_docs_page() {
    let bin = env!("CARGO_BIN_EXE_memwall");
    let run = |args: &[&str]| {
        let o = std::process::Command::new(bin)
            .args(args)
            .output()
            .expect("run memwall");
        assert!(
            o.status.success(),
            "memwall {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let top = run(&["--help"]);
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    assert!(
        commands.len() >= 20,
        "commands found in `memwall --help`: {commands:?}"
    );
    let mut missing = Vec::new();
    for c in &commands {
        let help = run(&[c, "--help"]);
        let first = help.lines().next().unwrap_or("");
        let page = first
            .split(|ch: char| ch.is_whitespace() || "(),;".contains(ch))
            .find(|w| w.starts_with("docs/") && w.ends_with(".md"));
        match page {
            Some(p) if repo().join(p).exists() => {}
            Some(p) => missing.push(format!("memwall {c}: names {p}, which does not exist")),
            None => missing.push(format!(
                "memwall {c}: the first help line names no docs page: {first:?}"
            )),
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
