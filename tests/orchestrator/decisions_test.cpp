// Membership, round and scheduling decisions: pure functions, ManualClock.
#include <catch2/catch.hpp>

#include "longhaul/common/clock.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/orchestrator/membership.h"
#include "longhaul/orchestrator/round_coordinator.h"
#include "longhaul/orchestrator/round_plan.h"
#include "longhaul/orchestrator/scheduler.h"

using namespace longhaul;
using namespace longhaul::orchestrator;
using namespace std::chrono_literals;

TEST_CASE("placement needs enough healthy free regions and says why not", "[membership]") {
  v1::JobSpec spec = DefaultJobSpec();  // 3 regions
  std::vector<RegionHealth> regions = {{"ap-south", true, true, 0, 4, "", ""},
                                       {"eu-west", false, true, 6, 4, "", ""},
                                       {"us-east", true, true, 0, 4, "job-000001", ""}};
  JobPlacement p = PlaceJob(spec, regions);
  CHECK_FALSE(p.ok);
  CHECK_THAT(p.reason, Catch::Contains("need 3 regions, have 1") && Catch::Contains("eu-west missed 6 heartbeats") &&
                           Catch::Contains("us-east is busy with job-000001"));
  regions[1].up = true;
  regions[2].busy_with.clear();
  p = PlaceJob(spec, regions);
  REQUIRE(p.ok);
  CHECK(p.regions == std::vector<std::string>{"ap-south", "eu-west", "us-east"});
  spec.add_regions("eu-west");
  spec.add_regions("mars");
  spec.set_region_count(2);
  p = PlaceJob(spec, regions);
  CHECK_FALSE(p.ok);
  CHECK_THAT(p.reason, Catch::Contains("mars has not registered"));
}

TEST_CASE("round membership: survivors, joiners and the minimum", "[membership]") {
  std::vector<JobMemberView> m = {{"a", true, true, true, 0, ""}, {"b", false, false, false, 7, ""},
                                  {"c", true, true, false, 0, ""}};
  RoundMembership r = PlanRoundMembership(m, 2);
  REQUIRE(r.ok);
  CHECK(r.participants == std::vector<std::string>{"a", "c"});
  CHECK(r.joining == std::vector<std::string>{"c"});
  CHECK(r.bootstrap_region == "a");
  CHECK_THAT(r.reason, Catch::Contains("b is down (missed 7 heartbeats)"));
  r = PlanRoundMembership(m, 3);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("need 3 regions, have 2 ready"));
  m[0].holds_state = false;
  r = PlanRoundMembership(m, 2);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.reason, Catch::Contains("no ready region holds"));
}

TEST_CASE("start parameters: a ready region whose hash differs from the first ready region's is named",
          "[membership]") {
  const std::string h1 = "00000000000000a1", h2 = "00000000000000b2";
  // a is down: b, the first ready region, is the reference.
  std::vector<JobMemberView> m = {{"a", false, false, true, 5, "", h2}, {"b", true, true, true, 0, "", h1},
                                  {"c", true, true, true, 0, "", h2}, {"d", true, true, true, 0, "", h1}};
  StartParameters s = CompareStartParameters(m);
  CHECK(s.differing == std::vector<std::string>{"c"});
  CHECK_THAT(s.reason, Catch::Contains("b from " + h1) && Catch::Contains("c from " + h2) &&
                           Catch::Contains("c receives b's at round 1"));
  // Then the round plan bootstraps c from b.
  m[2].holds_state = false;
  RoundMembership r = PlanRoundMembership(m, 2);
  REQUIRE(r.ok);
  CHECK(r.joining == std::vector<std::string>{"c"});
  CHECK(r.bootstrap_region == "b");
  m[2].holds_state = true;

  // Everyone agrees: nothing to say. A region not ready yet is not compared.
  m[2].start_hash = h1;
  m[3].ready = false;
  m[3].start_hash = h2;
  s = CompareStartParameters(m);
  CHECK(s.differing.empty());
  CHECK(s.reason.empty());
  // Two differ from the reference.
  m[2].start_hash = m[3].start_hash = h2;
  m[3].ready = true;
  s = CompareStartParameters(m);
  CHECK(s.differing == std::vector<std::string>{"c", "d"});
  CHECK_THAT(s.reason, Catch::Contains("c, d receive b's"));
  // Hashes not trusted (round 1 failed on disagreeing hashes): every other holder differs.
  m[2].start_hash = m[3].start_hash = h1;
  s = CompareStartParameters(m, false);
  CHECK(s.differing == std::vector<std::string>{"c", "d"});
  CHECK_THAT(s.reason, Catch::Contains("not trusted"));
  // A ready region that reported no hash (an older agent): nothing is compared.
  m[3].start_hash.clear();
  CHECK(CompareStartParameters(m).differing.empty());
  CHECK(CompareStartParameters({}).differing.empty());
}

TEST_CASE("start parameters: the reference holds state, and without a holder the first ready region gives the start",
          "[membership]") {
  const std::string h1 = "00000000000000a1", h2 = "00000000000000b2";
  // b joined from a in a round 1 that failed, and a is gone: c, which holds
  // its own start, is the reference; b joins whatever its hash says.
  std::vector<JobMemberView> m = {{"a", false, false, false, 5, "", h1}, {"b", true, true, false, 0, "", h2},
                                  {"c", true, true, true, 0, "", h1}};
  StartParameters s = CompareStartParameters(m);
  CHECK(s.reference == "c");
  CHECK(s.differing.empty());
  // Only b is left: it gives the start.
  m[2].up = false;
  s = CompareStartParameters(m);
  CHECK(s.reference == "b");
  CHECK(s.differing.empty());
}

TEST_CASE("checkpoint source: only when no member holds state, an up member with its own checkpoint not refused",
          "[membership][checkpoint]") {
  std::vector<JobMemberView> m = {{"a", false, false, false, 9, ""}, {"b", true, true, false, 0, ""},
                                  {"c", true, true, false, 0, ""}};
  const std::map<std::string, std::string> ckpt = {{"a", "/c/a"}, {"b", "/c/b"}, {"c", "/c/c"}};
  CHECK(ChooseCheckpointSource(m, ckpt, {}) == "b");          // a is down: its file is on its host
  CHECK(ChooseCheckpointSource(m, ckpt, {"b"}) == "c");       // b's was refused
  CHECK(ChooseCheckpointSource(m, ckpt, {"b", "c"}).empty()); // none left
  CHECK(ChooseCheckpointSource(m, {{"a", "/c/a"}}, {}).empty());  // only a down region has one
  m[2].holds_state = true;
  CHECK(ChooseCheckpointSource(m, ckpt, {}).empty());  // c holds the state: it bootstraps the others
}

namespace {
RoundAttempt Attempt(const ManualClock& clock) {
  RoundAttempt a;
  a.job_id = "job-000001";
  a.round = 4;
  a.epoch = 7;
  a.participants = {"a", "b", "c"};
  a.started = clock.Now();
  a.deadline = a.started + 10s;
  return a;
}
v1::RoundReport Report(const std::string& region, const std::string& hash, bool ok = true) {
  v1::RoundReport r;
  r.set_job_id("job-000001");
  r.set_round(4);
  r.set_epoch(7);
  r.set_region(region);
  r.set_ok(ok);
  r.set_param_hash(hash);
  r.set_loss(2.0);
  r.set_wan_bytes_sent(100);
  return r;
}
}  // namespace

TEST_CASE("a round commits only when every participant reports the same hash", "[round]") {
  ManualClock clock;
  RoundAttempt a = Attempt(clock);
  a.reports["a"] = Report("a", "h1");
  a.reports["b"] = Report("b", "h1");
  RoundDecision d = DecideRound(a, clock.Now(), {});
  CHECK(d.outcome == RoundOutcome::kWait);
  CHECK(d.waiting_on == std::vector<std::string>{"c"});
  a.reports["c"] = Report("c", "h2");
  d = DecideRound(a, clock.Now(), {});
  CHECK(d.outcome == RoundOutcome::kAbort);
  CHECK(d.kind == "hash_mismatch");
  CHECK_THAT(d.reason, Catch::Contains("h2 from c"));
  a.reports["c"] = Report("c", "h1");
  d = DecideRound(a, clock.Now(), {});
  CHECK(d.outcome == RoundOutcome::kCommit);
  CHECK(d.param_hash == "h1");
  CommittedRound c = SummarizeCommit(a, d.param_hash, 1.0);
  CHECK(c.wan_bytes == 300);
  CHECK(c.loss == Approx(2.0));
}

TEST_CASE("a local-only round commits without comparing hashes, after every report", "[round]") {
  ManualClock clock;
  RoundAttempt a = Attempt(clock);
  a.replicas_identical = false;
  a.reports["a"] = Report("a", "h1");
  a.reports["b"] = Report("b", "h2");
  CHECK(DecideRound(a, clock.Now(), {}).outcome == RoundOutcome::kWait);
  a.reports["c"] = Report("c", "h3");
  RoundDecision d = DecideRound(a, clock.Now(), {});
  CHECK(d.outcome == RoundOutcome::kCommit);
  CHECK_THAT(d.reason, Catch::Contains("not compared"));
}

TEST_CASE("a down participant or a passed deadline aborts the round and names who", "[round]") {
  ManualClock clock;
  RoundAttempt a = Attempt(clock);
  a.reports["a"] = Report("a", "h1");
  RoundDecision d = DecideRound(a, clock.Now(), {"b"});
  CHECK(d.outcome == RoundOutcome::kAbort);
  CHECK(d.kind == "region_down");
  CHECK(d.excluded == std::vector<std::string>{"b"});
  clock.Advance(9s);
  d = DecideRound(a, clock.Now(), {});
  CHECK(d.outcome == RoundOutcome::kWait);
  CHECK_THAT(d.reason, Catch::Contains("waiting for b, c (9 s)"));
  clock.Advance(2s);
  d = DecideRound(a, clock.Now(), {});
  CHECK(d.outcome == RoundOutcome::kAbort);
  CHECK(d.kind == "deadline");
  CHECK(d.excluded == std::vector<std::string>{"b", "c"});
  a.reports["b"] = Report("b", "", false);
  a.reports["b"].mutable_error()->set_message("peer c timed out");
  d = DecideRound(a, clock.Now(), {});
  CHECK(d.kind == "report_failed");
  CHECK_THAT(d.reason, Catch::Contains("peer c timed out"));
  CHECK(d.excluded.empty());  // b stays: its peer failed, not b
  a.reports["b"].mutable_error()->set_code(v1::ERROR_CODE_NOT_FOUND);  // b lost the job
  d = DecideRound(a, clock.Now(), {});
  CHECK(d.excluded == std::vector<std::string>{"b"});
}

TEST_CASE("reports from another epoch, round, job or region are refused", "[round]") {
  ManualClock clock;
  RoundAttempt a = Attempt(clock);
  auto r = Report("a", "h");
  CHECK(AcceptReport(a, r).ok());
  r.set_epoch(6);
  CHECK(AcceptReport(a, r).code() == StatusCode::kAborted);
  r = Report("a", "h");
  r.set_round(3);
  CHECK_FALSE(AcceptReport(a, r).ok());
  r = Report("z", "h");
  CHECK_THAT(AcceptReport(a, r).message(), Catch::Contains("not a participant"));
  r = Report("a", "h");
  r.set_job_id("job-000002");
  CHECK_FALSE(AcceptReport(a, r).ok());
  a.reports["a"] = Report("a", "h");
  CHECK(AcceptReport(a, Report("a", "h")).code() == StatusCode::kAlreadyExists);
  CHECK_FALSE(AcceptReport(a, Report("b", "")).ok());
}

namespace {
// The scheduler's prediction over a ring of m equal links.
double Comm(int m, const RoundShape& shape, double bytes_per_second, double rtt) {
  return PredictRoundCommSeconds(
      shape, {.regions = static_cast<uint32_t>(m), .bandwidth_bps = bytes_per_second * 8, .rtt_seconds = rtt});
}
}  // namespace

TEST_CASE("the scheduler predicts each kind's WAN wait per round", "[scheduler]") {
  using longhaul::sync_policies::SyncKind;
  const double ring = 2.0 * 2 / 3 * 3 + 2 * 0.1;  // 3 MB over 3 regions at 1 MB/s, 2 round trips of 100 ms
  RoundShape diloco{.payload_bytes = 3'000'000, .kind = SyncKind::kDiLoCo, .inner_steps = 50};
  CHECK(Comm(3, diloco, 1e6, 0.1) == Approx(ring));
  diloco.step_seconds = 1;  // the exchange follows the round's last step: nothing hides it
  CHECK(Comm(3, diloco, 1e6, 0.1) == Approx(ring));
  // Synchronous data parallelism: one all-reduce after each of the H steps.
  const RoundShape sync{.payload_bytes = 3'000'000, .kind = SyncKind::kSync, .inner_steps = 50};
  CHECK(Comm(3, sync, 1e6, 0.1) == Approx(50 * ring));
  // Streaming DiLoCo: P fragments of S/P, each hidden by tau steps of measured compute.
  RoundShape streaming{.payload_bytes = 3'000'000, .kind = SyncKind::kStreamingDiLoCo, .inner_steps = 50,
                       .fragments = 5, .overlap_steps = 0};
  const double fragment = ring / 5 + 0.8 * 0.2;  // a fifth of the bytes, the same round trips
  CHECK(Comm(3, streaming, 1e6, 0.1) == Approx(5 * fragment));
  streaming.overlap_steps = 2;
  streaming.step_seconds = 1;
  // Two steps hide each fragment, but the last one, sent at the round's last
  // step, must land before the round ends.
  CHECK(Comm(3, streaming, 1e6, 0.1) == Approx(fragment));
  streaming.inner_steps = 52;  // fragments at steps 10, 20, 31, 41, 52
  CHECK(Comm(3, streaming, 1e6, 0.1) == Approx(fragment));
  // Uneven regions: the fastest waits for the slowest at the exchanges, H x
  // the difference per round, overlap or not; the slowest's steps hide the WAN.
  RoundShape uneven = streaming;
  uneven.step_seconds = 1.0;
  uneven.fastest_step_seconds = 0.8;
  CHECK(Comm(3, uneven, 1e6, 0.1) == Approx(fragment + 52 * 0.2));
  diloco.fastest_step_seconds = 0.5;
  CHECK(Comm(3, diloco, 1e6, 0.1) == Approx(ring + 50 * 0.5));
  CHECK(Comm(3, {.payload_bytes = 3'000'000, .kind = SyncKind::kLocal}, 1e6, 0.1) == 0);
  CHECK(Comm(1, diloco, 1e6, 0.1) == 0);
  CHECK(Comm(3, {.kind = SyncKind::kDiLoCo}, 1e6, 0.1) == 0);  // payload not known yet
}

TEST_CASE("the scheduler sizes connections from the BDP and predicts the round on the chosen ring", "[scheduler]") {
  ScheduleOptions o;
  o.bytes_in_flight_per_connection = 1e6;
  CHECK(ConnectionsForLink(25e6, 0.1, o) == 3);   // 2.5 MB in flight
  CHECK(ConnectionsForLink(1e9, 1.0, o) == 8);    // capped
  CHECK(ConnectionsForLink(0, 0.1, o) == 1);
  LinkTable links;
  // a<->b fast, b<->c fast, a<->c slow: the ring must avoid... every 3-ring uses all
  // three pairs, so the bottleneck is the slow link either way.
  for (auto [x, y, bw] : {std::tuple{"a", "b", 100e6}, {"b", "c", 100e6}, {"a", "c", 10e6}}) {
    links.SetLink(x, y, {bw, 0.04});
    links.SetLink(y, x, {bw, 0.04});
  }
  const RoundShape shape{.payload_bytes = 3'000'000, .inner_steps = 20};
  auto s = PlanRound({"a", "b", "c"}, links, shape, o);
  REQUIRE(s.ok());
  CHECK(s->ring.size() == 3);
  CHECK(s->bottleneck_bytes_per_second == Approx(10e6));
  // Each of the 4 hops moves 1 MB: the slow link sends its four back to back
  // (0.4 s) while the fast ones keep it fed; its last hop lands 20 ms later.
  // Counting the worst RTT on every hop, as for a ring of slow links, would say 0.48 s.
  CHECK(s->predicted_comm_seconds == Approx(4 * 0.1 + 0.02));
  CHECK(Comm(3, shape, 10e6, 0.04) == Approx(2.0 * 2 / 3 * 3e6 / 10e6 + 2 * 0.04));
  CHECK_THAT(s->reason, Catch::Contains("predicted"));
  // Only regions' exchange rates known: their latency is in the rate, not added again.
  LinkTable rates;
  rates.SetRegionRate("a", 10e6);
  rates.SetRegionRate("b", 5e6);
  rates.SetRegionRate("c", 20e6);
  for (auto [x, y] : {std::pair{"a", "b"}, {"b", "c"}, {"a", "c"}}) {
    rates.SetLink(x, y, {0, 0.04});  // RTT samples only (small messages measure no bandwidth)
    rates.SetLink(y, x, {0, 0.04});
  }
  auto r = PlanRound({"a", "b", "c"}, rates, shape, o);
  REQUIRE(r.ok());
  CHECK(r->rate_includes_latency);
  CHECK(r->bottleneck_bytes_per_second == Approx(5e6));
  CHECK(r->predicted_comm_seconds == Approx(2.0 * 2 / 3 * 3e6 / 5e6));
  CHECK_THAT(r->reason, Catch::Contains("latency included"));
  CHECK_FALSE(s->rate_includes_latency);
  // The ring keeps to measured links: regions' exchange rates (huge when
  // overlap hides the exchange) do not turn it onto unmeasured directions.
  LinkTable oriented;
  for (const char* x : {"a", "b", "c"}) oriented.SetRegionRate(x, 1e9);
  oriented.SetLink("a", "b", {5e6, 0.04});
  oriented.SetLink("b", "c", {6e6, 0.04});
  oriented.SetLink("c", "a", {7e6, 0.04});
  auto kept = PlanRound({"a", "c", "b"}, oriented, shape, o);
  REQUIRE(kept.ok());
  CHECK_FALSE(kept->rate_includes_latency);
  CHECK(kept->bottleneck_bytes_per_second == Approx(5e6));
  // A later report with only a round trip keeps the bandwidth measured before.
  rates.SetLink("a", "b", {7e6, 0.04});
  rates.SetLink("a", "b", {0, 0.05});
  CHECK(rates.Get("a", "b").bytes_per_second == Approx(7e6));
  CHECK(rates.Get("a", "b").rtt_seconds == Approx(0.05));
  CHECK_FALSE(rates.Get("a", "b").rate_includes_latency);
  rates.SetLink("a", "b", {6e6, 0});  // and one with only a bandwidth keeps the round trip
  CHECK(rates.Get("a", "b").bytes_per_second == Approx(6e6));
  CHECK(rates.Get("a", "b").rtt_seconds == Approx(0.05));
  LinkTable empty;
  auto u = PlanRound({"a", "b"}, empty, RoundShape{}, o);
  REQUIRE(u.ok());
  CHECK(u->predicted_comm_seconds == 0);
  CHECK(u->ring == std::vector<std::string>{"a", "b"});
}

TEST_CASE("the ring avoids a slow link when a four-region ring can", "[scheduler]") {
  LinkTable links;
  const char* names[] = {"a", "b", "c", "d"};
  for (auto* x : names)
    for (auto* y : names)
      if (std::string(x) != y) links.SetLink(x, y, {50e6, 0.02});
  links.SetLink("a", "b", {1e6, 0.02});
  links.SetLink("b", "a", {1e6, 0.02});
  auto s = PlanRound({"a", "b", "c", "d"}, links, RoundShape{.payload_bytes = 1'000'000});
  REQUIRE(s.ok());
  CHECK(s->bottleneck_bytes_per_second == Approx(50e6));
}

namespace {

v1::JobSpec AdaptiveSpec(double target) {
  v1::JobSpec spec = DefaultJobSpec();
  auto* a = spec.mutable_sync()->mutable_adaptive();
  a->set_target_utilisation(target);
  a->set_max_inner_steps(spec.sync().inner_steps() * 16);
  a->add_codecs(v1::CODEC_INT8_BLOCK);
  a->add_codecs(v1::CODEC_INT4_BLOCK);
  return spec;
}

RoundShape MeasuredShape(const v1::JobSpec& spec, double slowest, double fastest) {
  return {.payload_bytes = 1'000'000,
          .kind = sync_policies::SyncKind::kDiLoCo,
          .inner_steps = spec.sync().inner_steps(),
          .step_seconds = slowest,
          .fastest_step_seconds = fastest};
}

}  // namespace

TEST_CASE("round plan: the fastest region's wait for the slowest counts, and larger H cannot hide it",
          "[scheduler][replan]") {
  const v1::JobSpec spec = AdaptiveSpec(0.6);
  const sync_policies::WanProfile wan{.regions = 3, .bandwidth_bps = 8e6, .rtt_seconds = 0.02};  // 1 MB/s
  // Even regions, 10 ms steps: a 1 MB int8 exchange stalls H=20 far below 60%;
  // a larger H and int4 reach it.
  ChosenRoundPlan even = ChooseRoundPlan({.spec = &spec, .shape = MeasuredShape(spec, 0.01, 0.01), .wan = wan});
  CHECK(even.changed);
  CHECK(even.plan.predicted_cu() >= 0.6);
  auto check = PredictPlannedRound(MeasuredShape(spec, 0.01, 0.01), spec, wan, even.plan);
  REQUIRE(check.ok());
  CHECK(check->cu == Approx(even.plan.predicted_cu()));
  // One region twice as slow: the others wait H x 10 ms per round whatever the
  // WAN does, so no H brings the fastest past 50%.
  ChosenRoundPlan uneven = ChooseRoundPlan({.spec = &spec, .shape = MeasuredShape(spec, 0.02, 0.01), .wan = wan});
  CHECK(uneven.plan.predicted_cu() < 0.5);
  CHECK(uneven.plan.inner_steps() == spec.sync().adaptive().max_inner_steps());
  CHECK_THAT(uneven.plan.reason(), Catch::Contains("no plan within the bounds meets it"));
}

TEST_CASE("round plan: a round's payload follows its codec, and the spec's plan stays until something is measured",
          "[scheduler][replan]") {
  const v1::JobSpec spec = AdaptiveSpec(0.6);
  // int4 blocks of 256: 4 + 32/256 bits per value against int8's 8 + 32/256.
  CHECK(ConvertPayloadBytes(spec, 8125, v1::CODEC_INT8_BLOCK, v1::CODEC_INT4_BLOCK) == 4125);
  CHECK(ConvertPayloadBytes(spec, 4125, v1::CODEC_INT4_BLOCK, v1::CODEC_INT8_BLOCK) == 8125);
  ChosenRoundPlan first = ChooseRoundPlan({.spec = &spec, .first_step = 0, .shape = MeasuredShape(spec, 0, 0)});
  CHECK_FALSE(first.changed);
  CHECK(first.plan.inner_steps() == spec.sync().inner_steps());
  CHECK(first.plan.codec() == spec.compression().codec());
  CHECK_THAT(first.plan.reason(), Catch::Contains("no measured links and step times to re-plan from yet"));
}

TEST_CASE("round plan: a last round that waited far longer than the measured links predict scales the waits",
          "[scheduler][replan]") {
  const v1::JobSpec spec = AdaptiveSpec(0.6);
  const sync_policies::WanProfile wan{.regions = 3, .bandwidth_bps = 8e8, .rtt_seconds = 0.005};  // 100 MB/s
  const RoundShape shape = MeasuredShape(spec, 0.01, 0.01);
  // The spec's plan meets the target on these links...
  v1::RoundPlan spec_plan;
  spec_plan.set_inner_steps(spec.sync().inner_steps());
  spec_plan.set_codec(spec.compression().codec());
  const auto predicted = PredictPlannedRound(shape, spec, wan, spec_plan).value();
  REQUIRE(predicted.cu >= 0.65);
  ChosenRoundPlan calm = ChooseRoundPlan({.spec = &spec, .current = spec_plan, .shape = shape, .wan = wan,
                                          .last_comm_seconds = predicted.stall_seconds * 1.2, .last_plan = spec_plan});
  CHECK_FALSE(calm.changed);
  // ...but the last round of it waited 6x the prediction: the links dropped
  // faster than their estimates follow.
  ChosenRoundPlan dropped = ChooseRoundPlan({.spec = &spec, .current = spec_plan, .shape = shape, .wan = wan,
                                             .last_comm_seconds = predicted.stall_seconds * 6, .last_plan = spec_plan});
  CHECK(dropped.changed);
  CHECK(dropped.plan.inner_steps() * 100 + dropped.plan.codec() > spec_plan.inner_steps() * 100 + spec_plan.codec());
  CHECK(dropped.plan.predicted_cu() >= 0.6);
  CHECK_THAT(dropped.plan.reason(), Catch::Contains("where the measured links predict") && Catch::Contains("waits x6.0"));
  // The wait is held against the plan the last committed round ran, not the
  // current one: a round of int4 that waited as the prediction says for it is
  // no reason to scale anything.
  v1::RoundPlan int4 = spec_plan;
  int4.set_codec(v1::CODEC_INT4_BLOCK);
  const auto int4_predicted = PredictPlannedRound(shape, spec, wan, int4).value();
  ChosenRoundPlan retried = ChooseRoundPlan({.spec = &spec, .current = spec_plan, .shape = shape, .wan = wan,
                                             .last_comm_seconds = int4_predicted.stall_seconds, .last_plan = int4});
  CHECK_THAT(retried.plan.reason(), !Catch::Contains("waits x"));
}

TEST_CASE("round plan: plans predicted past half the round timeout are left out", "[scheduler][replan]") {
  const v1::JobSpec spec = AdaptiveSpec(0.6);
  const sync_policies::WanProfile wan{.regions = 3, .bandwidth_bps = 8e6, .rtt_seconds = 0.02};  // 1 MB/s
  const RoundShape shape = MeasuredShape(spec, 0.01, 0.01);
  ChosenRoundPlan free = ChooseRoundPlan({.spec = &spec, .shape = shape, .wan = wan});
  REQUIRE(free.changed);
  const double round = PredictPlannedRound(shape, spec, wan, free.plan).value().round_seconds;
  // A timeout under twice that round rules the plan out: a shorter one is chosen.
  ChosenRoundPlan bounded = ChooseRoundPlan({.spec = &spec, .shape = shape, .wan = wan,
                                             .round_timeout_seconds = 1.5 * round});
  CHECK(bounded.plan.inner_steps() < free.plan.inner_steps());
  CHECK(PredictPlannedRound(shape, spec, wan, bounded.plan).value().round_seconds <= 0.75 * round);
  // None fits: the plan stays, saying why.
  ChosenRoundPlan none = ChooseRoundPlan({.spec = &spec, .shape = shape, .wan = wan, .round_timeout_seconds = 1e-3});
  CHECK_FALSE(none.changed);
  CHECK_THAT(none.plan.reason(), Catch::Contains("more than half the round timeout"));
}
