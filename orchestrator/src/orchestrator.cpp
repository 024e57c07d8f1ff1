// Orchestrator: construction, restore after restart, message dispatch, and the
// region and CLI requests that do not belong to one job phase.
#include "longhaul/proto/job_defaults.h"
#include "longhaul/orchestrator/orchestrator.h"

#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "job_index.h"
#include "job_runtime.h"
#include "job_spec_limits.h"
#include "longhaul/orchestrator/authorization.h"
#include "longhaul/orchestrator/request_limits.h"
#include "longhaul/orchestrator/job_spec.h"
#include "longhaul/proto/frame.h"
#include "longhaul/proto/wire_links.h"
#include "longhaul/proto/wire_timeouts.h"

namespace longhaul::orchestrator {

Orchestrator::Orchestrator(StateStore* store, const Clock& clock, OrchestratorOptions options,
                           OrchestratorMetrics* metrics, SendFn send)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      metrics_(metrics),
      send_(std::move(send)),
      registry_(clock, options_.timeouts),
      index_(std::make_unique<JobIndex>()),
      started_at_(clock.Now()) {}

Orchestrator::~Orchestrator() = default;

Result<std::unique_ptr<Orchestrator>> Orchestrator::Create(StateStore* store, const Clock& clock,
                                                           OrchestratorOptions options, OrchestratorMetrics* metrics,
                                                           SendFn send) {
  LONGHAUL_RETURN_IF_ERROR(options.timeouts.Validate());
  std::unique_ptr<Orchestrator> o(new Orchestrator(store, clock, std::move(options), metrics, std::move(send)));
  LONGHAUL_RETURN_IF_ERROR(o->Restore());
  return o;
}

Status Orchestrator::Restore() {
  LONGHAUL_ASSIGN_OR_RETURN(auto regions, store_->LoadRegions());
  for (const auto& r : regions) registry_.AddKnown(r.name, r.capacity, r.data_host, {r.agent_key, r.agent_key_name});
  LONGHAUL_ASSIGN_OR_RETURN(auto jobs, store_->LoadJobs());
  for (auto& rec : jobs) {
    auto job = std::make_unique<Job>();
    job->rec = std::move(rec);
    // Jobs stored before defaults were filled at admission get them now (the
    // same values: defaults only fill what is unset).
    proto::FillJobDefaults(&job->rec.spec);
    job->phase_since = clock_.Now();
    // Finished jobs too: their final validation loss and parameter hash are
    // what `longhaul status` shows after a restart.
    if (job->rec.last_committed_round > 0) {
      LONGHAUL_ASSIGN_OR_RETURN(auto rounds, store_->LoadRounds(job->rec.id));
      if (!rounds.empty()) {
        job->last_hash = rounds.back().param_hash;
        job->checkpoints = {rounds.back().checkpoints.begin(), rounds.back().checkpoints.end()};
        job->last_val_loss = rounds.back().val_loss;
        job->last_predicted = rounds.back().predicted_comm_seconds;
        job->last_actual = rounds.back().comm_seconds;
      }
    }
    for (const auto& r : job->rec.regions) {
      JobMember m;
      m.region = r.region;
      m.index = r.index;
      m.endpoint = r.endpoint;
      m.intra_region = r.intra_region;
      m.intra_region_reason = r.intra_region_reason;
      m.start_param_hash = r.start_param_hash;
      // Until the agent's heartbeat says it still runs the job, trust nothing but
      // what the store says it held.
      m.ready = r.ready && job->rec.state == JobState::kRunning;
      m.holds_state = r.holds_state && job->rec.state == JobState::kRunning;
      if (metrics_ && m.ready) metrics_->IntraRegionBackend(job->rec.id, m.region, m.intra_region);
      job->members.push_back(std::move(m));
    }
    if (!job->rec.idempotency_key.empty()) by_idempotency_key_[job->rec.idempotency_key] = job->rec.id;
    if (job->active() && job->rec.state != JobState::kSubmitted) {
      job->restored = true;
      job->restored_at = clock_.Now();
      spdlog::info("restored {} ({}) at committed round {}/{}, epoch {}", job->rec.id, JobStateName(job->rec.state),
                   job->rec.last_committed_round, job->rec.spec.rounds(), job->rec.epoch);
      Event(*job, "restored",
            "orchestrator restarted; resuming after committed round " + std::to_string(job->rec.last_committed_round));
    }
    job->placement_class = PlacementClass(job->rec.spec);
    index_->Update(*job);
    jobs_[job->rec.id] = std::move(job);
  }
  return Status::Ok();
}

void Orchestrator::Reject(const std::string& why, const std::string& detail) {
  spdlog::warn("rejected control message ({}): {}", why, detail);
  if (metrics_) metrics_->MessageRejected(why);
}

void Orchestrator::Reply(const std::string& identity, const v1::ControlMessage& request, v1::ControlMessage reply) {
  reply.set_sender("orchestrator");
  reply.set_request_id(request.request_id());
  send_(identity, reply);
}

void Orchestrator::ReplyError(const std::string& identity, const v1::ControlMessage& request,
                              const longhaul::Status& status) {
  v1::ControlMessage reply;
  *reply.mutable_error() = proto::ToWireError(status);
  Reply(identity, request, std::move(reply));
}

void Orchestrator::SendToRegion(const std::string& region, v1::ControlMessage msg) {
  const RegionEntry* r = registry_.Find(region);
  if (!r || r->identity.empty()) return;
  msg.set_sender("orchestrator");
  send_(r->identity, msg);
}

bool Orchestrator::FromRegistered(const std::string& identity, const std::string& region, const char* what) {
  const RegionEntry* r = registry_.Find(region);
  if (r && !r->identity.empty() && r->identity == identity) return true;
  Reject("unknown_sender", std::string(what) + " claims region '" + region + "' but that connection did not register it");
  return false;
}

void Orchestrator::Handle(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key) {
  using B = v1::ControlMessage::BodyCase;
  switch (msg.body_case()) {
    case B::kRegisterRegion: return HandleRegister(identity, msg, key);
    case B::kRemoveRegion: return HandleRemoveRegion(identity, msg);
    case B::kHeartbeat: return HandleHeartbeat(identity, msg);
    case B::kJobReady: return HandleJobReady(identity, msg);
    case B::kJobRejected: return HandleJobRejected(identity, msg);
    case B::kRoundReport: return HandleRoundReport(identity, msg);
    case B::kLinkReport: return HandleLinkReport(identity, msg);
    case B::kJobFacts: return HandleJobFacts(identity, msg);
    case B::kSubmitJob: return HandleSubmit(identity, msg, key);
    case B::kCancelJob: return HandleCancel(identity, msg, key);
    case B::kJobStatusRequest: {
      auto st = JobStatusOf(msg.job_status_request().job_id(), key);
      if (!st.ok()) return ReplyError(identity, msg, st.status());
      v1::ControlMessage reply;
      *reply.mutable_job_status() = std::move(st).value();
      return Reply(identity, msg, std::move(reply));
    }
    case B::kListJobs: return HandleListJobs(identity, msg);
    case B::kListRegions: {
      v1::ControlMessage reply;
      auto* list = reply.mutable_list_regions_reply();
      for (auto& info : registry_.Describe()) {
        for (const auto& [peer, e] : links_.MeasuredFrom(info.region())) *info.add_links() = proto::LinkToWire(peer, e);
        *list->add_regions() = std::move(info);
      }
      return Reply(identity, msg, std::move(reply));
    }
    default: {
      std::string body = proto::BodyName(msg);  // built stepwise: GCC 12 -Wrestrict false positive on "'" + s
      body.insert(0, 1, '\'');
      body += '\'';
      Reject("unexpected_body", body + " from " + msg.sender() + " is not a request");
      return ReplyError(identity, msg, InvalidArgument("the orchestrator does not accept " + body + " messages"));
    }
  }
}

void Orchestrator::HandleRegister(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key) {
  const auto& reg = msg.register_region();
  v1::ControlMessage reply;
  auto* r = reply.mutable_register_reply();
  r->set_heartbeat_interval_ms(static_cast<uint32_t>(options_.timeouts.heartbeat_interval.count()));
  *r->mutable_timeouts() = proto::TimeoutsToWire(options_.timeouts);
  auto refuse = [&](const std::string& why, const std::string& reason) {
    r->set_accepted(false);
    r->set_reason(reason);
    Reject(why, reason);
    Reply(identity, msg, std::move(reply));
  };
  if (auto refused = registry_.RegisterRefusal(reg, key)) return refuse("bad_registration", *refused);
  // The name's binding to its key is durable before the agent hears "registered".
  const RegionEntry* known = registry_.Find(reg.region());
  const PeerKey bound = known && !known->agent_key.public_key.empty() ? known->agent_key : key;
  Status saved = store_->SaveRegion(
      {reg.region(), reg.capacity(), reg.data_host(), clock_.UnixSeconds(), bound.public_key, bound.name});
  if (!saved.ok()) {
    spdlog::error("saving region {}: {}", reg.region(), saved.ToString());
    return refuse("state_write_failed", "the orchestrator could not record region '" + reg.region() +
                                            "' in its state file: " + saved.message());
  }
  const bool restarted = registry_.Register(identity, reg, key);
  r->set_accepted(true);
  r->set_reason("registered");
  spdlog::info("region {} registered ({} workers, data host {}{}{})", reg.region(), reg.capacity().workers(),
               reg.data_host(), bound.name.empty() ? "" : ", agent key " + bound.name,
               restarted ? ", a new agent process" : "");
  Reply(identity, msg, std::move(reply));
  if (restarted) {
    RegionRestarted(reg.region());
  } else {
    RegionReconnected(reg.region());
  }
}

void Orchestrator::HandleRemoveRegion(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& req = msg.remove_region();
  const std::string name = spec_limits::ShortQuote(req.region());  // valid UTF-8 in the reply, however long
  const RegionEntry* r = registry_.Find(req.region());
  if (!r) return ReplyError(identity, msg, NotFound("unknown region " + name));
  for (const Job* job : PlacedJobs()) {
    for (const auto& m : job->members)
      if (m.region == r->name)
        return ReplyError(identity, msg,
                          FailedPrecondition("region " + name + " takes part in job " + job->rec.id + " (" +
                                             std::string(JobStateName(job->rec.state)) + "); cancel the job first"));
  }
  if (r->up && !req.force())
    return ReplyError(identity, msg,
                      FailedPrecondition("region " + name + " is up (its agent is heartbeating); stop the agent "
                                         "first, or pass --force (a live agent registers again at once)"));
  if (Status s = store_->DeleteRegion(r->name); !s.ok())
    return ReplyError(identity, msg, s.WithContext("removing region " + name + " from the state file"));
  v1::ControlMessage reply;
  reply.mutable_remove_region_reply()->set_region(r->name);
  reply.mutable_remove_region_reply()->set_released_key(r->agent_key.name);
  spdlog::info("region {} removed by request{}", r->name,
               r->agent_key.name.empty() ? "" : "; released agent key " + r->agent_key.name);
  registry_.Remove(r->name);
  Reply(identity, msg, std::move(reply));
}

void Orchestrator::HandleHeartbeat(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& hb = msg.heartbeat();
  Status s = registry_.Heartbeat(identity, hb);
  if (!s.ok()) {
    Reject("unknown_region", s.message());
    return ReplyError(identity, msg, s);
  }
  v1::ControlMessage ack;
  ack.mutable_heartbeat_ack()->set_seq(hb.seq());
  Reply(identity, msg, std::move(ack));
  ObserveHeartbeat(hb.region(), hb);
}

void Orchestrator::HandleSubmit(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& owner) {
  v1::JobSpec spec = msg.submit_job().spec();
  const std::string& key = msg.submit_job().idempotency_key();
  if (!key.empty() && !request_limits::IsValidIdempotencyKey(key))
    return ReplyError(identity, msg,
                      InvalidArgument("idempotency_key " + spec_limits::ShortQuote(key) + ": at most " +
                                      std::to_string(request_limits::kMaxIdempotencyKeyBytes) +
                                      " characters of [A-Za-z0-9._:-]"));
  // Admission: the one place defaults are filled; the stored and assigned spec is complete.
  proto::FillJobDefaults(&spec);
  if (Status v = ValidateJobSpec(spec); !v.ok()) {
    Reject("bad_job_spec", v.message());
    return ReplyError(identity, msg, v);
  }
  if (auto known = by_idempotency_key_.find(key); !key.empty() && known != by_idempotency_key_.end()) {
    // A retry of a submit whose reply was lost: the job it created, not a second one.
    const Job& first = *jobs_.at(known->second);
    if (!google::protobuf::util::MessageDifferencer::Equals(first.rec.spec, spec))
      return ReplyError(identity, msg,
                        InvalidArgument("idempotency key '" + key + "' was used for " + first.rec.id + " ('" +
                                      first.rec.spec.name() + "') with another spec"));
    spdlog::info("submit with idempotency key {}: {} exists", key, first.rec.id);
    v1::ControlMessage reply;
    reply.mutable_submit_job_reply()->set_job_id(first.rec.id);
    reply.mutable_submit_job_reply()->set_existing(true);
    return Reply(identity, msg, std::move(reply));
  }
  if (Status quota = CheckQuota(owner, spec); !quota.ok()) {
    Reject("quota", quota.message());
    return ReplyError(identity, msg, quota);
  }
  auto id = store_->CreateJob(spec, clock_.UnixSeconds(), key, owner.public_key, owner.name);
  if (!id.ok()) {
    spdlog::error("creating a job: {}", id.status().ToString());
    if (metrics_) metrics_->StateWriteFailed("creating a job");
    return ReplyError(identity, msg, id.status().WithContext("recording the job in the state file"));
  }
  auto job = std::make_unique<Job>();
  job->rec.id = *id;
  job->rec.spec = spec;
  job->rec.idempotency_key = key;
  job->rec.owner_key = owner.public_key;
  job->rec.owner_name = owner.name;
  job->rec.created_at = clock_.UnixSeconds();
  if (!key.empty()) by_idempotency_key_[key] = *id;
  job->phase_since = clock_.Now();
  spdlog::info("job {} '{}' submitted: {} rounds on {} regions", *id, spec.name(), spec.rounds(),
               RequiredRegions(spec));
  job->placement_class = PlacementClass(spec);
  index_->Update(*job);
  jobs_[*id] = std::move(job);
  v1::ControlMessage reply;
  reply.mutable_submit_job_reply()->set_job_id(*id);
  Reply(identity, msg, std::move(reply));
  PlaceWaitingJobs();
  UpdateGauges();
}

void Orchestrator::HandleListJobs(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& req = msg.list_jobs();
  if (req.page_size() > request_limits::kMaxPageSize)
    return ReplyError(identity, msg,
                      InvalidArgument("page_size " + std::to_string(req.page_size()) + " is over the limit of " +
                                      std::to_string(request_limits::kMaxPageSize)));
  if (req.page_token().size() > request_limits::kMaxPageTokenBytes)
    return ReplyError(identity, msg, InvalidArgument("page_token " + spec_limits::ShortQuote(req.page_token()) +
                                                     " is not one this orchestrator gave out"));
  const uint32_t size = req.page_size() == 0 ? request_limits::kDefaultPageSize : req.page_size();
  v1::ControlMessage reply;
  auto* list = reply.mutable_job_list();
  size_t bytes = 0;
  for (auto it = jobs_.upper_bound(req.page_token()); it != jobs_.end(); ++it) {
    v1::JobStatus st = BuildStatus(*it->second);
    st.clear_spec();
    const size_t entry = st.ByteSizeLong();
    if (list->jobs_size() > 0 && (list->jobs_size() >= static_cast<int>(size) ||
                                  bytes + entry > request_limits::kMaxPageBytes)) {
      list->set_next_page_token(list->jobs(list->jobs_size() - 1).job_id());
      break;
    }
    bytes += entry;
    *list->add_jobs() = std::move(st);
  }
  Reply(identity, msg, std::move(reply));
}

Status Orchestrator::CheckQuota(const PeerKey& owner, const v1::JobSpec& spec) const {
  if (owner.public_key.empty()) return Status::Ok();
  const JobIndex::Usage used = index_->UsageOf(owner.public_key);
  const int active = used.active;
  const size_t bytes = spec.ByteSizeLong() + used.spec_bytes;
  if (active >= options_.max_active_jobs_per_key) {
    return ResourceExhausted("key '" + owner.name + "' has " + std::to_string(active) +
                             " jobs not yet ended; the limit per key is " +
                             std::to_string(options_.max_active_jobs_per_key) +
                             " (wait for or cancel one; the operator sets --max-jobs-per-key)");
  }
  if (bytes > options_.max_active_spec_bytes_per_key) {
    return ResourceExhausted("key '" + owner.name + "': its jobs not yet ended would hold " + std::to_string(bytes) +
                             " bytes of specs; the limit per key is " +
                             std::to_string(options_.max_active_spec_bytes_per_key) +
                             " (the operator sets --max-spec-bytes-per-key)");
  }
  return Status::Ok();
}

void Orchestrator::HandleCancel(const std::string& identity, const v1::ControlMessage& msg, const PeerKey& key) {
  auto it = jobs_.find(msg.cancel_job().job_id());
  if (it == jobs_.end()) return ReplyError(identity, msg, NotFound("unknown job '" + msg.cancel_job().job_id() + "'"));
  Job& job = *it->second;
  if (Status allowed = AuthorizeJobControl(job.rec.id, {job.rec.owner_key, job.rec.owner_name}, key); !allowed.ok()) {
    Reject("forbidden", allowed.message());
    return ReplyError(identity, msg, allowed);
  }
  if (!job.active())
    return ReplyError(identity, msg,
                      FailedPrecondition("job " + job.rec.id + " already " + std::string(JobStateName(job.rec.state))));
  FinishJob(job, JobState::kCancelled, key.name.empty() ? "cancelled by user" : "cancelled by key '" + key.name + "'");
  if (job.pending_finish)
    return ReplyError(identity, msg,
                      Unavailable("the cancellation of " + job.rec.id + " is not in the state file yet (" +
                                  job.write_error + "); the orchestrator keeps trying"));
  v1::ControlMessage reply;
  *reply.mutable_job_status() = BuildStatus(job);
  reply.mutable_job_status()->set_worker_output(job.rec.worker_output);  // the caller manages the job
  Reply(identity, msg, std::move(reply));
}

void Orchestrator::HandleLinkReport(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& lr = msg.link_report();
  if (!FromRegistered(identity, lr.region(), "link_report")) return;
  for (const auto& l : lr.links()) {
    auto e = proto::LinkFromWire(l);
    if (!e.ok()) {
      Reject("bad_link_report", "from " + lr.region() + ": " + e.status().message());
      continue;
    }
    links_.SetLink(lr.region(), l.peer(), *e);
    if (metrics_) metrics_->LinkMeasured(lr.region(), l.peer(), e->bytes_per_second, e->rtt_seconds);
  }
}

void Orchestrator::HandleJobFacts(const std::string& identity, const v1::ControlMessage& msg) {
  const auto& f = msg.job_facts();
  if (!FromRegistered(identity, f.region(), "job_facts")) return;
  auto it = jobs_.find(f.job_id());
  if (it == jobs_.end()) return Reject("wrong_job", "job_facts for unknown job '" + f.job_id() + "'");
  if (f.payload_bytes() > 0) it->second->payload_bytes = f.payload_bytes();
  if (f.loss_floor() > 0) it->second->loss_floor = f.loss_floor();
}

void Orchestrator::Tick() {
  for (const auto& [region, reason] : registry_.Sweep()) {
    spdlog::warn("region down: {}", reason);
    RegionWentDown(region);
  }
  PlaceWaitingJobs();
  for (Job* job : JobsNamed(index_->pending())) {
    const Job::PendingFinish p = *job->pending_finish;
    FinishJob(*job, p.state, p.reason);
  }
  for (Job* job : PlacedJobs()) {
    if (job->pending_finish) continue;  // its end is still not written: tried again next tick
    if (job->rec.state == JobState::kScheduled) CheckScheduledJob(*job);
    if (job->rec.state == JobState::kRunning) DriveRunningJob(*job);
  }
  UpdateGauges();
}

void Orchestrator::UpdateGauges() {
  if (!metrics_) return;
  metrics_->SetJobsByState(index_->CountsByState());
  const int up = static_cast<int>(registry_.UpCount());
  metrics_->SetRegions(up, static_cast<int>(registry_.regions().size()) - up);
}

}  // namespace longhaul::orchestrator
