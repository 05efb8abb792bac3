//! Every public struct's size and field offsets in Rust (bindgen's layout)
//! against what the C compiler makes of the header: a C program generated
//! from the same field list prints sizeof/offsetof. Skipped, saying so on
//! stderr, where no `cc` exists.
use deepspeed_c_sys::*;
use std::path::PathBuf;
use std::process::Command;

/// ("T", size) and ("T.field", offset) for each field, from the Rust types.
macro_rules! layout {
    ($t:ident { $($f:ident),+ }) => {{
        let mut v = vec![(stringify!($t).to_string(), std::mem::size_of::<$t>())];
        $(
            let u = std::mem::MaybeUninit::<$t>::uninit();
            let base = u.as_ptr();
            let at = (unsafe { std::ptr::addr_of!((*base).$f) } as usize) - (base as usize);
            v.push((format!("{}.{}", stringify!($t), stringify!($f)), at));
        )+
        v
    }};
}

fn rust_layouts() -> Vec<(String, usize)> {
    let mut v = Vec::new();
    v.extend(layout!(ds_engine_options_t {
        struct_size,
        comm,
        device,
        cuda_stream,
        log_callback,
        log_user_data,
        log_level,
        reserved0
    }));
    v.extend(layout!(ds_param_info_t { struct_size, name, shape, ndim, flags, dtype, reserved0, numel }));
    v.extend(layout!(ds_step_info_t {
        struct_size,
        stepped,
        skipped,
        loss_scale,
        reserved0,
        grad_norm,
        lr,
        global_step
    }));
    v.extend(layout!(ds_comm_options_t { struct_size, timeout_ms, debug, backend, device }));
    v.extend(layout!(ds_memory_report_t {
        struct_size,
        params_bytes,
        grads_bytes,
        optimizer_state_bytes,
        buffers_bytes,
        total_bytes,
        peak_total_bytes
    }));
    v.extend(layout!(ds_pipe_info_t {
        struct_size,
        stage_id,
        num_stages,
        first_layer,
        last_layer,
        num_layers,
        micro_batches,
        data_parallel_size,
        reserved0,
        batch_seconds,
        compute_seconds,
        recompute_seconds
    }));
    v.extend(layout!(DLTensor { data, device, ndim, dtype, shape, strides, byte_offset }));
    v.extend(layout!(DLDevice { device_type, device_id }));
    v.extend(layout!(DLDataType { code, bits, lanes }));
    v
}

/// A C program printing "name value" for the same entries.
fn c_program(entries: &[(String, usize)]) -> String {
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"deepspeed_c.h\"\nint main(void) {\n");
    for (name, _) in entries {
        let expr = match name.split_once('.') {
            Some((t, f)) => format!("offsetof({}, {})", t, f),
            None => format!("sizeof({})", name),
        };
        c.push_str(&format!("    printf(\"{} %zu\\n\", (size_t){});\n", name, expr));
    }
    c.push_str("    return 0;\n}\n");
    c
}

#[test]
fn layouts_match_the_c_compiler() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    if Command::new(&cc).arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED layouts_match_the_c_compiler: no C compiler ({})", cc);
        return;
    }
    let entries = rust_layouts();
    let dir = std::env::temp_dir().join(format!("ds-rust-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, c_program(&entries)).unwrap();
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../include");
    let built =
        Command::new(&cc).arg("-std=c99").arg("-I").arg(&include).arg(&src).arg("-o").arg(&exe).output().unwrap();
    assert!(built.status.success(), "{} failed: {}", cc, String::from_utf8_lossy(&built.stderr));
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let c: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let (n, v) = l.split_once(' ').unwrap();
            (n.to_string(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(c.len(), entries.len());
    let wrong: Vec<String> = entries
        .iter()
        .zip(&c)
        .filter(|(r, c)| r != c)
        .map(|(r, c)| format!("{}: Rust {}, C {}", r.0, r.1, c.1))
        .collect();
    assert!(wrong.is_empty(), "layouts differ: {}", wrong.join("; "));
    let _ = std::fs::remove_dir_all(&dir);
}
