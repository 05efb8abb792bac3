//! The bindings cannot drift from include/deepspeed_c.h (the umbrella header
//! and the sub-headers of include/deepspeed_c/ it includes, read as one text).
//!
//! Two checks, each with a test of the checker itself (a temporary copy of
//! the header with a declaration removed or a signature changed must fail):
//!  * regenerate: run regen.sh (the same bindgen flags that made
//!    src/bindings.rs) into a temporary file and require the same tokens as
//!    the committed file (whitespace is rustfmt's business, not the header's). Needs Debian's `bindgen`; without it these tests say
//!    "SKIPPED" on stderr and pass.
//!  * declarations: every `DS_API ... ds_x(...)` of the header has a
//!    `pub fn ds_x` in src/bindings.rs with the same number of parameters, and
//!    no binding lacks its declaration. Needs nothing but the files.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn header_path() -> PathBuf {
    crate_dir().join("../../../include/deepspeed_c.h")
}

/// The sub-headers the umbrella header includes (`#include "deepspeed_c/x.h"`,
/// one per concept), as paths relative to its directory, in its order.
fn sub_headers(umbrella: &str) -> Vec<String> {
    umbrella
        .lines()
        .filter_map(|l| l.strip_prefix("#include \"deepspeed_c/"))
        .filter_map(|l| l.strip_suffix(".h\""))
        .map(|name| format!("deepspeed_c/{}.h", name))
        .collect()
}

/// The whole header's text: the umbrella `path` followed by its sub-headers.
fn header_text(path: &Path) -> String {
    let umbrella = fs::read_to_string(path).expect("header");
    let dir = path.parent().expect("header directory");
    let mut text = umbrella.clone();
    for sub in sub_headers(&umbrella) {
        text.push_str(&fs::read_to_string(dir.join(&sub)).expect("sub-header"));
    }
    text
}

fn committed_bindings() -> String {
    fs::read_to_string(crate_dir().join("src/bindings.rs")).expect("src/bindings.rs")
}

/// Say that (part of) a test was skipped, on the real stderr: libtest hides
/// what eprintln! prints in a passing test.
fn skipped(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {}: bindgen not found (apt-get install bindgen)", what);
}

fn bindgen_available() -> bool {
    Command::new("bindgen").arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

/// A fresh temporary directory for one test.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ds-rust-header-sync-{}-{}", tag, std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Run regen.sh on `header`; the generated text.
fn regenerate(header: &Path, tag: &str) -> String {
    let out = temp_dir(&format!("{}-out", tag)).join("bindings.rs");
    let status = Command::new(crate_dir().join("regen.sh")).arg(header).arg(&out).status().expect("run regen.sh");
    assert!(status.success(), "regen.sh {} failed: {}", header.display(), status);
    fs::read_to_string(&out).expect("regenerated bindings")
}

/// `text` without whitespace and trailing commas: bindgen formats its output
/// with whatever rustfmt (and rustfmt.toml) it finds, or not at all, so only
/// the tokens count.
fn tokens_only(text: &str) -> String {
    let packed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    packed.replace(",)", ")").replace(",}", "}").replace(",]", "]").replace(",>", ">")
}

/// The regeneration check: Ok, or the first difference with some context.
fn check_regenerated(generated: &str, committed: &str) -> Result<(), String> {
    let (g, c) = (tokens_only(generated), tokens_only(committed));
    if g == c {
        return Ok(());
    }
    let at = g.chars().zip(c.chars()).take_while(|(a, b)| a == b).count();
    let context = |s: &str| -> String { s.chars().skip(at.saturating_sub(40)).take(100).collect() };
    Err(format!(
        "src/bindings.rs differs from regen.sh's output (whitespace and trailing commas ignored) at character {}: committed ...{}..., \
         the header gives ...{}... (run bindings/rust/deepspeed-c-sys/regen.sh and commit)",
        at,
        context(&c),
        context(&g)
    ))
}

/// `ds_name` -> number of parameters, from the header's DS_API declarations.
fn header_functions(header: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut rest = header;
    while let Some(at) = rest.find("DS_API ") {
        rest = &rest[at + 7..];
        let decl = match rest.find(';') {
            Some(end) => &rest[..end],
            None => break,
        };
        // The function name is the identifier right before the first '('.
        let open = match decl.find('(') {
            Some(o) => o,
            None => continue, // the #define DS_API lines
        };
        let name: String = decl[..open]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.starts_with("ds_") {
            continue;
        }
        let args = decl[open + 1..decl.rfind(')').unwrap_or(decl.len())].trim();
        out.insert(name, count_args(args, "void"));
    }
    out
}

/// `ds_name` -> number of parameters, from bindgen's `pub fn` items.
fn bound_functions(bindings: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut rest = bindings;
    while let Some(at) = rest.find("pub fn ") {
        rest = &rest[at + 7..];
        let open = rest.find('(').expect("pub fn without (");
        let name = rest[..open].trim().to_string();
        // Arguments end at the matching ')': bindgen puts no parentheses inside them.
        let close = rest[open..].find(')').expect("pub fn without )") + open;
        out.insert(name, count_args(rest[open + 1..close].trim(), ""));
    }
    out
}

fn count_args(args: &str, empty_word: &str) -> usize {
    let args = args.trim().trim_end_matches(',');
    if args.is_empty() || args == empty_word {
        0
    } else {
        args.split(',').filter(|a| !a.trim().is_empty()).count()
    }
}

/// The declaration check: Ok, or every difference named.
fn check_declarations(header: &str, bindings: &str) -> Result<(), String> {
    let (h, b) = (header_functions(header), bound_functions(bindings));
    let mut problems = Vec::new();
    for (name, n) in &h {
        match b.get(name) {
            None => problems.push(format!("{} is declared in the header but not bound", name)),
            Some(m) if m != n => problems.push(format!("{}: {} parameters in the header, {} bound", name, n, m)),
            _ => {}
        }
    }
    for name in b.keys().filter(|k| !h.contains_key(*k)) {
        problems.push(format!("{} is bound but no longer declared in the header", name));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// A temporary copy of the header (the umbrella and its sub-headers) with
/// `edit` applied to each file (it must change exactly one); the copy's
/// umbrella path and its whole text.
fn edited_header(tag: &str, edit: impl Fn(&str) -> String) -> (PathBuf, String) {
    let dir = temp_dir(tag);
    let src = header_path();
    let umbrella = fs::read_to_string(&src).expect("header");
    let mut files = vec!["deepspeed_c.h".to_string()];
    files.extend(sub_headers(&umbrella));
    let mut changed = 0;
    for rel in &files {
        let original = fs::read_to_string(src.parent().expect("header directory").join(rel)).expect("header file");
        let text = edit(&original);
        if text != original {
            changed += 1;
        }
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("temp sub-directory");
        fs::write(&path, &text).expect("write header copy");
    }
    assert_eq!(changed, 1, "the edit must change exactly one header file");
    let path = dir.join("deepspeed_c.h");
    let text = header_text(&path);
    (path, text)
}

const EVAL_DECL: &str = "DS_API ds_status_t ds_engine_eval(ds_engine_t* engine, int32_t on);";

fn without_eval(h: &str) -> String {
    h.replace(EVAL_DECL, "")
}

fn eval_with_extra_arg(h: &str) -> String {
    h.replace(EVAL_DECL, "DS_API ds_status_t ds_engine_eval(ds_engine_t* engine, int32_t on, int32_t mode);")
}

fn eval_with_other_type(h: &str) -> String {
    h.replace(EVAL_DECL, "DS_API ds_status_t ds_engine_eval(ds_engine_t* engine, int64_t on);")
}

#[test]
fn committed_bindings_match_regenerated() {
    if !bindgen_available() {
        skipped("committed_bindings_match_regenerated");
        return;
    }
    let generated = regenerate(&header_path(), "current");
    check_regenerated(&generated, &committed_bindings()).unwrap();
}

#[test]
fn every_header_function_is_bound() {
    let header = header_text(&header_path());
    let found = header_functions(&header);
    assert!(found.len() >= 60, "parsed only {} declarations from the header", found.len());
    assert_eq!(found.get("ds_engine_eval"), Some(&2));
    assert_eq!(found.get("ds_last_error"), Some(&0));
    check_declarations(&header, &committed_bindings()).unwrap();
}

#[test]
fn checker_fails_when_a_declaration_is_removed() {
    let (path, text) = edited_header("removed", without_eval);
    let err = check_declarations(&text, &committed_bindings()).unwrap_err();
    assert!(err.contains("ds_engine_eval is bound but no longer declared"), "{}", err);
    if !bindgen_available() {
        skipped("the regeneration half of checker_fails_when_a_declaration_is_removed");
        return;
    }
    let err = check_regenerated(&regenerate(&path, "removed"), &committed_bindings()).unwrap_err();
    assert!(err.contains("differs"), "{}", err);
}

#[test]
fn checker_fails_when_a_signature_changes() {
    // One more parameter: both checks see it.
    let (path, text) = edited_header("arity", eval_with_extra_arg);
    let err = check_declarations(&text, &committed_bindings()).unwrap_err();
    assert!(err.contains("ds_engine_eval: 3 parameters in the header, 2 bound"), "{}", err);
    if !bindgen_available() {
        skipped("the regeneration half of checker_fails_when_a_signature_changes");
        return;
    }
    check_regenerated(&regenerate(&path, "arity"), &committed_bindings()).unwrap_err();
    // A changed parameter type: the regeneration check sees it.
    let (path, _) = edited_header("type", eval_with_other_type);
    let err = check_regenerated(&regenerate(&path, "type"), &committed_bindings()).unwrap_err();
    assert!(err.contains("i64"), "{}", err);
}
