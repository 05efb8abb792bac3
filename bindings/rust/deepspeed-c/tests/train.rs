//! Training through the safe API: the loss falls, and optimizer steps match
//! their formulas computed independently in float64.
mod common;
use common::*;
use deepspeed_c::{Engine, LogLevel, Model, Tensor};
use std::sync::{Arc, Mutex};

#[test]
fn host_driven_regression_loss_falls() {
    let mut e = Engine::new(
        r#"{"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,
            "optimizer": {"type": "AdamW", "params": {"lr": 0.05}}}"#,
    )
    .unwrap();
    e.add_param("w", &Tensor::new(&[0f32; OUT * IN], &[OUT as i64, IN as i64]).unwrap(), true).unwrap();
    e.init().unwrap();
    let mut rng = Rng(11);
    let mut losses = Vec::new();
    for _ in 0..160 {
        let (x, y) = batch(&mut rng);
        let w = e.param("w").unwrap().as_f32().unwrap().to_vec();
        let (loss, mut g) = mse_and_grad(&w, &x, &y);
        let m = e.loss_multiplier().unwrap();
        g.iter_mut().for_each(|v| *v *= m);
        e.accumulate_grad_predivided("w", &Tensor::new(&g, &[OUT as i64, IN as i64]).unwrap()).unwrap();
        e.backward().unwrap();
        e.step().unwrap();
        losses.push(loss);
    }
    let head: f32 = losses[..10].iter().sum::<f32>() / 10.0;
    let tail: f32 = losses[150..].iter().sum::<f32>() / 10.0;
    assert!(tail < 0.05 * head, "loss did not fall: first {} last {}", head, tail);
    assert_eq!(e.global_steps().unwrap(), 80);
    assert_eq!(e.micro_steps().unwrap(), 160);
    assert_eq!(e.global_samples().unwrap(), 160 * 8);
}

#[test]
fn sgd_step_matches_formula() {
    let mut e = Engine::new(
        r#"{"train_batch_size": 1, "gradient_clipping": 0,
            "optimizer": {"type": "SGD", "params": {"lr": 0.25, "momentum": 0.5}}}"#,
    )
    .unwrap();
    let w0 = [0.5f32, -1.25, 2.0];
    e.add_param("w", &Tensor::vector(&w0), true).unwrap();
    e.init().unwrap();
    let grads = [[0.1f32, -0.4, 0.3], [-0.2, 0.05, 0.7]];
    let mut w: Vec<f64> = w0.iter().map(|&v| v as f64).collect();
    let mut buf = [0f64; 3];
    for (k, g) in grads.iter().enumerate() {
        e.accumulate_grad("w", &Tensor::vector(g)).unwrap();
        e.backward().unwrap();
        let info = e.step().unwrap();
        assert!(info.stepped && !info.skipped);
        // torch.optim.SGD: buf = g (first step) or momentum*buf + g; w -= lr*buf.
        for i in 0..3 {
            buf[i] = if k == 0 { g[i] as f64 } else { 0.5 * buf[i] + g[i] as f64 };
            w[i] -= 0.25 * buf[i];
        }
        let got = e.param("w").unwrap().as_f32().unwrap().to_vec();
        for i in 0..3 {
            assert!((got[i] as f64 - w[i]).abs() < 1e-6, "step {} w[{}]: {} vs {}", k, i, got[i], w[i]);
        }
    }
    let mom = e.get_full_optimizer_state("w", "momentum_buffer").unwrap();
    for i in 0..3 {
        assert!((mom[i] as f64 - buf[i]).abs() < 1e-6);
    }
}

#[test]
fn adamw_with_accumulation_matches_formula() {
    let (lr, wd, b1, b2, eps) = (0.01f64, 0.1f64, 0.9f64, 0.999f64, 1e-8f64);
    let mut e = Engine::new(
        r#"{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2, "gradient_clipping": 0,
            "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}}}"#,
    )
    .unwrap();
    let w0 = [0.3f32, -0.7];
    e.add_param("w", &Tensor::vector(&w0), true).unwrap();
    e.init().unwrap();
    // Two optimizer steps, two micro-batches each.
    let micro = [[[0.2f32, -0.1], [0.4, 0.3]], [[-0.5, 0.2], [0.1, 0.6]]];
    let mut w: Vec<f64> = w0.iter().map(|&v| v as f64).collect();
    let (mut m, mut v) = (vec![0f64; 2], vec![0f64; 2]);
    for (k, window) in micro.iter().enumerate() {
        for g in window {
            e.accumulate_grad("w", &Tensor::vector(g)).unwrap(); // divided by the 2 steps
            e.backward().unwrap();
            e.step().unwrap();
        }
        let t = (k + 1) as i32;
        for i in 0..2 {
            let g = (window[0][i] as f64 + window[1][i] as f64) / 2.0;
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
            w[i] = w[i] * (1.0 - lr * wd) - lr * mh / (vh.sqrt() + eps);
        }
        let got = e.param("w").unwrap().as_f32().unwrap().to_vec();
        for i in 0..2 {
            assert!((got[i] as f64 - w[i]).abs() < 2e-7, "step {} w[{}]: {} vs {}", k, i, got[i], w[i]);
        }
    }
    assert_eq!(e.global_steps().unwrap(), 2);
}

#[test]
fn log_closure_receives_messages_and_panics_stay_inside() {
    let seen = Arc::new(Mutex::new(Vec::<(LogLevel, String)>::new()));
    let sink = seen.clone();
    let mut e = Engine::builder()
        .log_level(LogLevel::Info)
        .log(move |level, msg| {
            sink.lock().unwrap().push((level, msg.to_string()));
            panic!("a log closure that panics must not unwind into C");
        })
        .build(
            r#"{"train_batch_size": 1, "steps_per_print": 1,
                "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}"#,
        )
        .unwrap();
    e.add_param("w", &Tensor::vector(&[1.0f32]), true).unwrap();
    e.init().unwrap();
    e.accumulate_grad("w", &Tensor::vector(&[1.0f32])).unwrap();
    e.backward().unwrap();
    e.step().unwrap(); // steps_per_print: a progress line at info level
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty(), "no message reached the closure");
    assert!(seen.iter().all(|(l, _)| *l <= LogLevel::Info));
    assert!(seen.iter().any(|(_, m)| m.contains("step")), "{:?}", *seen);
}

#[test]
fn moe_experts_are_marked_expert() {
    let model = Model::new(
        r#"{"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16,
            "moe": {"num_experts": 2}}"#,
    )
    .unwrap();
    let e = Engine::with_model(
        r#"{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"#,
        &model,
    )
    .unwrap();
    let params = e.named_parameters().unwrap();
    for p in &params {
        assert_eq!(p.expert, p.name.contains(".deepspeed_experts."), "{}", p.name);
    }
    // 2 experts x (c_fc, c_proj) x (weight, bias)
    assert_eq!(params.iter().filter(|p| p.expert).count(), 8);
}

#[test]
fn builtin_model_trains_and_evaluates() {
    let model = Model::new(
        r#"{"type": "sequential", "seed": 3, "loss": "mse", "layers": [
            {"type": "linear", "in_features": 6, "out_features": 16}, {"type": "gelu"},
            {"type": "linear", "in_features": 16, "out_features": 3}]}"#,
    )
    .unwrap();
    assert_eq!(model.num_params().unwrap(), 6 * 16 + 16 + 16 * 3 + 3);
    let mut e = Engine::with_model(
        r#"{"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "Adam", "params": {"lr": 0.02}}}"#,
        &model,
    )
    .unwrap();
    drop(model); // the engine keeps it alive
    let names: Vec<String> = e.named_parameters().unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names.len(), 4, "{:?}", names);
    let mut rng = Rng(5);
    let mut losses = Vec::new();
    for _ in 0..150 {
        let (x, y) = batch(&mut rng);
        let loss = e
            .forward_loss(
                &Tensor::new(&x, &[BATCH as i64, IN as i64]).unwrap(),
                &Tensor::new(&y, &[BATCH as i64, OUT as i64]).unwrap(),
            )
            .unwrap();
        e.backward().unwrap();
        e.step().unwrap();
        losses.push(loss);
    }
    let head: f32 = losses[..10].iter().sum::<f32>() / 10.0;
    let tail: f32 = losses[140..].iter().sum::<f32>() / 10.0;
    assert!(tail < 0.3 * head, "loss did not fall: {} -> {}", head, tail);
    // eval: a forward keeps nothing for backward.
    e.eval(true).unwrap();
    let (x, y) = batch(&mut rng);
    let l = e.forward_loss(&Tensor::new(&x, &[8, 6]).unwrap(), &Tensor::new(&y, &[8, 3]).unwrap()).unwrap();
    assert!(l.is_finite());
    let err = e.backward().unwrap_err();
    assert_eq!(err.status, deepspeed_c::Status::InvalidState, "{}", err);
}

/// The README's ten lines, as written there; sum(w^2) falls under AdamW.
#[test]
fn readme_example() -> Result<(), deepspeed_c::Error> {
    let mut last = 0.0f32;
    let mut engine = Engine::new(r#"{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}"#)?;
    engine.add_param("w", &Tensor::new(&[0.5f32; 6], &[2, 3])?, true)?;
    engine.init()?;
    for _ in 0..100 {
        let w = engine.param("w")?.as_f32().unwrap().to_vec(); // forward with w ...
        let grad: Vec<f32> = w.iter().map(|v| 2.0 * v).collect(); // ... backward of sum(w^2)
        engine.accumulate_grad("w", &Tensor::new(&grad, &[2, 3])?)?;
        engine.backward()?;
        let info = engine.step()?; // clip, AdamW, LR schedule
        assert!(info.stepped);
        last = w.iter().map(|v| v * v).sum();
    }
    assert!(last < 6.0 * 0.25 * 0.9, "sum(w^2) did not fall: {}", last);
    Ok(())
}
