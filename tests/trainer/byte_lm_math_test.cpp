// The per-element arithmetic the CUDA kernels share with the CPU model and
// AdamW (byte_lm_math.h), checked on the CPU against independent computations:
// what a GPU run would otherwise be the first to find wrong.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "longhaul/trainer/byte_lm_math.h"
#include "longhaul/trainer/optimizer.h"

using namespace longhaul::trainer;

TEST_CASE("byte lm math: embedding elements read the last C bytes of each example", "[trainer][math]") {
  const int B = 3, batch_context = 5, C = 3, E = 4;
  std::vector<float> embed(256 * E);
  for (int v = 0; v < 256; ++v)
    for (int e = 0; e < E; ++e) embed[v * E + e] = static_cast<float>(v * 100 + e);
  std::vector<uint8_t> inputs(B * batch_context);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < batch_context; ++c) inputs[b * batch_context + c] = static_cast<uint8_t>(b * 10 + c);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < C * E; ++j) {
      // Position j / E of the model's context is batch position 2 + j / E.
      const int byte = b * 10 + (batch_context - C) + j / E;
      CHECK(math::EmbedElement(embed.data(), inputs.data(), batch_context, C, E, b, j) ==
            static_cast<float>(byte * 100 + j % E));
    }
}

TEST_CASE("byte lm math: embedding gradient elements equal a scatter-add bit for bit", "[trainer][math]") {
  const int B = 7, batch_context = 6, C = 4, E = 5;
  std::vector<uint8_t> inputs(B * batch_context);
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = static_cast<uint8_t>((i * 7) % 5 + 250);  // repeats
  std::vector<float> delta(static_cast<size_t>(B) * C * E);
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = std::sin(static_cast<float>(i) * 0.37f) * 1e-3f;
  // The CPU model's scatter: examples, then positions, then columns, in order.
  std::vector<float> scattered(256 * E, 0.0f);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int e = 0; e < E; ++e)
        scattered[inputs[b * batch_context + batch_context - C + c] * E + e] += delta[(b * C + c) * E + e];
  int touched = 0;
  for (int v = 0; v < 256; ++v)
    for (int e = 0; e < E; ++e) {
      const float g = math::EmbedGradElement(delta.data(), inputs.data(), B, batch_context, C, E, v, e);
      CHECK(g == scattered[v * E + e]);
      touched += g != 0.0f;
    }
  CHECK(touched == 5 * E);  // the five bytes used, every column
}

TEST_CASE("byte lm math: column sums add the rows in order", "[trainer][math]") {
  const int rows = 9, cols = 4;
  std::vector<float> m(rows * cols);
  for (size_t i = 0; i < m.size(); ++i) m[i] = 1.0f / static_cast<float>(i + 3);
  for (int c = 0; c < cols; ++c) {
    float expect = 0.0f;
    for (int r = 0; r < rows; ++r) expect += m[r * cols + c];
    CHECK(math::ColumnSum(m.data(), rows, cols, c) == expect);
  }
}

TEST_CASE("byte lm math: GELU and its derivative match x Phi(x) computed in double", "[trainer][math]") {
  for (double x = -6.0; x <= 6.0; x += 0.125) {
    float grad = 0;
    const float y = math::Gelu(static_cast<float>(x), &grad);
    const double phi_cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
    const double dgelu = phi_cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    CHECK(y == Approx(x * phi_cdf).margin(1e-6));
    CHECK(grad == Approx(dgelu).margin(1e-6));
    CHECK(math::Gelu(static_cast<float>(x), nullptr) == y);
  }
}

TEST_CASE("byte lm math: AdamW updates follow the textbook rule computed in double", "[trainer][math]") {
  AdamWOptions o;
  o.lr = 1e-2f;
  o.warmup_steps = 2;
  o.total_steps = 10;
  float p = 0.5f, m = 0.0f, v = 0.0f;
  double pd = 0.5, md = 0.0, vd = 0.0;
  const float grads[] = {0.3f, -0.1f, 0.05f, 0.2f};
  for (int t = 1; t <= 4; ++t) {
    const float g = grads[t - 1];
    math::AdamWUpdate(p, g, m, v, AdamWStepScalars(o, t));
    const double lr = AdamWLr(o, t);
    md = o.beta1 * md + (1 - o.beta1) * double(g);
    vd = o.beta2 * vd + (1 - o.beta2) * double(g) * g;
    const double m_hat = md / (1 - std::pow(double(o.beta1), t)), v_hat = vd / (1 - std::pow(double(o.beta2), t));
    pd = pd * (1 - lr * o.weight_decay) - lr * m_hat / (std::sqrt(v_hat) + o.eps);
    CHECK(p == Approx(pd).epsilon(1e-5));
    CHECK(m == Approx(md).epsilon(1e-5));
  }
  CHECK(AdamWLr(o, 1) == Approx(o.lr / 2));
}
