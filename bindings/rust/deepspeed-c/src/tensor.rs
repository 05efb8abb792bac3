//! Tensors crossing the ABI as DLPack `DLTensor`s: borrowed host slices going
//! in ([`Tensor`], [`TensorMut`]) and engine-owned views coming out ([`View`],
//! [`ViewMut`]), whose lifetimes the engine's borrows bound.
use crate::error::{check, Error, Result, Status};
use deepspeed_c_sys as sys;
use std::marker::PhantomData;
use std::os::raw::c_void;

/// Where an engine trains and where its views live (DLPack's `DLDevice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// Host memory (`{kDLCPU, 0}`), the default.
    #[default]
    Cpu,
    /// GPU N's memory (`{kDLCUDA, N}`).
    Cuda(i32),
}

impl Device {
    pub(crate) fn to_dl(self) -> sys::DLDevice {
        match self {
            Device::Cpu => sys::DLDevice { device_type: sys::DLDeviceType_kDLCPU, device_id: 0 },
            Device::Cuda(n) => sys::DLDevice { device_type: sys::DLDeviceType_kDLCUDA, device_id: n },
        }
    }

    pub(crate) fn from_dl(d: sys::DLDevice) -> Option<Device> {
        match d.device_type {
            sys::DLDeviceType_kDLCPU => Some(Device::Cpu),
            sys::DLDeviceType_kDLCUDA => Some(Device::Cuda(d.device_id)),
            _ => None,
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{}", n),
        }
    }
}

/// Element types the library handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    I32,
    I64,
}

impl DType {
    pub(crate) fn to_dl(self) -> sys::DLDataType {
        let (code, bits) = match self {
            DType::F32 => (sys::DLDataTypeCode_kDLFloat, 32),
            DType::F16 => (sys::DLDataTypeCode_kDLFloat, 16),
            DType::BF16 => (sys::DLDataTypeCode_kDLBfloat, 16),
            DType::I32 => (sys::DLDataTypeCode_kDLInt, 32),
            DType::I64 => (sys::DLDataTypeCode_kDLInt, 64),
        };
        sys::DLDataType { code: code as u8, bits, lanes: 1 }
    }

    pub(crate) fn from_dl(t: sys::DLDataType) -> Option<DType> {
        let code = t.code as u32;
        match (code, t.bits, t.lanes) {
            (sys::DLDataTypeCode_kDLFloat, 32, 1) => Some(DType::F32),
            (sys::DLDataTypeCode_kDLFloat, 16, 1) => Some(DType::F16),
            (sys::DLDataTypeCode_kDLBfloat, 16, 1) => Some(DType::BF16),
            (sys::DLDataTypeCode_kDLInt, 32, 1) => Some(DType::I32),
            (sys::DLDataTypeCode_kDLInt, 64, 1) => Some(DType::I64),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I64 => 8,
        }
    }
}

/// Rust element types with one DLPack dtype (16-bit floats travel as `u16`
/// bits with an explicit [`DType`], see [`Tensor::from_bits`]).
pub trait Element: Copy + 'static {
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}

fn numel(shape: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 {
            return Err(Error::new(Status::InvalidArgument, format!("shape[{}] = {} is negative", i, d)));
        }
        n = n
            .checked_mul(d as usize)
            .ok_or_else(|| Error::new(Status::InvalidArgument, format!("shape {:?} overflows", shape)))?;
    }
    Ok(n)
}

fn check_len(len: usize, shape: &[i64], what: &str) -> Result<()> {
    let n = numel(shape)?;
    if n != len {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("{}: shape {:?} holds {} elements but the slice has {}", what, shape, n, len),
        ));
    }
    Ok(())
}

fn dl_tensor(data: *mut c_void, shape: &[i64], dtype: DType) -> sys::DLTensor {
    sys::DLTensor {
        data,
        device: sys::DLDevice { device_type: sys::DLDeviceType_kDLCPU, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: dtype.to_dl(),
        shape: shape.as_ptr() as *mut i64,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// A borrowed, row-major tensor passed into the library (read only): a host
/// slice, or device memory given by address ([`Tensor::from_raw_parts`]).
#[derive(Debug, Clone)]
pub struct Tensor<'a> {
    data: *const c_void,
    shape: Vec<i64>,
    dtype: DType,
    device: Device,
    _data: PhantomData<&'a [u8]>,
}

impl<'a> Tensor<'a> {
    /// `data` seen with `shape` (row-major). Err(InvalidArgument) when the
    /// shape does not hold exactly `data.len()` elements.
    pub fn new<T: Element>(data: &'a [T], shape: &[i64]) -> Result<Tensor<'a>> {
        check_len(data.len(), shape, "Tensor::new")?;
        Ok(Tensor {
            data: data.as_ptr() as *const c_void,
            shape: shape.to_vec(),
            dtype: T::DTYPE,
            device: Device::Cpu,
            _data: PhantomData,
        })
    }

    /// A 1-D tensor over all of `data`.
    pub fn vector<T: Element>(data: &'a [T]) -> Tensor<'a> {
        Tensor {
            data: data.as_ptr() as *const c_void,
            shape: vec![data.len() as i64],
            dtype: T::DTYPE,
            device: Device::Cpu,
            _data: PhantomData,
        }
    }

    /// 16-bit floats given as their bits; `dtype` is F16 or BF16.
    pub fn from_bits(data: &'a [u16], shape: &[i64], dtype: DType) -> Result<Tensor<'a>> {
        if dtype != DType::F16 && dtype != DType::BF16 {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("Tensor::from_bits: dtype {:?} is not F16 or BF16", dtype),
            ));
        }
        check_len(data.len(), shape, "Tensor::from_bits")?;
        Ok(Tensor {
            data: data.as_ptr() as *const c_void,
            shape: shape.to_vec(),
            dtype,
            device: Device::Cpu,
            _data: PhantomData,
        })
    }

    /// `shape` (row-major, contiguous) elements of `dtype` at `data` on
    /// `device`: how a gradient in GPU memory reaches an engine on that GPU
    /// ([`EngineBuilder::device`](crate::EngineBuilder::device)). The library
    /// checks the device against the engine's and names both when they differ.
    /// Err(InvalidArgument) for a negative or overflowing shape.
    ///
    /// # Safety
    /// `data` must point to the tensor's elements in `device`'s memory (host
    /// memory for [`Device::Cpu`]), suitably aligned, valid and unchanged for
    /// `'a`; on a GPU, any work writing them must be ordered before the engine's
    /// stream reads them ([`Engine::set_stream`](crate::Engine::set_stream)).
    pub unsafe fn from_raw_parts(
        data: *const c_void,
        shape: &[i64],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor<'a>> {
        numel(shape)?;
        Ok(Tensor { data, shape: shape.to_vec(), dtype, device, _data: PhantomData })
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Where the elements live ([`Device::Cpu`] unless made by [`Tensor::from_raw_parts`]).
    pub fn device(&self) -> Device {
        self.device
    }

    /// The DLTensor; valid while `self` is (its shape points into `self`).
    pub(crate) fn raw(&self) -> sys::DLTensor {
        let mut t = dl_tensor(self.data as *mut c_void, &self.shape, self.dtype);
        t.device = self.device.to_dl();
        t
    }
}

/// A borrowed host tensor the library writes into.
#[derive(Debug)]
pub struct TensorMut<'a> {
    data: *mut c_void,
    shape: Vec<i64>,
    dtype: DType,
    _data: PhantomData<&'a mut [u8]>,
}

impl<'a> TensorMut<'a> {
    /// `data` seen with `shape` (row-major); Err(InvalidArgument) on a size mismatch.
    pub fn new<T: Element>(data: &'a mut [T], shape: &[i64]) -> Result<TensorMut<'a>> {
        check_len(data.len(), shape, "TensorMut::new")?;
        Ok(TensorMut {
            data: data.as_mut_ptr() as *mut c_void,
            shape: shape.to_vec(),
            dtype: T::DTYPE,
            _data: PhantomData,
        })
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub(crate) fn raw(&mut self) -> sys::DLTensor {
        dl_tensor(self.data, &self.shape, self.dtype)
    }
}

/// The shape, dtype and data address of an engine-owned DLTensor.
fn parts(t: &sys::DLTensor) -> (Vec<i64>, Option<DType>, *mut u8) {
    let shape = if t.ndim > 0 && !t.shape.is_null() {
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec()
    } else {
        Vec::new()
    };
    let data = unsafe { (t.data as *mut u8).add(t.byte_offset as usize) };
    (shape, DType::from_dl(t.dtype), data)
}

/// Read-only, zero-copy view of engine-owned storage (a parameter's working
/// weights or a gradient buffer). It borrows the engine, so it cannot outlive
/// the engine nor live across a call that changes the storage
/// ([`Engine::step`](crate::Engine::step), loads, `set_full_*`, release):
/// those take `&mut Engine`. Views are contiguous (row-major).
///
/// The views of an engine on a GPU ([`EngineBuilder::device`](crate::EngineBuilder::device))
/// live in that GPU's memory: they hand out no slices ([`View::as_f32`],
/// [`View::as_bits`] and [`ViewMut::as_f32_mut`] give None, [`View::to_f32`] an
/// error), only [`View::as_ptr`], a device address for CUDA code.
pub struct View<'a> {
    shape: Vec<i64>,
    dtype: Option<DType>,
    data: *const u8,
    device: sys::DLDevice,
    _engine: PhantomData<&'a ()>,
}

impl<'a> View<'a> {
    pub(crate) fn from_raw(t: &sys::DLTensor) -> View<'a> {
        let (shape, dtype, data) = parts(t);
        View { shape, dtype, data, device: t.device, _engine: PhantomData }
    }

    /// Where the elements live (None for a device type this crate does not know).
    pub fn device(&self) -> Option<Device> {
        Device::from_dl(self.device)
    }

    /// The elements are in host memory (`kDLCPU`): the slice accessors may read them.
    fn on_host(&self) -> bool {
        self.device.device_type == sys::DLDeviceType_kDLCPU
    }

    /// The device as text for messages: "cuda:0", or the raw DLPack pair.
    fn device_name(&self) -> String {
        match self.device() {
            Some(d) => d.to_string(),
            None => format!("device ({}, {})", self.device.device_type, self.device.device_id),
        }
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The element type (None for one this crate does not know).
    pub fn dtype(&self) -> Option<DType> {
        self.dtype
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    /// The address of the first element (stable at ZeRO 0-2 for the engine's
    /// life); a device address when [`View::device`] is a GPU.
    pub fn as_ptr(&self) -> *const c_void {
        self.data as *const c_void
    }

    /// The elements as `f32` (None unless the dtype is F32 and the view is in host memory).
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        self.slice::<f32>(DType::F32)
    }

    /// The elements' bits when the dtype is F16 or BF16 and the view is in
    /// host memory (see [`View::to_f32`]).
    pub fn as_bits(&self) -> Option<&'a [u16]> {
        match self.dtype {
            Some(DType::F16) | Some(DType::BF16) => self.slice::<u16>(self.dtype.unwrap()),
            _ => None,
        }
    }

    fn slice<T>(&self, want: DType) -> Option<&'a [T]> {
        if !self.on_host() || self.dtype != Some(want) || (self.data as usize) % std::mem::align_of::<T>() != 0 {
            return None;
        }
        if self.numel() == 0 {
            return Some(&[]);
        }
        Some(unsafe { std::slice::from_raw_parts(self.data as *const T, self.numel()) })
    }

    /// A copy widened to f32 (fp32, fp16 or bf16) with the library's casts
    /// (`ds_convert`). Err(Unsupported) for a view in GPU memory.
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        if !self.on_host() {
            return Err(Error::new(
                Status::Unsupported,
                format!("View::to_f32: the view lives in {} memory, not on the host", self.device_name()),
            ));
        }
        let dtype = self.dtype.ok_or_else(|| Error::new(Status::Unsupported, "View::to_f32: unknown dtype"))?;
        let mut out = vec![0f32; self.numel()];
        let src = dl_tensor(self.data as *mut c_void, &self.shape, dtype);
        let mut dst = dl_tensor(out.as_mut_ptr() as *mut c_void, &self.shape, DType::F32);
        check(unsafe { sys::ds_convert(&src, &mut dst) })?;
        Ok(out)
    }
}

/// Writable view of a gradient buffer (from [`Engine::grad_mut`](crate::Engine::grad_mut)):
/// the host may add its gradient into it directly (already divided by
/// gradient_accumulation_steps: multiply the loss by the loss multiplier).
pub struct ViewMut<'a> {
    view: View<'a>,
}

impl<'a> ViewMut<'a> {
    pub(crate) fn from_raw(t: &sys::DLTensor) -> ViewMut<'a> {
        ViewMut { view: View::from_raw(t) }
    }

    /// The read-only side.
    pub fn view(&self) -> &View<'a> {
        &self.view
    }

    /// The elements as mutable `f32` (None unless the dtype is F32 and the view is in host memory).
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        let n = self.view.numel();
        let ok = self.view.on_host() && self.view.dtype == Some(DType::F32) && (self.view.data as usize) % 4 == 0;
        if !ok {
            return None;
        }
        if n == 0 {
            return Some(&mut []);
        }
        Some(unsafe { std::slice::from_raw_parts_mut(self.view.data as *mut f32, n) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_must_match_the_slice() {
        let data = [1f32; 6];
        assert!(Tensor::new(&data, &[2, 3]).is_ok());
        let e = Tensor::new(&data, &[4, 2]).unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument);
        assert!(e.message.contains("[4, 2]") && e.message.contains("6"), "{}", e.message);
        let e = Tensor::new(&data, &[-1, 3]).unwrap_err();
        assert!(e.message.contains("negative"), "{}", e.message);
        assert!(Tensor::from_bits(&[0u16; 2], &[2], DType::F32).is_err());
    }

    #[test]
    fn dtypes_round_trip_through_dlpack() {
        for d in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64] {
            assert_eq!(DType::from_dl(d.to_dl()), Some(d));
        }
    }

    #[test]
    fn bf16_view_widens_through_ds_convert() {
        // 1.0, -2.5 and 2^-10 in bf16 bits: exact in f32.
        let bits: [u16; 3] = [0x3F80, 0xC020, 0x3A80];
        let shape = [3i64];
        let t = dl_tensor(bits.as_ptr() as *mut c_void, &shape, DType::BF16);
        let v = View::from_raw(&t);
        assert_eq!(v.as_bits(), Some(&bits[..]));
        assert!(v.as_f32().is_none());
        assert_eq!(v.to_f32().unwrap(), vec![1.0, -2.5, 1.0 / 1024.0]);
        assert_eq!(v.device(), Some(Device::Cpu));
    }

    #[test]
    fn device_view_hands_out_no_host_slice() {
        // A view claiming cuda:0 over host bytes: nothing may read them as host memory.
        let data = [1f32, 2.0];
        let bits = [0x3F80u16, 0xC020];
        let shape = [2i64];
        let mut t = dl_tensor(data.as_ptr() as *mut c_void, &shape, DType::F32);
        t.device = Device::Cuda(0).to_dl();
        let v = View::from_raw(&t);
        assert_eq!(v.device(), Some(Device::Cuda(0)));
        assert_eq!(v.as_ptr(), data.as_ptr() as *const c_void);
        assert!(v.as_f32().is_none());
        let e = v.to_f32().unwrap_err();
        assert_eq!(e.status, Status::Unsupported);
        assert!(e.message.contains("cuda:0"), "{}", e.message);
        let mut m = ViewMut::from_raw(&t);
        assert!(m.as_f32_mut().is_none());
        let mut t = dl_tensor(bits.as_ptr() as *mut c_void, &shape, DType::BF16);
        t.device = Device::Cuda(1).to_dl();
        assert!(View::from_raw(&t).as_bits().is_none());
        t.device.device_type = sys::DLDeviceType_kDLCUDAManaged;
        let v = View::from_raw(&t);
        assert_eq!(v.device(), None);
        assert!(v.to_f32().unwrap_err().message.contains("device (13, 1)"));
    }
}
