//! Safe Rust bindings to deepspeed_c, DeepSpeed's training runtime as a
//! shared library with a C ABI (`include/deepspeed_c.h`).
//!
//! The program owns forward and backward; the [`Engine`] owns the weights'
//! precision, loss scaling, gradient accumulation and clipping, ZeRO
//! partitioning across ranks, the optimizer, the LR schedule and checkpoints,
//! configured by DeepSpeed's JSON config unchanged.
//!
//! ```
//! use deepspeed_c::{Engine, Tensor};
//! let mut engine = Engine::new(r#"{"train_batch_size": 4, "gradient_clipping": 1.0,
//!     "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}"#)?;
//! engine.add_param("w", &Tensor::new(&[0.5f32; 6], &[2, 3])?, true)?;
//! engine.init()?;
//! let w = engine.param("w")?.as_f32().unwrap().to_vec();   // forward with w ...
//! let grad = vec![0.1f32; w.len()];                         // ... backward gives grad
//! engine.accumulate_grad("w", &Tensor::new(&grad, &[2, 3])?)?;
//! engine.backward()?;
//! let info = engine.step()?;
//! assert_eq!(info.global_step, 1);
//! # Ok::<(), deepspeed_c::Error>(())
//! ```
//!
//! Lifetimes follow the header: a [`View`] borrows the engine and every call
//! that may change what a view shows takes `&mut Engine`. Threads follow it
//! too: `Engine` is `Send` but not `Sync`. Errors are [`Error`]s carrying the
//! [`Status`] and the library's message, which names the key, argument or
//! parameter at fault; the engine stays usable after any error.
mod comm;
mod engine;
mod error;
mod log;
mod model;
mod offload;
mod pipeline;
mod schedule;
mod tensor;
mod topology;
mod util;

pub use comm::{Backend, Comm, CommOptions, ReduceOp};
pub use engine::{Engine, EngineBuilder, MemoryReport, ParamInfo, StepInfo};
pub use error::{Error, Result, Status};
pub use log::{set_log_callback, LogLevel};
pub use model::Model;
pub use offload::{offload_states, OffloadDevice};
pub use pipeline::{BatchResult, PipeInfo};
pub use schedule::{partition_layers, PipeInstr, PipeOp, PipeSchedule, ScheduleKind};
pub use tensor::{DType, Device, Element, Tensor, TensorMut, View, ViewMut};
pub use topology::Topology;

/// The raw bindings, for what the safe API does not wrap (ds_comm_create_mpi, the memory estimators).
pub use deepspeed_c_sys as sys;

/// `ds_load_checkpoint` flag bits for [`Engine::load_checkpoint`] (OR them; 0 = DeepSpeed's defaults).
pub mod load_flags {
    pub use deepspeed_c_sys::{
        DS_LOAD_MODULE_ONLY as MODULE_ONLY, DS_LOAD_NON_STRICT as NON_STRICT,
        DS_LOAD_NO_LR_SCHEDULER_STATES as NO_LR_SCHEDULER_STATES, DS_LOAD_NO_OPTIMIZER_STATES as NO_OPTIMIZER_STATES,
    };
}

/// "MAJOR.MINOR.PATCH" of the library loaded.
pub fn version_string() -> String {
    util::owned(unsafe { sys::ds_version_string() })
}

/// DS_VERSION_NUMBER of the library loaded.
pub fn version() -> u32 {
    unsafe { sys::ds_version() }
}

/// JSON describing the build and the machine (SIMD level, BLAS, MPI, CUDA...).
pub fn build_info() -> String {
    util::owned(unsafe { sys::ds_build_info() })
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_matches_header() {
        assert_eq!(super::version(), super::sys::DS_VERSION_NUMBER);
        let v = super::version_string();
        assert_eq!(v.split('.').count(), 3, "{}", v);
        assert!(super::build_info().starts_with('{'));
    }
}
