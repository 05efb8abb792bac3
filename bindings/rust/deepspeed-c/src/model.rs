//! Built-in models (`ds_model_*`, `ds_forward`, `ds_engine_eval`):
//! `loss = engine(batch); engine.backward(loss); engine.step()`.
use crate::engine::Engine;
use crate::error::{check, Result};
use crate::tensor::{Tensor, TensorMut};
use crate::util::cstring;
use deepspeed_c_sys as sys;
use std::ptr;

/// A model the library builds from a JSON spec (docs/MODELS.md): a GPT or a
/// sequential stack of layers. Train it with [`Engine::with_model`].
///
/// ```
/// use deepspeed_c::{Engine, Model, Tensor};
/// let model = Model::new(r#"{"type": "sequential", "seed": 1, "loss": "mse", "layers": [
///     {"type": "linear", "in_features": 3, "out_features": 1}]}"#)?;
/// assert_eq!(model.num_params()?, 4);
/// let mut e = Engine::with_model(r#"{"train_micro_batch_size_per_gpu": 2,
///     "optimizer": {"type": "Adam", "params": {"lr": 0.01}}}"#, &model)?;
/// let (x, y) = ([1.0f32, 0.0, 2.0, 0.5, -1.0, 1.0], [1.0f32, -1.0]);
/// let loss = e.forward_loss(&Tensor::new(&x, &[2, 3])?, &Tensor::new(&y, &[2, 1])?)?;
/// assert!(loss.is_finite());
/// e.backward()?;
/// e.step()?;
/// # Ok::<(), deepspeed_c::Error>(())
/// ```
pub struct Model {
    ptr: *mut sys::ds_model_t,
}

// ds_model_create is thread-safe and a model is only read through its handle here.
unsafe impl Send for Model {}

impl Model {
    /// Build and initialise a model from its JSON spec.
    pub fn new(spec_json: &str) -> Result<Model> {
        let s = cstring(spec_json, "spec_json")?;
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::ds_model_create(s.as_ptr(), &mut ptr) })?;
        Ok(Model { ptr })
    }

    /// Parameter elements (trainable and frozen; a tied weight once).
    pub fn num_params(&self) -> Result<i64> {
        let mut n = 0i64;
        check(unsafe { sys::ds_model_num_params(self.ptr, &mut n) })?;
        Ok(n)
    }

    pub(crate) fn raw(&self) -> *mut sys::ds_model_t {
        self.ptr
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // Drops the caller's reference; an engine built with it keeps its own.
        unsafe { sys::ds_model_destroy(self.ptr) };
    }
}

impl Engine {
    /// `engine(inputs)`: the built-in model's forward. `inputs` holds the
    /// input and optionally the targets; `out` receives the mean loss (with
    /// targets, shape `[]` or `[1]`) or the model's output.
    pub fn forward(&mut self, inputs: &[Tensor<'_>], out: &mut TensorMut<'_>) -> Result<()> {
        let raw: Vec<sys::DLTensor> = inputs.iter().map(|t| t.raw()).collect();
        let mut o = out.raw();
        check(unsafe { sys::ds_forward(self.raw(), raw.as_ptr(), raw.len() as i32, &mut o) })
    }

    /// The mean loss of `input` against `targets` (a training forward unless in eval mode).
    pub fn forward_loss(&mut self, input: &Tensor<'_>, targets: &Tensor<'_>) -> Result<f32> {
        let mut loss = [0f32];
        let mut out = TensorMut::new(&mut loss, &[1])?;
        self.forward(&[input.clone(), targets.clone()], &mut out)?;
        Ok(loss[0])
    }

    /// `output.backward(out_grad)` after a forward without targets, then the
    /// engine's backward epilogue.
    pub fn backward_with(&mut self, out_grad: &Tensor<'_>) -> Result<()> {
        let t = out_grad.raw();
        check(unsafe { sys::ds_backward(self.raw(), &t) })
    }

    /// engine.eval() (true) or engine.train() (false).
    pub fn eval(&mut self, on: bool) -> Result<()> {
        check(unsafe { sys::ds_engine_eval(self.raw(), on as i32) })
    }
}
