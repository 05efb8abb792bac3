//! The training engine (`ds_engine_*`, `ds_backward`, `ds_step`, checkpoints).
//!
//! The header's rules become types: one thread at a time (`Engine: Send`,
//! not `Sync`); views borrow `&self` and every call that may change the
//! storage or values a view shows takes `&mut self`, so the borrow checker
//! refuses a view used after `step`, a load, `set_full_*`, `release` or drop.
use crate::comm::Comm;
use crate::error::{check, Error, Result, Status};
use crate::log::{trampoline, LogLevel, LogSink};
use crate::model::Model;
use crate::tensor::{DType, Device, Tensor, TensorMut, View, ViewMut};
use crate::util::{cpath, cstring, opt_cstring, owned, ptr_or_null};
use deepspeed_c_sys as sys;
use std::os::raw::{c_char, c_void};
use std::path::Path;
use std::ptr;

/// What [`Engine::step`] did (`ds_step_info_t`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepInfo {
    /// An accumulation boundary: an optimizer step was attempted.
    pub stepped: bool,
    /// That step was skipped (fp16 gradient overflow).
    pub skipped: bool,
    /// The loss scale after this call.
    pub loss_scale: f32,
    /// Unscaled global gradient norm before clipping (boundary only).
    pub grad_norm: f64,
    /// Learning rate this step applied (boundary only).
    pub lr: f64,
    /// global_steps after this call.
    pub global_step: i64,
}

impl StepInfo {
    pub(crate) fn from_raw(info: &sys::ds_step_info_t) -> StepInfo {
        StepInfo {
            stepped: info.stepped != 0,
            skipped: info.skipped != 0,
            loss_scale: info.loss_scale,
            grad_norm: info.grad_norm,
            lr: info.lr,
            global_step: info.global_step,
        }
    }
}

/// One registered parameter ([`Engine::named_parameters`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamInfo {
    pub name: String,
    pub shape: Vec<i64>,
    /// dtype of the working copy (None for one this crate does not know).
    pub dtype: Option<DType>,
    pub trainable: bool,
    pub numel: i64,
    /// An expert of a built-in MoE layer (`DS_PARAM_EXPERT`: DeepSpeed's
    /// `is_moe_param`, the `ep_size_<ep_size>` optimizer group).
    pub expert: bool,
}

/// This rank's memory accounting in bytes (`ds_memory_report_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    pub params_bytes: i64,
    pub grads_bytes: i64,
    pub optimizer_state_bytes: i64,
    pub buffers_bytes: i64,
    pub total_bytes: i64,
    pub peak_total_bytes: i64,
}

/// Options for building an engine (`ds_engine_options_t`).
///
/// ```no_run
/// use deepspeed_c::{Comm, Engine, LogLevel};
/// let comm = Comm::world()?;
/// let engine = Engine::builder()
///     .comm(&comm)
///     .log_level(LogLevel::Info)
///     .log(|level, msg| eprintln!("[{:?}] {}", level, msg))
///     .build(r#"{"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}"#)?;
/// # Ok::<(), deepspeed_c::Error>(())
/// ```
///
/// On a GPU (a build with CUDA), with ZeRO-Offload
/// (`zero_optimization.offload_optimizer.device` "cpu" at stages 1-3,
/// `offload_param` "cpu"/"nvme" at 3; without it the engine is
/// device-resident: ZeRO 0-3, several ranks reducing and gathering over
/// NCCL, `offload_param` "cpu" at 3):
///
/// ```no_run
/// use deepspeed_c::{Device, Engine};
/// let engine = Engine::builder().device(Device::Cuda(0)).build(
///     r#"{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
///         "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}"#,
/// )?;
/// # Ok::<(), deepspeed_c::Error>(())
/// ```
#[derive(Default)]
pub struct EngineBuilder<'c> {
    comm: Option<&'c Comm>,
    log: Option<Box<LogSink>>,
    log_level: Option<LogLevel>,
    device: Device,
    cuda_stream: Option<*mut c_void>,
}

impl<'c> EngineBuilder<'c> {
    /// Join this communicator (the engine keeps its own reference).
    pub fn comm(mut self, comm: &'c Comm) -> Self {
        self.comm = Some(comm);
        self
    }

    /// Send the engine's messages to `f` instead of stderr. It may run on
    /// several threads at once; a panic inside it is caught (the message is lost).
    pub fn log<F: Fn(LogLevel, &str) + Send + Sync + 'static>(mut self, f: F) -> Self {
        self.log = Some(Box::new(LogSink(Box::new(f))));
        self
    }

    /// The engine's log level (default: DS_LOG_LEVEL, else Warn).
    pub fn log_level(mut self, level: LogLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// Where the engine trains (default [`Device::Cpu`]). On
    /// [`Device::Cuda`]`(n)` the working weights live on GPU n:
    /// [`Engine::param`] and [`Engine::grad`] give views in its memory (no
    /// host slices: [`View::as_ptr`] is a device address), and gradients go in
    /// as [`Tensor::from_raw_parts`] over that GPU's memory.
    /// Building fails with [`Status::Unsupported`] in a build without CUDA, or
    /// a config this version does not train on a GPU (`offload_param` "nvme"
    /// without `offload_optimizer`, ZeRO-Offload at stage 0, device-resident with
    /// several ranks in a build without NCCL), and with
    /// [`Status::Device`] when the GPU cannot be selected.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// The CUDA stream an engine on a GPU orders its work with (null, the
    /// default: the legacy default stream); see [`Engine::set_stream`]. With
    /// [`Device::Cpu`] a non-null stream fails the build with
    /// [`Status::InvalidArgument`].
    ///
    /// # Safety
    /// `stream` must be null or a valid `cudaStream_t` of the builder's
    /// device, and stay valid while the engine uses it (until the next
    /// [`Engine::set_stream`] or the engine's drop).
    pub unsafe fn cuda_stream(mut self, stream: *mut c_void) -> Self {
        self.cuda_stream = Some(stream);
        self
    }

    fn options(&self) -> sys::ds_engine_options_t {
        let mut o: sys::ds_engine_options_t = unsafe { std::mem::zeroed() };
        unsafe { sys::ds_engine_options_init(&mut o, std::mem::size_of::<sys::ds_engine_options_t>()) };
        if let Some(c) = self.comm {
            o.comm = c.raw();
        }
        if let Some(sink) = &self.log {
            o.log_callback = Some(trampoline);
            o.log_user_data = &**sink as *const LogSink as *mut c_void;
        }
        if let Some(level) = self.log_level {
            o.log_level = level.code();
        }
        o.device = self.device.to_dl();
        if let Some(stream) = self.cuda_stream {
            o.cuda_stream = stream;
        }
        o
    }

    fn finish(
        self,
        create: impl FnOnce(&sys::ds_engine_options_t, *mut *mut sys::ds_engine_t) -> i32,
    ) -> Result<Engine> {
        check_abi()?;
        let opts = self.options();
        let mut ptr = ptr::null_mut();
        check(create(&opts, &mut ptr))?;
        Ok(Engine { ptr, _log: self.log })
    }

    /// Create the engine from DeepSpeed JSON text (collective with several ranks).
    pub fn build(self, config_json: &str) -> Result<Engine> {
        let c = cstring(config_json, "config_json")?;
        self.finish(|o, out| unsafe { sys::ds_engine_create(c.as_ptr(), o, out) })
    }

    /// Create the engine from a DeepSpeed JSON file.
    pub fn build_from_file(self, path: impl AsRef<Path>) -> Result<Engine> {
        let p = cpath(path.as_ref(), "path")?;
        self.finish(|o, out| unsafe { sys::ds_engine_create_from_file(p.as_ptr(), o, out) })
    }

    /// `deepspeed.initialize(model=..., config=...)`: an engine owning a
    /// built-in model's parameters, already initialised. The engine keeps the
    /// model alive; `model` may be dropped afterwards.
    pub fn build_with_model(self, config_json: &str, model: &Model) -> Result<Engine> {
        let c = cstring(config_json, "config_json")?;
        self.finish(|o, out| unsafe { sys::ds_engine_create_with_model(c.as_ptr(), model.raw(), o, out) })
    }
}

/// Refuse a library whose ABI differs from the header these bindings were generated from.
fn check_abi() -> Result<()> {
    let loaded = unsafe { sys::ds_abi_version() };
    if loaded != sys::DS_ABI_VERSION {
        return Err(Error::new(
            Status::AbiMismatch,
            format!("libdeepspeed_c has ABI {}, these bindings were generated for ABI {}", loaded, sys::DS_ABI_VERSION),
        ));
    }
    Ok(())
}

/// A training engine: `deepspeed.initialize`'s engine. `Drop` destroys it
/// (local, never collective).
///
/// ```
/// use deepspeed_c::{Engine, Tensor};
/// let mut e = Engine::new(r#"{"train_batch_size": 1, "gradient_clipping": 0,
///     "optimizer": {"type": "SGD", "params": {"lr": 0.5}}}"#)?;
/// e.add_param("w", &Tensor::new(&[1.0f32, 2.0], &[2])?, true)?;
/// e.init()?;
/// e.accumulate_grad("w", &Tensor::new(&[1.0f32, -1.0], &[2])?)?;
/// e.backward()?;
/// let info = e.step()?;
/// assert!(info.stepped);
/// assert_eq!(e.param("w")?.as_f32().unwrap(), &[0.5, 2.5]);
/// # Ok::<(), deepspeed_c::Error>(())
/// ```
///
/// A view cannot outlive a call that changes the weights:
///
/// ```compile_fail,E0502
/// # use deepspeed_c::Engine;
/// # fn f(mut e: Engine) -> deepspeed_c::Result<()> {
/// let w = e.param("w")?;
/// e.step()?;                 // error: `e` is borrowed by `w`
/// println!("{:?}", w.as_f32());
/// # Ok(()) }
/// ```
///
/// An engine is used by one thread at a time: it can be moved to another
/// thread, but not shared.
///
/// ```compile_fail,E0277
/// # use deepspeed_c::Engine;
/// fn shared<T: Sync>(_: &T) {}
/// # fn f(e: Engine) {
/// shared(&e);                // error: `Engine` is not `Sync`
/// # }
/// ```
pub struct Engine {
    ptr: *mut sys::ds_engine_t,
    // Freed after ds_engine_destroy (field order: drop() runs first).
    _log: Option<Box<LogSink>>,
}

// One thread at a time, any thread (the header's rule): Send but not Sync.
// The raw pointer already makes Engine !Sync; the assertion below keeps it so.
unsafe impl Send for Engine {}

/// Compile-time proof that Engine is Send and not Sync.
#[allow(dead_code)]
mod thread_rules {
    use super::Engine;
    fn assert_send<T: Send>() {}
    const _: fn() = assert_send::<Engine>;
    // If Engine were Sync, both impls would apply and the call below would be ambiguous.
    trait AmbiguousIfSync<A> {
        fn check() {}
    }
    impl<T: ?Sized> AmbiguousIfSync<()> for T {}
    impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}
    const _: fn() = <Engine as AmbiguousIfSync<_>>::check;
}

impl Drop for Engine {
    fn drop(&mut self) {
        unsafe { sys::ds_engine_destroy(self.ptr) };
    }
}

macro_rules! getter {
    ($(#[$doc:meta])* $name:ident, $ffi:ident, $t:ty) => {
        $(#[$doc])*
        pub fn $name(&self) -> Result<$t> {
            let mut v: $t = Default::default();
            check(unsafe { sys::$ffi(self.ptr, &mut v) })?;
            Ok(v)
        }
    };
}

impl Engine {
    /// An engine from DeepSpeed JSON text with default options.
    pub fn new(config_json: &str) -> Result<Engine> {
        EngineBuilder::default().build(config_json)
    }

    /// An engine from a DeepSpeed JSON file with default options.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Engine> {
        EngineBuilder::default().build_from_file(path)
    }

    /// An engine training a built-in model (see [`EngineBuilder::build_with_model`]).
    pub fn with_model(config_json: &str, model: &Model) -> Result<Engine> {
        EngineBuilder::default().build_with_model(config_json, model)
    }

    /// Options: communicator, log closure, log level.
    pub fn builder<'c>() -> EngineBuilder<'c> {
        EngineBuilder::default()
    }

    pub(crate) fn raw(&self) -> *mut sys::ds_engine_t {
        self.ptr
    }

    /// Register a parameter with its initial value (copied); `trainable`
    /// false freezes it. Before [`Engine::init`].
    pub fn add_param(&mut self, name: &str, init: &Tensor<'_>, trainable: bool) -> Result<()> {
        let n = cstring(name, "parameter name")?;
        let t = init.raw();
        let flags = if trainable { sys::DS_PARAM_TRAINABLE } else { 0 };
        check(unsafe { sys::ds_engine_add_param(self.ptr, n.as_ptr(), &t, flags) })
    }

    /// Lay out parameters, gradients and optimizer state (collective).
    pub fn init(&mut self) -> Result<()> {
        check(unsafe { sys::ds_engine_init(self.ptr) })
    }

    /// The working-precision weights of `name`, zero-copy. Valid while the
    /// engine is not mutably borrowed (the header: values change only in
    /// step, load and set_full_*; at ZeRO-3 the view also needs a gather).
    pub fn param(&self, name: &str) -> Result<View<'_>> {
        let n = cstring(name, "parameter name")?;
        let mut t: sys::DLTensor = unsafe { std::mem::zeroed() };
        check(unsafe { sys::ds_engine_param_view(self.ptr, n.as_ptr(), &mut t) })?;
        Ok(View::from_raw(&t))
    }

    /// The gradient accumulation buffer of `name` (= param.grad), zero-copy, read only.
    pub fn grad(&self, name: &str) -> Result<View<'_>> {
        let n = cstring(name, "parameter name")?;
        let mut t: sys::DLTensor = unsafe { std::mem::zeroed() };
        check(unsafe { sys::ds_engine_grad_view(self.ptr, n.as_ptr(), &mut t) })?;
        Ok(View::from_raw(&t))
    }

    /// The gradient buffer of `name`, writable: add gradients of
    /// (loss x [`Engine::loss_multiplier`]) into it directly.
    pub fn grad_mut(&mut self, name: &str) -> Result<ViewMut<'_>> {
        let n = cstring(name, "parameter name")?;
        let mut t: sys::DLTensor = unsafe { std::mem::zeroed() };
        check(unsafe { sys::ds_engine_grad_view(self.ptr, n.as_ptr(), &mut t) })?;
        Ok(ViewMut::from_raw(&t))
    }

    /// buffer += grad / gradient_accumulation_steps (grad of loss x loss scale).
    pub fn accumulate_grad(&mut self, name: &str, grad: &Tensor<'_>) -> Result<()> {
        self.accumulate(name, grad, 0)
    }

    /// buffer += grad, for the gradient of loss x [`Engine::loss_multiplier`]
    /// (DeepSpeed's order: divided by the accumulation steps, then scaled).
    pub fn accumulate_grad_predivided(&mut self, name: &str, grad: &Tensor<'_>) -> Result<()> {
        self.accumulate(name, grad, sys::DS_GRAD_PREDIVIDED)
    }

    fn accumulate(&mut self, name: &str, grad: &Tensor<'_>, flags: u32) -> Result<()> {
        let n = cstring(name, "parameter name")?;
        let t = grad.raw();
        check(unsafe { sys::ds_engine_accumulate_grad_ex(self.ptr, n.as_ptr(), &t, flags) })
    }

    /// End the micro-step's backward (engine.backward epilogue; with a
    /// built-in model, after a forward with targets, runs its backward first).
    pub fn backward(&mut self) -> Result<()> {
        check(unsafe { sys::ds_backward(self.ptr, ptr::null()) })
    }

    /// = engine.step(). Collective with several ranks.
    pub fn step(&mut self) -> Result<StepInfo> {
        let mut info: sys::ds_step_info_t = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::ds_step_info_t>();
        check(unsafe { sys::ds_step(self.ptr, &mut info) })?;
        Ok(StepInfo::from_raw(&info))
    }

    /// ZeRO-3: make the whole weights of `names` viewable until the matching release.
    pub fn gather(&mut self, names: &[&str]) -> Result<()> {
        self.names_call(names, sys::ds_engine_gather)
    }

    /// ZeRO-3: end a gather; views of released weights die (hence `&mut self`).
    pub fn release(&mut self, names: &[&str]) -> Result<()> {
        self.names_call(names, sys::ds_engine_release)
    }

    fn names_call(
        &mut self,
        names: &[&str],
        f: unsafe extern "C" fn(*mut sys::ds_engine_t, *const *const c_char, i32) -> i32,
    ) -> Result<()> {
        let owned = names.iter().map(|n| cstring(n, "parameter name")).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        check(unsafe { f(self.ptr, ptrs.as_ptr(), ptrs.len() as i32) })
    }

    /// Save `<dir>/<tag>` (tag None: `"global_step<N>"`) with `client_state`
    /// (JSON text, None: {}). Collective.
    pub fn save_checkpoint(
        &mut self,
        dir: impl AsRef<Path>,
        tag: Option<&str>,
        client_state: Option<&str>,
    ) -> Result<()> {
        let d = cpath(dir.as_ref(), "save_dir")?;
        let t = opt_cstring(tag, "tag")?;
        let cs = opt_cstring(client_state, "client_state")?;
        check(unsafe { sys::ds_save_checkpoint(self.ptr, d.as_ptr(), ptr_or_null(&t), ptr_or_null(&cs)) })
    }

    /// Load a checkpoint (tag None: the one `latest` names); `flags` are
    /// `DS_LOAD_*` bits ([`crate::load_flags`]). Returns the saved client
    /// state JSON. On failure the engine is unchanged.
    pub fn load_checkpoint(&mut self, dir: impl AsRef<Path>, tag: Option<&str>, flags: u32) -> Result<String> {
        let d = cpath(dir.as_ref(), "load_dir")?;
        let t = opt_cstring(tag, "tag")?;
        let mut cs: *const c_char = ptr::null();
        check(unsafe { sys::ds_load_checkpoint(self.ptr, d.as_ptr(), ptr_or_null(&t), flags, &mut cs) })?;
        Ok(owned(cs))
    }

    /// = engine.save_16bit_model(dir, filename) (None: "model.safetensors").
    pub fn save_16bit_model(
        &mut self,
        dir: impl AsRef<Path>,
        filename: Option<&str>,
        exclude_frozen: bool,
    ) -> Result<()> {
        let d = cpath(dir.as_ref(), "save_dir")?;
        let f = opt_cstring(filename, "filename")?;
        let flags = if exclude_frozen { sys::DS_SAVE_EXCLUDE_FROZEN } else { 0 };
        check(unsafe { sys::ds_save_16bit_model_ex(self.ptr, d.as_ptr(), ptr_or_null(&f), flags) })
    }

    /// The fully resolved config as JSON text.
    pub fn config_json(&self) -> Result<String> {
        let mut p: *const c_char = ptr::null();
        check(unsafe { sys::ds_engine_config_json(self.ptr, &mut p) })?;
        Ok(owned(p))
    }

    /// The comms logger's summary table (needs comms_logger.enabled).
    pub fn comms_log_summary(&mut self) -> Result<String> {
        let mut p: *const c_char = ptr::null();
        check(unsafe { sys::ds_engine_comms_log_summary(self.ptr, &mut p) })?;
        Ok(owned(p))
    }

    getter!(/// This process's data-parallel rank.
        rank, ds_engine_rank, i32);
    getter!(/// The number of data-parallel ranks.
        world_size, ds_engine_world_size, i32);
    getter!(/// The bare loss scale (1 without fp16).
        loss_scale, ds_engine_loss_scale, f32);
    getter!(/// loss_scale / gradient_accumulation_steps: what to multiply the loss by.
        loss_multiplier, ds_engine_loss_multiplier, f32);
    getter!(/// The learning rate of the next optimizer step.
        lr, ds_engine_get_lr, f64);
    getter!(/// Optimizer boundaries passed, skipped ones included.
        global_steps, ds_engine_global_steps, i64);
    getter!(/// Samples consumed.
        global_samples, ds_engine_global_samples, i64);
    getter!(/// Boundaries skipped for overflow.
        skipped_steps, ds_engine_skipped_steps, i64);
    getter!(/// ds_step calls so far.
        micro_steps, ds_engine_micro_steps, i64);

    /// Whether the next step is an accumulation boundary.
    pub fn is_gradient_accumulation_boundary(&self) -> Result<bool> {
        let mut v = 0i32;
        check(unsafe { sys::ds_engine_is_gradient_accumulation_boundary(self.ptr, &mut v) })?;
        Ok(v != 0)
    }

    /// Force the boundary decision (needs managed_gradient_accumulation).
    pub fn set_gradient_accumulation_boundary(&mut self, value: bool) -> Result<()> {
        check(unsafe { sys::ds_engine_set_gradient_accumulation_boundary(self.ptr, value as i32) })
    }

    /// Set the learning rate of the next step (a schedule overrides it later).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check(unsafe { sys::ds_engine_set_lr(self.ptr, lr) })
    }

    /// The CUDA stream an engine on a GPU orders its work on: a
    /// `cudaStream_t` as a pointer, null for the legacy default stream. Every
    /// call runs the engine's GPU work after the work already queued on the
    /// stream, and the stream's later work after the engine's (the weights
    /// after [`Engine::step`]), without blocking the host. Local.
    ///
    /// Fails with [`Status::InvalidState`] on an engine that trains on the
    /// CPU (it has no stream).
    ///
    /// # Safety
    /// `stream` must be null or a valid `cudaStream_t` of the engine's
    /// device, and stay valid while the engine uses it (until the next
    /// `set_stream` or the engine's drop).
    pub unsafe fn set_stream(&mut self, stream: *mut c_void) -> Result<()> {
        check(sys::ds_engine_set_stream(self.ptr, stream))
    }

    /// This rank's memory accounting.
    pub fn memory_report(&self) -> Result<MemoryReport> {
        self.report(sys::ds_engine_memory_report)
    }

    /// This rank's bytes on disk per category (`offload_optimizer.device`
    /// `"nvme"`: the fp32 master weights and the optimizer state; zeros otherwise).
    pub fn disk_report(&self) -> Result<MemoryReport> {
        self.report(sys::ds_engine_disk_report)
    }

    fn report(
        &self,
        f: unsafe extern "C" fn(*const sys::ds_engine_t, *mut sys::ds_memory_report_t) -> sys::ds_status_t,
    ) -> Result<MemoryReport> {
        let mut r: sys::ds_memory_report_t = unsafe { std::mem::zeroed() };
        r.struct_size = std::mem::size_of::<sys::ds_memory_report_t>();
        check(unsafe { f(self.ptr, &mut r) })?;
        Ok(MemoryReport {
            params_bytes: r.params_bytes,
            grads_bytes: r.grads_bytes,
            optimizer_state_bytes: r.optimizer_state_bytes,
            buffers_bytes: r.buffers_bytes,
            total_bytes: r.total_bytes,
            peak_total_bytes: r.peak_total_bytes,
        })
    }

    /// Every parameter in registration order (= model.named_parameters()).
    pub fn named_parameters(&self) -> Result<Vec<ParamInfo>> {
        let mut n = 0i64;
        check(unsafe { sys::ds_engine_num_params(self.ptr, &mut n) })?;
        (0..n).map(|i| self.param_info(i)).collect()
    }

    fn param_info(&self, index: i64) -> Result<ParamInfo> {
        let mut p: sys::ds_param_info_t = unsafe { std::mem::zeroed() };
        p.struct_size = std::mem::size_of::<sys::ds_param_info_t>();
        check(unsafe { sys::ds_engine_param_info(self.ptr, index, &mut p) })?;
        let shape = if p.ndim > 0 && !p.shape.is_null() {
            unsafe { std::slice::from_raw_parts(p.shape, p.ndim as usize) }.to_vec()
        } else {
            Vec::new()
        };
        Ok(ParamInfo {
            name: owned(p.name),
            shape,
            dtype: DType::from_dl(p.dtype),
            trainable: p.flags & sys::DS_PARAM_TRAINABLE != 0,
            numel: p.numel,
            expert: p.flags & sys::DS_PARAM_EXPERT != 0,
        })
    }

    fn shape_of(&self, name: &str) -> Result<Vec<i64>> {
        self.named_parameters()?
            .into_iter()
            .find(|p| p.name == name)
            .map(|p| p.shape)
            .ok_or_else(|| Error::new(Status::NotFound, format!("no parameter named {:?}", name)))
    }

    /// Fetch an fp32 copy of `name` through one of the get_full_* calls.
    fn get_full(
        &mut self,
        name: &str,
        f: impl FnOnce(*mut sys::ds_engine_t, *const c_char, &mut sys::DLTensor) -> i32,
    ) -> Result<Vec<f32>> {
        let shape = self.shape_of(name)?;
        let n = cstring(name, "parameter name")?;
        let mut out = vec![0f32; shape.iter().product::<i64>() as usize];
        let mut t = TensorMut::new(&mut out, &shape)?;
        let mut raw = t.raw();
        check(f(self.ptr, n.as_ptr(), &mut raw))?;
        Ok(out)
    }

    /// The fp32 master weights of `name` (a copy).
    pub fn get_full_fp32_param(&mut self, name: &str) -> Result<Vec<f32>> {
        self.get_full(name, |e, n, t| unsafe { sys::ds_engine_get_full_fp32_param(e, n, t) })
    }

    /// The accumulated gradient of `name` for the current window (a copy).
    pub fn get_full_grad(&mut self, name: &str) -> Result<Vec<f32>> {
        self.get_full(name, |e, n, t| unsafe { sys::ds_engine_get_full_grad(e, n, t) })
    }

    /// An optimizer state tensor ("exp_avg", "exp_avg_sq", "momentum_buffer").
    pub fn get_full_optimizer_state(&mut self, name: &str, key: &str) -> Result<Vec<f32>> {
        let k = cstring(key, "optimizer state key")?;
        self.get_full(name, |e, n, t| unsafe { sys::ds_engine_get_full_optimizer_state(e, n, k.as_ptr(), t) })
    }

    fn set_full(
        &mut self,
        name: &str,
        value: &[f32],
        f: impl FnOnce(*mut sys::ds_engine_t, *const c_char, &sys::DLTensor) -> i32,
    ) -> Result<()> {
        let shape = self.shape_of(name)?;
        let n = cstring(name, "parameter name")?;
        let t = Tensor::new(value, &shape)?;
        check(f(self.ptr, n.as_ptr(), &t.raw()))
    }

    /// Set the fp32 master weights of `name` (and the working copy, rounded).
    pub fn set_full_fp32_param(&mut self, name: &str, value: &[f32]) -> Result<()> {
        self.set_full(name, value, |e, n, t| unsafe { sys::ds_engine_set_full_fp32_param(e, n, t) })
    }

    /// Set the accumulated gradient of `name`.
    pub fn set_full_grad(&mut self, name: &str, value: &[f32]) -> Result<()> {
        self.set_full(name, value, |e, n, t| unsafe { sys::ds_engine_set_full_grad(e, n, t) })
    }

    /// Set an optimizer state tensor of `name`.
    pub fn set_full_optimizer_state(&mut self, name: &str, key: &str, value: &[f32]) -> Result<()> {
        let k = cstring(key, "optimizer state key")?;
        self.set_full(name, value, |e, n, t| unsafe { sys::ds_engine_set_full_optimizer_state(e, n, k.as_ptr(), t) })
    }
}
