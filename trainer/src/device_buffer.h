// DeviceArray<T>: an owned device allocation that grows on demand, and the
// status checks of the trainer's CUDA calls and kernel launches (CUDA builds
// only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::trainer {

// kUnavailable naming the call and CUDA's error, or Ok.
inline Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  return Unavailable("cuda " + what + ": " + cudaGetErrorString(err));
}

// A launcher's result (cuda/byte_lm_kernels.h): "" is Ok, else kUnavailable.
inline Status KernelStatus(const std::string& error) {
  return error.empty() ? Status::Ok() : Unavailable(error);
}

// `n` floats between host and device memory; kInvalidArgument naming `what`
// when the host span holds another count, kUnavailable for a CUDA failure.
inline Status CopyToDevice(float* device, std::span<const float> host, size_t n, const char* what) {
  if (host.size() != n)
    return InvalidArgument(std::string(what) + ": " + std::to_string(host.size()) + " floats, want " +
                           std::to_string(n));
  return CudaStatus(cudaMemcpy(device, host.data(), host.size_bytes(), cudaMemcpyHostToDevice), what);
}

inline Status CopyToHost(std::span<float> host, const float* device, size_t n, const char* what) {
  if (host.size() != n)
    return InvalidArgument(std::string(what) + ": " + std::to_string(host.size()) + " floats, want " +
                           std::to_string(n));
  return CudaStatus(cudaMemcpy(host.data(), device, host.size_bytes(), cudaMemcpyDeviceToHost), what);
}

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }

  // At least n elements (contents kept only when no reallocation was needed).
  Status Reserve(size_t n, const char* what) {
    if (n <= capacity_) return Status::Ok();
    cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    void* p = nullptr;
    LONGHAUL_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&p, n * sizeof(T)), std::string("malloc of ") + what + " (" +
                                                      std::to_string(n * sizeof(T)) + " bytes)"));
    ptr_ = static_cast<T*>(p);
    capacity_ = n;
    return Status::Ok();
  }
  T* data() const { return ptr_; }
  size_t capacity() const { return capacity_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace longhaul::trainer
