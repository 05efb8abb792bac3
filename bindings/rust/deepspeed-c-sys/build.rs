//! Finds libdeepspeed_c and tells cargo how to link it.
//!
//! Order: `DEEPSPEED_C_LIB_DIR` (a directory holding libdeepspeed_c.so), then
//! the `pkg-config` program (`pkg-config --libs-only-L deepspeed_c`, an
//! installed copy), then the repository's own build directory (`build/` at
//! the repository root, as `cmake -S . -B build` makes it).
//!
//! The directory found is handed to dependents as `DEP_DEEPSPEED_C_LIB_DIR`
//! (cargo's `links` metadata), so their build scripts can add an rpath, and
//! the library is symlinked into OUT_DIR: cargo puts search paths inside the
//! target directory on the loader path when it runs tests and doc tests, so
//! `cargo test` needs no LD_LIBRARY_PATH.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIB: &str = "libdeepspeed_c.so";

fn from_env() -> Option<PathBuf> {
    env::var_os("DEEPSPEED_C_LIB_DIR").map(PathBuf::from)
}

fn from_pkg_config() -> Option<PathBuf> {
    let out = Command::new("pkg-config").args(["--libs-only-L", "deepspeed_c"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix("-L"))
        .map(PathBuf::from)
        .find(|d| d.join(LIB).exists())
        .map(|d| d.canonicalize().unwrap_or(d))
}

fn from_repository() -> Option<PathBuf> {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let dir = manifest.join("../../../build");
    if dir.join(LIB).exists() {
        Some(dir.canonicalize().unwrap_or(dir))
    } else {
        None
    }
}

/// Symlink every libdeepspeed_c.so* of `dir` into `out` (replacing old links).
fn link_into(dir: &Path, out: &Path) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => return,
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(LIB) {
            let dst = out.join(&name);
            let _ = std::fs::remove_file(&dst);
            let _ = std::os::unix::fs::symlink(entry.path(), &dst);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=DEEPSPEED_C_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = from_env().or_else(from_pkg_config).or_else(from_repository);
    let dir = match dir {
        Some(d) => d,
        None => panic!(
            "deepspeed-c-sys: {} not found: set DEEPSPEED_C_LIB_DIR to the directory holding it, \
             make `pkg-config --libs deepspeed_c` work (PKG_CONFIG_PATH), or build the repository \
             (cmake -S . -B build && cmake --build build --target deepspeed_c)",
            LIB
        ),
    };
    if !dir.join(LIB).exists() {
        panic!("deepspeed-c-sys: DEEPSPEED_C_LIB_DIR={} holds no {}", dir.display(), LIB);
    }
    println!("cargo:rerun-if-changed={}", dir.join(LIB).display());
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    link_into(&dir, &out);
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=dylib=deepspeed_c");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // Read by dependents' build scripts as DEP_DEEPSPEED_C_LIB_DIR.
    println!("cargo:lib_dir={}", dir.display());
}
