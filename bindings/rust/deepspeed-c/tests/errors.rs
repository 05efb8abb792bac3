//! Bad input gives an Err with the status and a message naming what was
//! wrong, and the engine stays usable; checkpoints round-trip client state.
use deepspeed_c::{DType, Device, Engine, Status, Tensor};
use std::path::PathBuf;

const CONFIG: &str = r#"{"train_batch_size": 1, "gradient_clipping": 0,
    "optimizer": {"type": "SGD", "params": {"lr": 0.5}}}"#;

fn engine() -> Engine {
    let mut e = Engine::new(CONFIG).unwrap();
    e.add_param("w", &Tensor::new(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap(), true).unwrap();
    e.add_param("frozen", &Tensor::vector(&[5.0f32]), false).unwrap();
    e.init().unwrap();
    e
}

fn one_step(e: &mut Engine, g: [f32; 4]) {
    e.accumulate_grad("w", &Tensor::new(&g, &[2, 2]).unwrap()).unwrap();
    e.backward().unwrap();
    e.step().unwrap();
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ds-rust-{}-{}", tag, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn bad_config_key_is_named() {
    let err = Engine::new(r#"{"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lrr": 0.1}}}"#)
        .err()
        .expect("a misspelt key must fail");
    assert_eq!(err.status, Status::InvalidConfig);
    assert!(err.message.contains("optimizer.params.lrr"), "{}", err.message);
    let err = Engine::new("{ not json").err().unwrap();
    assert_eq!(err.status, Status::InvalidConfig);
    let err = Engine::from_file("/nonexistent/ds_config.json").err().unwrap();
    assert_eq!(err.status, Status::Io);
    assert!(err.message.contains("/nonexistent/ds_config.json"), "{}", err.message);
}

#[test]
fn bad_calls_fail_and_the_engine_stays_usable() {
    let mut e = engine();
    let err = e.param("nope").err().unwrap();
    assert_eq!(err.status, Status::NotFound);
    assert!(err.message.contains("nope"), "{}", err.message);
    let err = e.accumulate_grad("w", &Tensor::vector(&[1.0f32, 2.0])).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{}", err);
    let err = e.accumulate_grad("frozen", &Tensor::vector(&[1.0f32])).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{}", err);
    assert!(err.message.contains("frozen"), "{}", err.message);
    let err = e.step().unwrap_err(); // no backward since the last step
    assert_eq!(err.status, Status::InvalidState, "{}", err);
    let err = e.add_param("late", &Tensor::vector(&[1.0f32]), true).unwrap_err();
    assert_eq!(err.status, Status::InvalidState, "{}", err);
    let err = e.param("nul\0name").err().unwrap();
    assert_eq!(err.status, Status::InvalidArgument);
    let err = e.set_lr(-1.0).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    // Still usable: one correct step does exactly SGD.
    one_step(&mut e, [1.0, 1.0, -1.0, 0.0]);
    assert_eq!(e.param("w").unwrap().as_f32().unwrap(), &[0.5, 1.5, 3.5, 4.0]);
    assert_eq!(e.global_steps().unwrap(), 1);
}

#[test]
fn a_cpu_engine_has_no_stream() {
    let mut e = engine();
    for stream in [std::ptr::null_mut(), 0x1234 as *mut std::os::raw::c_void] {
        // Safety: the library refuses before it could use the stream.
        let err = unsafe { e.set_stream(stream) }.unwrap_err();
        assert_eq!(err.status, Status::InvalidState, "{}", err);
        assert!(err.message.contains("trains on the CPU"), "{}", err.message);
    }
    one_step(&mut e, [1.0, 1.0, -1.0, 0.0]); // still usable
    assert_eq!(e.global_steps().unwrap(), 1);
}

#[test]
fn a_gpu_engine_needs_cuda_and_a_gpu() {
    let offload = r#"{"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": 0.5}},
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}"#;
    match Engine::builder().device(Device::Cuda(0)).build(offload) {
        // A CUDA build on a machine with a GPU: the views live in its memory.
        Ok(mut e) => {
            e.add_param("w", &Tensor::vector(&[1.0f32, 2.0]), true).unwrap();
            e.init().unwrap();
            let w = e.param("w").unwrap();
            assert_eq!(w.device(), Some(Device::Cuda(0)));
            assert!(w.as_f32().is_none());
            assert!(w.to_f32().unwrap_err().message.contains("cuda:0"));
        }
        // No CUDA in this build (Unsupported) or no GPU 0 (Device), said in the message.
        Err(err) => {
            assert!(matches!(err.status, Status::Unsupported | Status::Device), "{}", err);
            assert!(!err.message.is_empty());
        }
    }
}

#[test]
fn a_stream_needs_a_gpu_engine() {
    // Safety: the library refuses the options before it could use the stream.
    let b = unsafe { Engine::builder().cuda_stream(0x1 as *mut std::os::raw::c_void) };
    let err = b.build(CONFIG).err().expect("a stream with the CPU device must fail");
    assert_eq!(err.status, Status::InvalidArgument, "{}", err);
    assert!(err.message.contains("options.cuda_stream"), "{}", err.message);
    // The explicit CPU device is the default: an ordinary engine.
    let mut e = Engine::builder().device(Device::Cpu).build(CONFIG).unwrap();
    e.add_param("w", &Tensor::vector(&[1.0f32]), true).unwrap();
    e.init().unwrap();
    assert_eq!(e.param("w").unwrap().device(), Some(Device::Cpu));
}

#[test]
fn a_device_gradient_reaches_the_library_as_such() {
    let mut e = engine();
    let host = [1.0f32; 4];
    // Safety: the CPU engine refuses a cuda:0 tensor before it could read it.
    let g = unsafe { Tensor::from_raw_parts(host.as_ptr() as *const _, &[2, 2], DType::F32, Device::Cuda(0)) }.unwrap();
    assert_eq!(g.device(), Device::Cuda(0));
    let err = e.accumulate_grad("w", &g).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{}", err);
    assert!(err.message.contains("cuda:0"), "{}", err.message);
    assert_eq!(e.grad("w").unwrap().as_f32().unwrap(), &[0.0; 4]);
    let bad = unsafe { Tensor::from_raw_parts(host.as_ptr() as *const _, &[-1], DType::F32, Device::Cpu) };
    assert_eq!(bad.unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn introspection() {
    let e = engine();
    let params = e.named_parameters().unwrap();
    assert_eq!(params.len(), 2);
    assert_eq!(params[0].name, "w");
    assert_eq!(params[0].shape, vec![2, 2]);
    assert_eq!(params[0].numel, 4);
    assert!(params[0].trainable && !params[1].trainable);
    assert_eq!(e.rank().unwrap(), 0);
    assert_eq!(e.world_size().unwrap(), 1);
    assert_eq!(e.loss_scale().unwrap(), 1.0);
    assert!((e.lr().unwrap() - 0.5).abs() < 1e-12);
    assert!(e.is_gradient_accumulation_boundary().unwrap());
    assert!(e.config_json().unwrap().contains("\"train_batch_size\""));
    let mem = e.memory_report().unwrap();
    assert_eq!(mem.total_bytes, mem.params_bytes + mem.grads_bytes + mem.optimizer_state_bytes + mem.buffers_bytes);
    // Nothing on disk without offload_optimizer.device "nvme".
    let disk = e.disk_report().unwrap();
    assert_eq!((disk.params_bytes, disk.optimizer_state_bytes, disk.total_bytes), (0, 0, 0));
    // A view taken before a step aliases the same storage after it (ZeRO 0-2).
    let before = e.param("w").unwrap().as_ptr();
    let mut e = e;
    one_step(&mut e, [0.0; 4]);
    assert_eq!(e.param("w").unwrap().as_ptr(), before);
}

#[test]
fn checkpoint_round_trip_with_client_state() {
    let dir = temp_dir("ckpt");
    let mut e = engine();
    one_step(&mut e, [1.0, 0.0, 0.0, 0.0]);
    e.save_checkpoint(&dir, Some("t1"), Some(r#"{"epoch": 3, "note": "rust"}"#)).unwrap();
    let saved = e.param("w").unwrap().as_f32().unwrap().to_vec();
    one_step(&mut e, [1.0, 1.0, 1.0, 1.0]);
    assert_ne!(e.param("w").unwrap().as_f32().unwrap(), &saved[..]);
    let client = e.load_checkpoint(&dir, None, 0).unwrap();
    assert!(client.contains("\"epoch\"") && client.contains("rust"), "{}", client);
    assert_eq!(e.param("w").unwrap().as_f32().unwrap(), &saved[..]);
    assert_eq!(e.global_steps().unwrap(), 1);
    // A missing checkpoint: NotFound naming it, and nothing changed.
    let missing = dir.join("absent");
    let err = e.load_checkpoint(&missing, None, 0).unwrap_err();
    assert_eq!(err.status, Status::NotFound, "{}", err);
    assert!(err.message.contains("absent"), "{}", err.message);
    assert_eq!(e.param("w").unwrap().as_f32().unwrap(), &saved[..]);
    // Client state that is not JSON is refused.
    let err = e.save_checkpoint(&dir, Some("t2"), Some("{oops")).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{}", err);
    e.save_16bit_model(&dir, None, true).unwrap();
    assert!(dir.join("model.safetensors").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn full_fp32_accessors() {
    let mut e = engine();
    assert_eq!(e.get_full_fp32_param("w").unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    e.set_full_fp32_param("w", &[4.0, 3.0, 2.0, 1.0]).unwrap();
    assert_eq!(e.param("w").unwrap().as_f32().unwrap(), &[4.0, 3.0, 2.0, 1.0]);
    let err = e.set_full_fp32_param("w", &[1.0]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    e.accumulate_grad("w", &Tensor::new(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap()).unwrap();
    assert_eq!(e.get_full_grad("w").unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(e.grad("w").unwrap().as_f32().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    {
        let mut g = e.grad_mut("w").unwrap();
        g.as_f32_mut().unwrap()[0] += 10.0;
    }
    assert_eq!(e.get_full_grad("w").unwrap()[0], 11.0);
    let err = e.get_full_optimizer_state("w", "exp_avg").unwrap_err();
    assert_eq!(err.status, Status::NotFound, "{}", err);
}

#[test]
fn zero3_gather_release_in_a_world_of_one() {
    // In a world of one the weights are always whole: gather/release check the names.
    let mut e = Engine::new(
        r#"{"train_batch_size": 1, "gradient_clipping": 0, "zero_optimization": {"stage": 3}, "zero_allow_untested_optimizer": true,
            "optimizer": {"type": "SGD", "params": {"lr": 0.5}}}"#,
    )
    .unwrap();
    e.add_param("w", &Tensor::new(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap(), true).unwrap();
    e.init().unwrap();
    e.gather(&["w"]).unwrap();
    assert_eq!(e.param("w").unwrap().as_f32().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    e.release(&["w"]).unwrap();
    let err = e.gather(&["nope"]).unwrap_err();
    assert_eq!(err.status, Status::NotFound, "{}", err);
    one_step(&mut e, [1.0, 0.0, 0.0, 0.0]);
    assert_eq!(e.get_full_fp32_param("w").unwrap(), vec![0.5, 2.0, 3.0, 4.0]);
}

#[test]
fn bf16_views_widen_to_the_rounded_master() {
    let mut e = Engine::new(
        r#"{"train_batch_size": 1, "bf16": {"enabled": true},
            "optimizer": {"type": "SGD", "params": {"lr": 0.5}}}"#,
    )
    .unwrap();
    // 1 + 2^-10 is not a bf16 value: the working copy rounds it to 1.0.
    e.add_param("w", &Tensor::vector(&[1.0f32 + 1.0 / 1024.0, -3.0]), true).unwrap();
    e.init().unwrap();
    let v = e.param("w").unwrap();
    assert_eq!(v.dtype(), Some(deepspeed_c::DType::BF16));
    assert!(v.as_f32().is_none());
    assert_eq!(v.as_bits().unwrap(), &[0x3F80, 0xC040]);
    assert_eq!(v.to_f32().unwrap(), vec![1.0, -3.0]);
}
