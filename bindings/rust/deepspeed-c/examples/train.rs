//! train.rs: the MLP task of examples/train_mlp.c through the safe Rust API.
//!
//! The program owns forward and backward (plain loops); the engine owns the
//! precision, loss scaling, accumulation, clipping, AdamW and the LR schedule.
//! Task: regress a fixed random "teacher" MLP (64-128-16, tanh). Exits 1 if
//! the mean loss of the last tenth of the run is not at least 10% below the
//! first tenth's.
//!
//!   cargo run --release --example train -- [--dtype fp32|fp16|bf16] [--zero 0|1|2] [--steps N]
//!   tools/ds-run -n 2 bindings/rust/target/release/examples/train --zero 2
use deepspeed_c::{Comm, Engine, Tensor};

const IN: usize = 64;
const HID: usize = 128;
const OUT: usize = 16;
const MICRO: usize = 32;

struct Rng(u64);
impl Rng {
    /// xorshift64* uniform in [-1, 1)
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(2685821657736338717) >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    }
}

/// C[m x n] = A[m x k] B[n x k]^T (row-major).
fn gemm_bt(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[j * k + p]).sum();
        }
    }
}

struct Mlp {
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

impl Mlp {
    /// y = tanh(x W1^T + b1) W2^T + b2; returns (h, y).
    fn forward(&self, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (mut h, mut y) = (vec![0f32; MICRO * HID], vec![0f32; MICRO * OUT]);
        gemm_bt(MICRO, HID, IN, x, &self.w1, &mut h);
        for (i, v) in h.iter_mut().enumerate() {
            *v = (*v + self.b1[i % HID]).tanh();
        }
        gemm_bt(MICRO, OUT, HID, &h, &self.w2, &mut y);
        for (i, v) in y.iter_mut().enumerate() {
            *v += self.b2[i % OUT];
        }
        (h, y)
    }
}

const NAMES: [&str; 4] = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
const SHAPES: [&[i64]; 4] = [&[HID as i64, IN as i64], &[HID as i64], &[OUT as i64, HID as i64], &[OUT as i64]];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut dtype, mut zero, mut steps) = ("fp32".to_string(), 0, 300usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--dtype" if ["fp32", "fp16", "bf16"].contains(&val.as_str()) => dtype = val,
            "--zero" if ["0", "1", "2"].contains(&val.as_str()) => zero = val.parse()?,
            "--steps" if val.parse::<usize>().is_ok() => steps = val.parse()?,
            _ => {
                eprintln!("usage: train [--dtype fp32|fp16|bf16] [--zero 0|1|2] [--steps N]");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    let config = format!(
        r#"{{"train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
            "optimizer": {{"type": "AdamW", "params": {{"lr": 0.003, "weight_decay": 0.01}}}},
            "scheduler": {{"type": "WarmupLR", "params": {{"warmup_num_steps": 20, "warmup_type": "linear"}}}},
            "fp16": {{"enabled": {}, "initial_scale_power": 12}}, "bf16": {{"enabled": {}}},
            "zero_optimization": {{"stage": {}}}}}"#,
        dtype == "fp16",
        dtype == "bf16",
        zero
    );
    let comm = Comm::world()?;
    let mut engine = Engine::builder().comm(&comm).build(&config)?;
    let rank = engine.rank()?;
    if rank == 0 {
        println!(
            "deepspeed_c {} (Rust), {} training, {} rank(s)",
            deepspeed_c::version_string(),
            dtype,
            engine.world_size()?
        );
    }
    // Same teacher and initial weights on every rank; data per rank.
    let mut init = Rng(0x9E3779B97F4A7C15);
    let mut student = Mlp { w1: vec![], b1: vec![0.0; HID], w2: vec![], b2: vec![0.0; OUT] };
    let mut teacher = Mlp { w1: vec![], b1: vec![], w2: vec![], b2: vec![] };
    for _ in 0..HID * IN {
        student.w1.push(init.uniform() / (IN as f32).sqrt());
        teacher.w1.push(2.0 * init.uniform() / (IN as f32).sqrt());
    }
    for _ in 0..OUT * HID {
        student.w2.push(init.uniform() / (HID as f32).sqrt());
        teacher.w2.push(2.0 * init.uniform() / (HID as f32).sqrt());
    }
    teacher.b1 = (0..HID).map(|_| 0.1 * init.uniform()).collect();
    teacher.b2 = (0..OUT).map(|_| 0.1 * init.uniform()).collect();
    let mut data = Rng(0xD1B54A32D192ED03 ^ ((rank as u64 + 1).wrapping_mul(0x9E3779B97F4A7C15)) | 1);
    for (k, name) in NAMES.iter().enumerate() {
        let v = [&student.w1, &student.b1, &student.w2, &student.b2][k];
        engine.add_param(name, &Tensor::new(v, SHAPES[k])?, true)?;
    }
    engine.init()?;

    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        // Working-precision weights, widened to f32 for our loops.
        student.w1 = engine.param(NAMES[0])?.to_f32()?;
        student.b1 = engine.param(NAMES[1])?.to_f32()?;
        student.w2 = engine.param(NAMES[2])?.to_f32()?;
        student.b2 = engine.param(NAMES[3])?.to_f32()?;
        let x: Vec<f32> = (0..MICRO * IN).map(|_| data.uniform()).collect();
        let (_, t) = teacher.forward(&x);
        let (h, y) = student.forward(&x);
        // loss = mean((y - t)^2); gradients of loss x (loss scale / accumulation steps).
        let scale = engine.loss_multiplier()?;
        let n = (MICRO * OUT) as f32;
        let mse: f32 = y.iter().zip(&t).map(|(a, b)| (a - b) * (a - b)).sum::<f32>() / n;
        let dy: Vec<f32> = y.iter().zip(&t).map(|(a, b)| scale * 2.0 * (a - b) / n).collect();
        let (mut gw1, mut gb1, mut gw2, mut gb2) =
            (vec![0f32; HID * IN], vec![0f32; HID], vec![0f32; OUT * HID], vec![0f32; OUT]);
        let mut dh = vec![0f32; MICRO * HID];
        for r in 0..MICRO {
            for o in 0..OUT {
                let d = dy[r * OUT + o];
                gb2[o] += d;
                for j in 0..HID {
                    gw2[o * HID + j] += d * h[r * HID + j];
                    dh[r * HID + j] += d * student.w2[o * HID + j];
                }
            }
            for j in 0..HID {
                let d = dh[r * HID + j] * (1.0 - h[r * HID + j] * h[r * HID + j]);
                gb1[j] += d;
                for p in 0..IN {
                    gw1[j * IN + p] += d * x[r * IN + p];
                }
            }
        }
        for (k, g) in [&gw1, &gb1, &gw2, &gb2].iter().enumerate() {
            engine.accumulate_grad_predivided(NAMES[k], &Tensor::new(g, SHAPES[k])?)?;
        }
        engine.backward()?;
        let info = engine.step()?;
        losses.push(mse as f64);
        if rank == 0 && info.stepped && (step + 1) % 50 == 0 {
            println!(
                "step {:4}  loss {:.5}  lr {:.5}  scale {}  grad_norm {:.4}",
                step + 1,
                mse,
                info.lr,
                info.loss_scale,
                info.grad_norm
            );
        }
    }
    let window = (steps / 10).max(5).min(steps);
    let head = losses[..window].iter().sum::<f64>() / window as f64;
    let tail = losses[steps - window..].iter().sum::<f64>() / window as f64;
    drop(engine);
    comm.finalize()?;
    if rank == 0 {
        println!("mean loss: first {} steps {:.5}, last {} steps {:.5}", window, head, window, tail);
    }
    if steps < 40 {
        println!("too short to judge (fewer than 40 micro-steps)");
    } else if tail > 0.9 * head {
        eprintln!("FAIL: the loss did not fall by 10%");
        std::process::exit(1);
    }
    Ok(())
}
