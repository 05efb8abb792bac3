//! Shared by the integration tests: a tiny host-driven linear regression.
#![allow(dead_code)]

/// xorshift64* uniform in [-1, 1), deterministic per seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(2685821657736338717) >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    }

    pub fn fill(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform()).collect()
    }
}

pub const IN: usize = 6;
pub const OUT: usize = 3;
pub const BATCH: usize = 8;

/// A batch: x [BATCH, IN] and targets y = x A^T for a fixed teacher A [OUT, IN].
pub fn batch(rng: &mut Rng) -> (Vec<f32>, Vec<f32>) {
    let teacher = Rng(7).fill(OUT * IN);
    let x = rng.fill(BATCH * IN);
    let mut y = vec![0f32; BATCH * OUT];
    for b in 0..BATCH {
        for o in 0..OUT {
            y[b * OUT + o] = (0..IN).map(|i| x[b * IN + i] * teacher[o * IN + i]).sum();
        }
    }
    (x, y)
}

/// Mean squared error of y' = x w^T and its gradient with respect to w [OUT, IN].
pub fn mse_and_grad(w: &[f32], x: &[f32], y: &[f32]) -> (f32, Vec<f32>) {
    let n = (BATCH * OUT) as f32;
    let mut loss = 0f32;
    let mut g = vec![0f32; OUT * IN];
    for b in 0..BATCH {
        for o in 0..OUT {
            let pred: f32 = (0..IN).map(|i| x[b * IN + i] * w[o * IN + i]).sum();
            let d = pred - y[b * OUT + o];
            loss += d * d / n;
            for i in 0..IN {
                g[o * IN + i] += 2.0 * d * x[b * IN + i] / n;
            }
        }
    }
    (loss, g)
}
