//! One pipeline stage of a built-in GPT (`ds_train_batch`, `ds_eval_batch`,
//! `ds_engine_pipe_info`): DeepSpeed's `PipelineEngine.train_batch` /
//! `eval_batch`. A GPT spec with `"pipeline": {"stages": S}` makes
//! [`Engine::with_model`] build this rank's stage (collective; the world size
//! must be a multiple of S); such an engine trains only through these calls.
use crate::engine::{Engine, StepInfo};
use crate::error::{check, Result};
use crate::tensor::Tensor;
use deepspeed_c_sys as sys;
use std::ptr;

/// What [`Engine::train_batch`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchResult {
    /// Mean loss over the micro-batches, averaged over the data-parallel replicas (every rank).
    pub loss: f32,
    /// The batch's optimizer step.
    pub step: StepInfo,
}

/// This rank's place in the pipeline and its last batch's timings (`ds_pipe_info_t`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PipeInfo {
    pub stage_id: i32,
    pub num_stages: i32,
    /// The stage's pipeline layers are `first_layer..last_layer`.
    pub first_layer: i32,
    pub last_layer: i32,
    /// The model's pipeline layers (n_layer + 3).
    pub num_layers: i32,
    /// Micro-batches per batch (gradient_accumulation_steps).
    pub micro_batches: i32,
    /// Replicas of each stage.
    pub data_parallel_size: i32,
    /// The last train_batch/eval_batch, wall clock.
    pub batch_seconds: f64,
    /// Of which this stage's forwards, backwards and optimizer step.
    pub compute_seconds: f64,
    /// Of which forwards recomputed before their backward.
    pub recompute_seconds: f64,
}

/// The DLTensor of an optional argument (null for None); `raw` must outlive the call.
fn opt_raw(t: Option<&Tensor<'_>>) -> Option<sys::DLTensor> {
    t.map(|t| t.raw())
}

fn as_ptr(raw: &Option<sys::DLTensor>) -> *const sys::DLTensor {
    raw.as_ref().map_or(ptr::null(), |r| r as *const sys::DLTensor)
}

impl Engine {
    /// One batch through the pipeline, then one optimizer step (collective).
    /// `inputs` (token ids `[gradient_accumulation_steps x micro, T]`, i32 or i64)
    /// is read on the first stage, `targets` (shaped like inputs, -100 = ignore)
    /// on the last; elsewhere either may be `None`.
    pub fn train_batch(&mut self, inputs: Option<&Tensor<'_>>, targets: Option<&Tensor<'_>>) -> Result<BatchResult> {
        let (x, y) = (opt_raw(inputs), opt_raw(targets));
        let mut info: sys::ds_step_info_t = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::ds_step_info_t>();
        let mut loss = 0f32;
        check(unsafe { sys::ds_train_batch(self.raw(), as_ptr(&x), as_ptr(&y), &mut loss, &mut info) })?;
        Ok(BatchResult { loss, step: StepInfo::from_raw(&info) })
    }

    /// DeepSpeed's eval_batch: the batch's mean loss, dropout off, no gradients (collective).
    pub fn eval_batch(&mut self, inputs: Option<&Tensor<'_>>, targets: Option<&Tensor<'_>>) -> Result<f32> {
        let (x, y) = (opt_raw(inputs), opt_raw(targets));
        let mut loss = 0f32;
        check(unsafe { sys::ds_eval_batch(self.raw(), as_ptr(&x), as_ptr(&y), &mut loss) })?;
        Ok(loss)
    }

    /// This rank's stage and its last batch's timings.
    pub fn pipe_info(&self) -> Result<PipeInfo> {
        let mut c: sys::ds_pipe_info_t = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::ds_pipe_info_t>();
        check(unsafe { sys::ds_engine_pipe_info(self.raw(), &mut c) })?;
        Ok(PipeInfo {
            stage_id: c.stage_id,
            num_stages: c.num_stages,
            first_layer: c.first_layer,
            last_layer: c.last_layer,
            num_layers: c.num_layers,
            micro_batches: c.micro_batches,
            data_parallel_size: c.data_parallel_size,
            batch_seconds: c.batch_seconds,
            compute_seconds: c.compute_seconds,
            recompute_seconds: c.recompute_seconds,
        })
    }
}
