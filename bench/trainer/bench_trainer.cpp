// bench_trainer: inner-step throughput of the built-in trainer against raw sgemm.
//
// Prints inner steps/s and achieved GFLOP/s of a preset (GEMM flops of forward +
// backward: 3x the forward GEMMs) next to cblas_sgemm GFLOP/s measured in the same
// run on the same GEMM shapes, both single-threaded, and the ratio (target >= 0.5).
// With --gpu (CUDA builds): the device-resident trainer (DeviceInnerTrainer over a
// one-rank NCCL group on device 0) against cublasSgemm on device operands of the
// same shapes, and the step's NCCL all-reduce timed alone. Every phase is bounded
// by a time budget and an iteration cap.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "longhaul/trainer/data.h"
#include "longhaul/trainer/trainer.h"

#ifdef LONGHAUL_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "longhaul/trainer/device_trainer.h"
#include "longhaul/trainer/nccl_group.h"
#endif

using namespace longhaul;
using namespace longhaul::trainer;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape { bool ta, tb; int m, n, k; };

// The GEMMs one inner step performs (see model.cpp): forward per layer and head,
// backward dW and dX per layer and head.
std::vector<Shape> StepShapes(const ModelConfig& c, int B) {
  std::vector<Shape> s;
  const int H = c.hidden_dim, V = 256;
  int in = c.context * c.embed_dim;
  for (int l = 0; l < c.hidden_layers; ++l) {
    s.push_back({false, false, B, H, in});  // forward
    s.push_back({true, false, in, H, B});   // dW
    s.push_back({false, true, B, in, H});   // dX
    in = H;
  }
  s.push_back({false, false, B, V, H});
  s.push_back({true, false, H, V, B});
  s.push_back({false, true, B, H, V});
  return s;
}

double Flops(const std::vector<Shape>& shapes) {
  double f = 0;
  for (const Shape& s : shapes) f += 2.0 * s.m * s.n * s.k;
  return f;
}

// GFLOP/s of cblas_sgemm running exactly these shapes back to back, each on its own
// operands as in the model (so the working set, and the cache misses, are comparable).
double SgemmGflops(const std::vector<Shape>& shapes, double seconds) {
  struct Operands { std::vector<float> a, b, c; };
  std::vector<Operands> ops;
  for (const Shape& s : shapes)
    ops.push_back({std::vector<float>(static_cast<size_t>(s.m) * s.k, 0.5f),
                   std::vector<float>(static_cast<size_t>(s.k) * s.n, 0.25f),
                   std::vector<float>(static_cast<size_t>(s.m) * s.n, 0.0f)});
  auto run_all = [&] {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& s = shapes[i];
      const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  s.m, s.n, s.k, 1.0f, ops[i].a.data(), lda, ops[i].b.data(), ldb, 0.0f, ops[i].c.data(), s.n);
    }
  };
  run_all();  // warm-up
  int reps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds && reps < 1'000'000) {
    run_all();
    ++reps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return Flops(shapes) * reps / elapsed / 1e9;
}

// Runs `fn` repeatedly for up to `seconds` (and at most `cap` times) after one
// warm-up call; returns calls per second, or the first failure.
template <typename Fn>
Result<double> Rate(double seconds, int cap, Fn fn) {
  LONGHAUL_RETURN_IF_ERROR(fn());
  int calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds && calls < cap) {
    LONGHAUL_RETURN_IF_ERROR(fn());
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return calls / elapsed;
}

#ifdef LONGHAUL_HAVE_CUDA
// GFLOP/s of cublasSgemm on device operands of these shapes, back to back, with
// the deterministic math the trainer's handle uses (row-major via swapped operands).
Result<double> CublasGflops(const std::vector<Shape>& shapes, double seconds) {
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return Unavailable("cublasCreate failed");
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  std::vector<float*> buffers;
  auto alloc = [&](size_t n) {
    float* p = nullptr;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) return static_cast<float*>(nullptr);
    cudaMemset(p, 0, n * sizeof(float));
    buffers.push_back(p);
    return p;
  };
  struct Operands { float *a, *b, *c; };
  std::vector<Operands> ops;
  for (const Shape& s : shapes)
    ops.push_back({alloc(static_cast<size_t>(s.m) * s.k), alloc(static_cast<size_t>(s.k) * s.n),
                   alloc(static_cast<size_t>(s.m) * s.n)});
  Result<double> rate = Unavailable("cuda allocation failed");
  if (std::find(buffers.begin(), buffers.end(), nullptr) == buffers.end()) {
    rate = Rate(seconds, 1'000'000, [&]() -> Status {
      const float one = 1.0f, zero = 0.0f;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const Shape& s = shapes[i];
        const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
        if (cublasSgemm(handle, s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k,
                        &one, ops[i].b, ldb, ops[i].a, lda, &zero, ops[i].c, s.n) != CUBLAS_STATUS_SUCCESS)
          return Unavailable("cublasSgemm failed");
      }
      return cudaDeviceSynchronize() == cudaSuccess ? Status::Ok() : Unavailable("cuda synchronize failed");
    });
  }
  for (float* p : buffers) cudaFree(p);
  cublasDestroy(handle);
  if (!rate.ok()) return rate.status();
  return Flops(shapes) * *rate / 1e9;
}

int RunGpu(const std::string& preset, const ModelConfig& model, int batch, double seconds) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "bench_trainer --gpu: %s\n", s.ToString().c_str());
    return 1;
  };
  auto data = MakeDataSource(DataOptions{}, 0, 1, 0, 1);
  if (!data.ok()) return fail(data.status());
  auto id = NewNcclUniqueId();
  if (!id.ok()) return fail(id.status());
  auto group = MakeNcclGroup({*id, 0, 1, 0});
  if (!group.ok()) return fail(group.status());
  TrainerOptions opts{model, {}, batch, 1};
  opts.adamw.total_steps = 1'000'000;
  auto trainer = DeviceInnerTrainer::Create(opts, **data, **group, 0);
  if (!trainer.ok()) return fail(trainer.status());
  const auto shapes = StepShapes(model, batch);
  const double step_flops = Flops(shapes);
  auto steps_per_s = Rate(seconds, 1'000'000, [&]() -> Status { return (*trainer)->Step().status(); });
  if (!steps_per_s.ok()) return fail(steps_per_s.status());
  auto cublas = CublasGflops(shapes, seconds);
  if (!cublas.ok()) return fail(cublas.status());
  const size_t n = (*trainer)->model().num_params() + 1;
  auto reduces_per_s = Rate(seconds, 1'000'000, [&]() -> Status {
    return (*group)->AllReduceMean({(*trainer)->model().gradient_and_loss(), n});
  });
  if (!reduces_per_s.ok()) return fail(reduces_per_s.status());
  const double trainer_gflops = step_flops * *steps_per_s / 1e9;
  std::printf("gpu, preset %s: %zu params, batch %d, %.1f MFLOP (GEMM) per inner step\n", preset.c_str(), n - 1,
              batch, step_flops / 1e6);
  std::printf("device trainer inner steps/s  %10.1f\n", *steps_per_s);
  std::printf("device trainer GFLOP/s        %10.2f\n", trainer_gflops);
  std::printf("cublasSgemm GFLOP/s           %10.2f   (same GEMM shapes, device operands)\n", *cublas);
  std::printf("ratio trainer / cublas        %10.2f   (target >= 0.5)\n", trainer_gflops / *cublas);
  std::printf("nccl all-reduce alone         %10.1f us per call of %zu floats, %.2f GB/s algorithm bandwidth\n",
              1e6 / *reduces_per_s, n, static_cast<double>(n * sizeof(float)) * *reduces_per_s / 1e9);
  std::printf("  its share of an inner step  %10.2f   (one rank: a copy; bus bandwidth needs two GPUs or more)\n",
              *steps_per_s / *reduces_per_s);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_trainer: built-in trainer inner steps/s and GFLOP/s vs. OpenBLAS sgemm"};
  std::string preset = "small";
  int batch = 64;
  double seconds = 5.0;
  app.add_option("--preset", preset, "model preset (tiny, small)");
  app.add_option("--batch", batch, "examples per inner step")->check(CLI::Range(1, 65536));
  app.add_option("--seconds", seconds, "time budget of each measured phase")->check(CLI::Range(0.1, 20.0));
  bool gpu = false;
  app.add_flag("--gpu", gpu, "the device-resident trainer against cublasSgemm (CUDA builds, device 0)");
  CLI11_PARSE(app, argc, argv);

  auto model = ModelPreset(preset);
  if (!model.ok()) {
    std::fprintf(stderr, "bench_trainer: %s\n", model.status().ToString().c_str());
    return 2;
  }
  if (gpu) {
#ifdef LONGHAUL_HAVE_CUDA
    return RunGpu(preset, *model, batch, seconds);
#else
    std::fprintf(stderr, "bench_trainer: --gpu needs a build with CUDA\n");
    return 2;
#endif
  }
  auto data = MakeDataSource(DataOptions{}, 0, 1, 0, 1);
  if (!data.ok()) {
    std::fprintf(stderr, "bench_trainer: %s\n", data.status().ToString().c_str());
    return 2;
  }
  auto group = MakeSingleRankGroup();
  TrainerOptions opts{*model, {}, batch, 1};
  opts.adamw.total_steps = 1'000'000;
  InnerTrainer trainer(opts, **data, *group);  // pins OpenBLAS to 1 thread
  const auto shapes = StepShapes(*model, batch);
  const double step_flops = Flops(shapes);

  for (int i = 0; i < 3; ++i) (void)trainer.Step();  // warm-up
  int steps = 0;
  float loss = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds && steps < 1'000'000) {
    auto r = trainer.Step();
    if (!r.ok()) {
      std::fprintf(stderr, "bench_trainer: %s\n", r.status().ToString().c_str());
      return 1;
    }
    loss = *r;
    ++steps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const double steps_per_s = steps / elapsed;
  const double trainer_gflops = step_flops * steps_per_s / 1e9;
  const double sgemm_gflops = SgemmGflops(shapes, seconds);

  std::printf("preset %s: %zu params, batch %d, context %d, %.1f MFLOP (GEMM) per inner step\n",
              preset.c_str(), trainer.model().num_params(), batch, model->context, step_flops / 1e6);
  std::printf("trainer inner steps/s     %10.1f   (%d steps in %.2f s, last loss %.3f)\n", steps_per_s,
              steps, elapsed, loss);
  std::printf("trainer achieved GFLOP/s  %10.2f\n", trainer_gflops);
  std::printf("cblas_sgemm GFLOP/s       %10.2f   (same GEMM shapes, 1 thread)\n", sgemm_gflops);
  std::printf("ratio trainer / sgemm     %10.2f   (target >= 0.5)\n", trainer_gflops / sgemm_gflops);
  return 0;
}
