// Markov chain entropy rates and the data sources.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "longhaul/trainer/data.h"
#include "longhaul/trainer/markov_chain.h"
#include "support/temp_dir.h"

using namespace longhaul;
using namespace longhaul::trainer;

TEST_CASE("trainer: entropy rate of a hand-made 2-state chain is exact", "[trainer][data]") {
  // Bytes 'a','b': P(a->a)=0.9, P(a->b)=0.1, P(b->a)=0.5, P(b->b)=0.5. Every other
  // byte goes to 'a' (transient). pi(a) = 5/6, pi(b) = 1/6.
  const uint32_t branching = 2;
  std::vector<uint8_t> next(256 * branching);
  std::vector<double> prob(256 * branching);
  for (int s = 0; s < 256; ++s) {
    next[s * 2] = 'a';
    next[s * 2 + 1] = 'b';
    prob[s * 2] = 1.0;
    prob[s * 2 + 1] = 0.0;
  }
  prob['a' * 2] = 0.9;
  prob['a' * 2 + 1] = 0.1;
  prob['b' * 2] = 0.5;
  prob['b' * 2 + 1] = 0.5;
  auto chain = MarkovChain::FromTable(1, branching, next, prob);
  REQUIRE(chain.ok());
  auto rate = chain->EntropyRate();
  REQUIRE(rate.ok());
  const double h01 = -(0.9 * std::log(0.9) + 0.1 * std::log(0.1));
  const double expected = 5.0 / 6.0 * h01 + 1.0 / 6.0 * std::log(2.0);
  CHECK(*rate == Approx(expected).epsilon(1e-10));
}

// Order 2 (65536 states) is exercised in training_test.cpp: too slow for a sanitizer build.
TEST_CASE("trainer: random chains: valid distributions, entropy below log(branching)", "[trainer][data]") {
  for (uint32_t order : {1u}) {
    auto chain = MarkovChain::Random(5, order, 4);
    REQUIRE(chain.ok());
    auto pi = chain->Stationary();
    REQUIRE(pi.ok());
    double total = 0;
    for (double p : *pi) total += p;
    CHECK(total == Approx(1.0).epsilon(1e-9));
    auto rate = chain->EntropyRate();
    REQUIRE(rate.ok());
    CHECK(*rate > 0.1);
    CHECK(*rate < std::log(4.0));
  }
  CHECK(MarkovChain::Random(1, 3, 4).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("trainer: empirical cross-entropy of the true chain matches the entropy rate", "[trainer][data]") {
  // Sampled bytes, scored with the chain's own probabilities, average to the rate.
  auto chain = MarkovChain::Random(9, 1, 4);
  REQUIRE(chain.ok());
  const double rate = *chain->EntropyRate();
  DataOptions opts;
  opts.seed = 9;
  auto source = MakeDataSource(opts, 0, 1, 0, 1);
  REQUIRE(source.ok());
  CHECK((*source)->LossFloor() == Approx(rate).epsilon(1e-12));
  // Frequencies of successor bytes per state from the stream estimate the entropy.
  std::vector<std::vector<double>> counts(256, std::vector<double>(256, 0));
  for (int i = 0; i < 50; ++i) {
    Batch b = (*source)->NextTrain(1000, 1);
    for (int k = 0; k < b.batch_size; ++k) counts[b.inputs[k]][b.targets[k]] += 1;
  }
  double total = 0, ce = 0;
  for (auto& row : counts) {
    double n = 0;
    for (double c : row) n += c;
    for (double c : row)
      if (c > 0) ce -= c * std::log(c / n);
    total += n;
  }
  CHECK(ce / total == Approx(rate).margin(0.05));
}

TEST_CASE("trainer: validation batches are identical across regions, training streams differ", "[trainer][data]") {
  DataOptions opts;
  opts.non_iid = true;
  auto r0 = MakeDataSource(opts, 0, 3, 0, 2);
  auto r1 = MakeDataSource(opts, 1, 3, 1, 2);
  REQUIRE(r0.ok());
  REQUIRE(r1.ok());
  Batch v0 = (*r0)->Validation(8, 8, 3), v1 = (*r1)->Validation(8, 8, 3);
  CHECK(v0.inputs == v1.inputs);
  CHECK(v0.targets == v1.targets);
  CHECK((*r0)->Validation(8, 8, 4).inputs != v0.inputs);
  CHECK((*r0)->NextTrain(8, 8).inputs != (*r1)->NextTrain(8, 8).inputs);
  CHECK((*r0)->LossFloor() == (*r1)->LossFloor());
  // Consecutive training examples slide over one stream: the next input window ends
  // with the previous target.
  Batch t = (*r0)->NextTrain(4, 8);
  for (int i = 1; i < 4; ++i) CHECK(t.inputs[i * 8 + 7] == t.targets[i - 1]);
}

TEST_CASE("trainer: bad data options and missing files give clear errors", "[trainer][data]") {
  DataOptions text;
  text.kind = "text";
  text.text_path = "/nonexistent/corpus.txt";
  auto missing = MakeDataSource(text, 0, 1, 0, 1);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/corpus.txt") != std::string::npos);
  DataOptions bad;
  bad.kind = "images";
  CHECK(MakeDataSource(bad, 0, 1, 0, 1).status().message().find("kind") != std::string::npos);
  bad = DataOptions{};
  bad.order = 3;
  CHECK(MakeDataSource(bad, 0, 1, 0, 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(MakeDataSource(DataOptions{}, 2, 2, 0, 1).status().code() == StatusCode::kInvalidArgument);
  ModelConfig model;
  model.context = 1;
  DataOptions order2;
  order2.order = 2;
  CHECK(CheckModelCoversData(model, order2).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("trainer: text source splits by byte ranges and holds out the tail", "[trainer][data]") {
  const longhaul::testing::TempDir tmp("text");
  const auto path = tmp / "text.txt";
  std::string content;
  for (int i = 0; i < 1000; ++i) content.push_back(static_cast<char>('A' + (i / 100)));  // A..J blocks
  std::ofstream(path, std::ios::binary) << content;
  DataOptions opts;
  opts.kind = "text";
  opts.text_path = path.string();
  opts.validation_fraction = 0.1;  // bytes 900..999 ('J') are validation
  auto r0 = MakeDataSource(opts, 0, 2, 0, 1);  // bytes [0, 450)
  auto r1 = MakeDataSource(opts, 1, 2, 0, 1);  // bytes [450, 900)
  REQUIRE(r0.ok());
  REQUIRE(r1.ok());
  std::set<uint8_t> t0, t1;
  for (int i = 0; i < 10; ++i) {
    for (uint8_t b : (*r0)->NextTrain(50, 4).targets) t0.insert(b);
    for (uint8_t b : (*r1)->NextTrain(50, 4).targets) t1.insert(b);
  }
  CHECK(*t0.rbegin() <= 'E');
  CHECK(*t1.begin() >= 'E');
  CHECK(t0.count('J') == 0);
  CHECK(t1.count('J') == 0);
  Batch v = (*r0)->Validation(16, 4, 0);
  for (uint8_t b : v.targets) CHECK(b == 'J');
  CHECK(v.targets == (*r1)->Validation(16, 4, 0).targets);
  CHECK((*r0)->LossFloor() == 0.0);
}

namespace {
// Total-variation distance between the empirical next-byte distributions of two
// streams, averaged over previous bytes (order-1 statistics).
double TransitionDistance(DataSource& x, DataSource& y, int samples) {
  std::vector<std::vector<double>> cx(256, std::vector<double>(256)), cy = cx;
  for (int done = 0; done < samples; done += 1000) {
    Batch bx = x.NextTrain(1000, 1), by = y.NextTrain(1000, 1);
    for (int k = 0; k < 1000; ++k) {
      cx[bx.inputs[k]][bx.targets[k]] += 1;
      cy[by.inputs[k]][by.targets[k]] += 1;
    }
  }
  double tv = 0, weight = 0;
  for (int s = 0; s < 256; ++s) {
    double nx = 0, ny = 0, d = 0;
    for (int t = 0; t < 256; ++t) nx += cx[s][t], ny += cy[s][t];
    if (nx < 20 || ny < 20) continue;
    for (int t = 0; t < 256; ++t) d += std::abs(cx[s][t] / nx - cy[s][t] / ny);
    tv += 0.5 * d * (nx + ny);
    weight += nx + ny;
  }
  return tv / weight;
}
}  // namespace

TEST_CASE("trainer: non-IID regions draw from measurably different chains", "[trainer][data]") {
  DataOptions iid;
  DataOptions skewed;
  skewed.non_iid = true;
  skewed.non_iid_strength = 1.5;
  auto a = MakeDataSource(iid, 0, 2, 0, 1), b = MakeDataSource(iid, 1, 2, 0, 1);
  auto c = MakeDataSource(skewed, 0, 2, 0, 1), d = MakeDataSource(skewed, 1, 2, 0, 1);
  REQUIRE((a.ok() && b.ok() && c.ok() && d.ok()));
  const double same = TransitionDistance(**a, **b, 60000);
  const double different = TransitionDistance(**c, **d, 60000);
  INFO("IID distance " << same << ", non-IID distance " << different);
  CHECK(different > 2.0 * same);
  CHECK((*c)->LossFloor() == (*a)->LossFloor());  // validation (and floor) stay global
}
