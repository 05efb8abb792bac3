//! Adds an rpath to the directory deepspeed-c-sys found libdeepspeed_c in, so
//! the tests and examples of this crate run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_DEEPSPEED_C_LIB_DIR");
    if let Some(dir) = std::env::var_os("DEP_DEEPSPEED_C_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.to_string_lossy());
    }
}
