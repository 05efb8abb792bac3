//! bench_step.rs: the per-call overhead of the safe API, in one run.
//!
//! Times, on a tiny engine (one fp32 parameter of 1 element, SGD), per iteration:
//!   noop   ds_version() through -sys (a no-op C call: the floor of any FFI call);
//!   raw    ds_backward + ds_step through -sys with a reused ds_step_info_t
//!          (exactly what a C program does);
//!   safe   Engine::backward() + Engine::step() -> Result<StepInfo>.
//! safe - raw is what the Rust layer adds per step.
//!
//!   cargo run --release --example bench_step [-- ITERATIONS]
use deepspeed_c::{sys, Engine, Tensor};
use std::time::Instant;

fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let isa: Vec<&str> = ["avx512f", "avx512_bf16", "avx2", "fma"]
        .iter()
        .copied()
        .filter(|f| flags.split_whitespace().any(|x| x == *f))
        .collect();
    format!("{} [{}]", model, isa.join(" "))
}

fn engine() -> Engine {
    let mut e = Engine::new(r#"{"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.0}}}"#).unwrap();
    e.add_param("w", &Tensor::vector(&[1.0f32]), true).unwrap();
    e.init().unwrap();
    e
}

/// Best of 5 repetitions of `n` iterations, in ns per iteration.
fn best(n: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    println!("cpu: {}", cpu());
    println!("library: {}", deepspeed_c::build_info());
    let mut sink = 0u32;
    let noop = best(n, || unsafe {
        // volatile: the call's result is used, so the loop is not optimised away
        std::ptr::write_volatile(&mut sink, sys::ds_version());
    });
    let ptr = raw_handle();
    let mut info: sys::ds_step_info_t = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<sys::ds_step_info_t>();
    let raw = best(n, || unsafe {
        assert_eq!(sys::ds_backward(ptr, std::ptr::null()), sys::DS_OK);
        assert_eq!(sys::ds_step(ptr, &mut info), sys::DS_OK);
    });
    let mut safe_engine = engine();
    let safe = best(n, || {
        safe_engine.backward().unwrap();
        let info = safe_engine.step().unwrap();
        unsafe { std::ptr::write_volatile(&mut sink, info.global_step as u32) };
    });
    println!("iterations: {} (best of 5)", n);
    println!("noop  ds_version via -sys             {:8.1} ns", noop);
    println!("raw   ds_backward + ds_step via -sys  {:8.1} ns", raw);
    println!("safe  Engine::backward + step         {:8.1} ns", safe);
    println!("safe - raw (the Rust layer, per step) {:8.1} ns", safe - raw);
    unsafe { sys::ds_engine_destroy(ptr) };
}

/// A raw engine handle made the way a C program makes it (bench only).
fn raw_handle() -> *mut sys::ds_engine_t {
    let cfg = std::ffi::CString::new(r#"{"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.0}}}"#)
        .unwrap();
    let mut e = std::ptr::null_mut();
    unsafe {
        assert_eq!(sys::ds_engine_create(cfg.as_ptr(), std::ptr::null(), &mut e), sys::DS_OK);
        let shape = [1i64];
        let mut w = [1.0f32];
        let t = sys::DLTensor {
            data: w.as_mut_ptr() as *mut _,
            device: sys::DLDevice { device_type: sys::DLDeviceType_kDLCPU, device_id: 0 },
            ndim: 1,
            dtype: sys::DLDataType { code: sys::DLDataTypeCode_kDLFloat as u8, bits: 32, lanes: 1 },
            shape: shape.as_ptr() as *mut i64,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let name = std::ffi::CString::new("w").unwrap();
        assert_eq!(sys::ds_engine_add_param(e, name.as_ptr(), &t, sys::DS_PARAM_TRAINABLE), sys::DS_OK);
        assert_eq!(sys::ds_engine_init(e), sys::DS_OK);
    }
    e
}
