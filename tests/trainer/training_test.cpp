// Training for real: the tiny model approaches the synthetic source's loss floor.
#include <catch2/catch.hpp>

#include <cmath>

#include "longhaul/trainer/data.h"
#include "longhaul/trainer/markov_chain.h"
#include "longhaul/trainer/trainer.h"

using namespace longhaul;
using namespace longhaul::trainer;

TEST_CASE("trainer: tiny model trained on the Markov source approaches the entropy floor", "[trainer][integration]") {
  DataOptions data;
  data.seed = 3;
  auto source = MakeDataSource(data, 0, 1, 0, 1);
  REQUIRE(source.ok());
  const double floor = (*source)->LossFloor();
  auto group = MakeSingleRankGroup();
  TrainerOptions opts{*ModelPreset("tiny"), {}, 128, 1};
  opts.adamw.lr = 2e-2f;
  opts.adamw.total_steps = 2000;
  opts.adamw.warmup_steps = 50;
  opts.adamw.weight_decay = 0.0f;
  REQUIRE(CheckModelCoversData(opts.model, data).ok());
  InnerTrainer trainer(opts, **source, *group);
  const float initial = trainer.ValidationLoss(trainer.model().params(), 64);
  for (uint64_t i = 0; i < opts.adamw.total_steps; ++i) REQUIRE(trainer.Step().ok());
  const float final_loss = trainer.ValidationLoss(trainer.model().params(), 64);
  INFO("initial " << initial << " final " << final_loss << " floor " << floor);
  CHECK(final_loss < floor + 0.15);
  CHECK(final_loss > floor - 0.1);  // cannot beat the entropy rate (up to sampling noise)
}

TEST_CASE("trainer: order-2 chains: a proper stationary distribution and a bounded entropy rate", "[trainer][integration]") {
  auto chain = MarkovChain::Random(5, 2, 4);
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
  DataOptions data;
  data.order = 2;
  data.seed = 5;
  auto source = MakeDataSource(data, 0, 1, 0, 1);
  REQUIRE(source.ok());
  CHECK((*source)->LossFloor() == Approx(*rate).epsilon(1e-12));
}
