//! Moving an engine's states out of memory and back (`ds_engine_offload_states`,
//! `ds_engine_reload_states`, `ds_engine_empty_partition_cache`): DeepSpeed's
//! `engine.offload_states` / `reload_states` / `empty_partition_cache`.
use crate::engine::Engine;
use crate::error::{check, Result};
use crate::util::{cpath, ptr_or_null};
use deepspeed_c_sys as sys;
use std::path::Path;

/// State bits for [`Engine::offload_states`] (OR them; 0 = every state this engine can move).
pub mod offload_states {
    pub use deepspeed_c_sys::{
        DS_OFFLOAD_ALL_STATES as ALL_STATES, DS_OFFLOAD_CONTIGUOUS_GRAD_BUFFER as CONTIGUOUS_GRAD_BUFFER,
        DS_OFFLOAD_HP_PARAMS as HP_PARAMS, DS_OFFLOAD_LP_GRADS as LP_GRADS, DS_OFFLOAD_LP_PARAMS as LP_PARAMS,
        DS_OFFLOAD_OPTIM_STATES as OPTIM_STATES,
    };
}

/// Where offloaded states go (DeepSpeed's `OffloadDeviceEnum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadDevice {
    /// Host memory: the states already live there on this engine (a no-op).
    Cpu,
    /// An unlinked file under the NVMe path; their memory is released.
    Nvme,
}

impl Engine {
    /// Moves `which` ([`offload_states`] bits, 0 = all) to `device` until
    /// [`Engine::reload_states`]; `nvme_path` `None` = the config's. While a
    /// state is out, calls that read it fail with `Status::InvalidState`.
    pub fn offload_states(&mut self, which: u32, device: OffloadDevice, nvme_path: Option<&Path>) -> Result<()> {
        let d = match device {
            OffloadDevice::Cpu => sys::DS_OFFLOAD_DEVICE_CPU,
            OffloadDevice::Nvme => sys::DS_OFFLOAD_DEVICE_NVME,
        };
        let p = nvme_path.map(|p| cpath(p, "offload_states: nvme_path")).transpose()?;
        check(unsafe { sys::ds_engine_offload_states(self.raw(), which, d, ptr_or_null(&p)) })
    }

    /// Every offloaded state back, bit-identical (checksummed); a no-op when none is out.
    pub fn reload_states(&mut self) -> Result<()> {
        check(unsafe { sys::ds_engine_reload_states(self.raw()) })
    }

    /// ZeRO-3: frees the whole weights of gathered parameters (a no-op below ZeRO-3).
    pub fn empty_partition_cache(&mut self) -> Result<()> {
        check(unsafe { sys::ds_engine_empty_partition_cache(self.raw()) })
    }
}
